//! (c) The crowd behind a carrier's NAT: thousands of real users sharing a few addresses.

use crate::addresses;
use crate::people::{Habits, Person};
use crate::timeline::Source;

/// The crowd's parameters.
///
/// Defaults: 5,000 real users (the crowd of the simulator's story, [`story_notes`](crate::story_notes))
/// behind 8 IPv4 addresses of a mobile carrier's NAT,
/// browsing, posting and logging in for an hour with [`Habits::default`]. There are no
/// attackers: every refusal blocks a real person.
#[derive(Debug, Clone, PartialEq)]
pub struct Crowd {
    /// Real users.
    pub users: u32,
    /// The NAT's public addresses, from 100.64.0.1 (1 to 254: one /24 block).
    pub addresses: u64,
    /// How long they browse.
    pub minutes: f64,
    /// How they browse.
    pub habits: Habits,
}

impl Default for Crowd {
    fn default() -> Self {
        Crowd {
            users: 5_000,
            addresses: 8,
            minutes: 60.0,
            habits: Habits::default(),
        }
    }
}

impl Crowd {
    /// The NAT addresses simulated: 1 to 254.
    pub fn effective_addresses(&self) -> u64 {
        self.addresses.clamp(1, 254)
    }

    pub(crate) fn duration(&self) -> u64 {
        (self.minutes * 60e6) as u64
    }

    pub(crate) fn parameters(&self) -> Vec<(&'static str, String)> {
        vec![
            ("users", self.users.to_string()),
            ("NAT addresses", self.effective_addresses().to_string()),
            ("minutes", self.minutes.to_string()),
            ("habits", self.habits.to_string()),
        ]
    }

    pub(crate) fn sources(&self) -> Vec<Box<dyn Source>> {
        let end = self.duration();
        let addresses = self.effective_addresses();
        (0..self.users)
            .map(|user| {
                let from = addresses::carrier_nat(u64::from(user) % addresses);
                Box::new(Person::behind(user, from, self.habits.clone(), end)) as Box<dyn Source>
            })
            .collect()
    }
}
