//! (a) The sign-up wave: scripted accounts created through the night from rented cloud
//! machines, among real people signing up.

use crate::addresses;
use crate::timeline::{Poisson, Source};
use crate::visit::{Call, Caller, Visit};

/// The sign-up wave's parameters.
///
/// Defaults: 40,000 attempts in 8 hours, the wave of the simulator's story
/// ([`story_notes`](crate::story_notes)). The attacker rents 400 cloud addresses; a
/// provider hands them out from a few ranges, so they fall in 8 /24 blocks. Its scripts run on
/// an emulator farm of 20 devices whose ids it does not bother to rotate (rotating them is
/// [`devices`](Wave::devices) = a large number; sending none is 0). Real people keep signing up
/// at 120 an hour, each on their own phone from a home connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Wave {
    /// Scripted sign-up attempts in all.
    pub attempts: u64,
    /// Over how many hours.
    pub hours: f64,
    /// The attacker's cloud addresses (1 to 254 a block; see
    /// [`effective_addresses`](Wave::effective_addresses)).
    pub addresses: u64,
    /// The /24 blocks they fall in (1 to 512).
    pub blocks: u64,
    /// The device ids the scripts reuse (0: they send no `X-Device-Id`; at most 10⁹, above
    /// which they would meet real users' ids).
    pub devices: u64,
    /// Real sign-ups an hour meanwhile.
    pub real_signups_per_hour: f64,
}

impl Default for Wave {
    fn default() -> Self {
        Wave {
            attempts: 40_000,
            hours: 8.0,
            addresses: 400,
            blocks: 8,
            devices: 20,
            real_signups_per_hour: 120.0,
        }
    }
}

impl Wave {
    /// The /24 blocks simulated: 1 to 512 (the benchmarking range holds 512).
    pub fn effective_blocks(&self) -> u64 {
        self.blocks.clamp(1, 512)
    }

    /// The addresses simulated: at least 1, at most 254 a block.
    pub fn effective_addresses(&self) -> u64 {
        self.addresses.clamp(1, 254 * self.effective_blocks())
    }

    pub(crate) fn duration(&self) -> u64 {
        (self.hours * 3_600e6) as u64
    }

    pub(crate) fn parameters(&self) -> Vec<(&'static str, String)> {
        vec![
            ("attempts", self.attempts.to_string()),
            ("hours", self.hours.to_string()),
            ("cloud addresses", self.effective_addresses().to_string()),
            ("/24 blocks", self.effective_blocks().to_string()),
            ("device ids", self.devices.to_string()),
            (
                "real sign-ups an hour",
                self.real_signups_per_hour.to_string(),
            ),
        ]
    }

    pub(crate) fn sources(&self) -> Vec<Box<dyn Source>> {
        let end = self.duration();
        let rate = self.attempts as f64 / (self.hours * 3_600.0);
        let (addresses, blocks) = (self.effective_addresses(), self.effective_blocks());
        let devices = self.devices;
        let attacker = Caller::attacker();
        let wave = Poisson::new(rate, 0, end, move |random, at| Visit {
            at,
            caller: attacker,
            from: addresses::cloud(random.below(addresses), blocks),
            call: {
                // Drawn whether or not it is sent, so every device count sees the same visits.
                let device = random.below(devices.max(1));
                Call::Signup {
                    device: (devices > 0).then_some(device),
                }
            },
        });
        let mut person = 0u32;
        let real = Poisson::new(
            self.real_signups_per_hour / 3_600.0,
            0,
            end,
            move |random, at| {
                person += 1;
                Visit {
                    at,
                    caller: Caller::innocent(1, person),
                    from: addresses::home(random),
                    call: Call::Signup {
                        device: Some(1_000_000_000 + u64::from(person)),
                    },
                }
            },
        );
        vec![Box::new(wave), Box::new(real)]
    }
}
