//! (d) A store outage during normal traffic, while a fraudster pumps one-time codes to premium
//! numbers it is paid for: where failing open and failing closed each cost something.

use std::ops::Range;

use crate::addresses;
use crate::people::{Habits, Person};
use crate::timeline::{Poisson, Source};
use crate::visit::{Call, Caller, Visit};

/// The outage scenario's parameters.
///
/// Defaults: 30 minutes of normal traffic (1,000 users browsing, 120 real sign-ups and 600
/// real one-time codes an hour, one partner at 20 a second) with the store down from minute
/// 10 to minute 15. Throughout, a fraudster asks for 10 codes a second to 2,000 premium
/// numbers from 50 rented addresses (SMS pumping: each code sent earns it a share of the fee).
#[derive(Debug, Clone, PartialEq)]
pub struct OutageAndFraud {
    /// How long the scenario runs.
    pub minutes: f64,
    /// When the store goes down (minutes from the start).
    pub outage_from_minute: f64,
    /// For how long.
    pub outage_minutes: f64,
    /// Users browsing.
    pub users: u32,
    /// How they browse.
    pub habits: Habits,
    /// Real sign-ups an hour.
    pub real_signups_per_hour: f64,
    /// Real one-time codes an hour (each to the person's own phone).
    pub real_codes_per_hour: f64,
    /// A partner's requests a second.
    pub partner_per_second: f64,
    /// The fraudster's code requests a second.
    pub fraud_per_second: f64,
    /// The fraudster's addresses.
    pub fraud_addresses: u64,
    /// The premium numbers it sends codes to.
    pub fraud_numbers: u64,
}

impl Default for OutageAndFraud {
    fn default() -> Self {
        OutageAndFraud {
            minutes: 30.0,
            outage_from_minute: 10.0,
            outage_minutes: 5.0,
            users: 1_000,
            habits: Habits::default(),
            real_signups_per_hour: 120.0,
            real_codes_per_hour: 600.0,
            partner_per_second: 20.0,
            fraud_per_second: 10.0,
            fraud_addresses: 50,
            fraud_numbers: 2_000,
        }
    }
}

impl OutageAndFraud {
    pub(crate) fn duration(&self) -> u64 {
        (self.minutes * 60e6) as u64
    }

    /// When the store is down (µs from the start).
    pub fn outage(&self) -> Range<u64> {
        let from = (self.outage_from_minute * 60e6) as u64;
        from..from + (self.outage_minutes * 60e6) as u64
    }

    pub(crate) fn parameters(&self) -> Vec<(&'static str, String)> {
        vec![
            ("minutes", self.minutes.to_string()),
            (
                "store down",
                format!(
                    "from minute {} for {} minutes",
                    self.outage_from_minute, self.outage_minutes
                ),
            ),
            ("users", self.users.to_string()),
            ("habits", self.habits.to_string()),
            (
                "real sign-ups an hour",
                self.real_signups_per_hour.to_string(),
            ),
            ("real codes an hour", self.real_codes_per_hour.to_string()),
            (
                "partner requests a second",
                self.partner_per_second.to_string(),
            ),
            ("fraud codes a second", self.fraud_per_second.to_string()),
            ("fraud addresses", self.fraud_addresses.to_string()),
            ("premium numbers", self.fraud_numbers.to_string()),
        ]
    }

    pub(crate) fn sources(&self) -> Vec<Box<dyn Source>> {
        let end = self.duration();
        let (addresses, numbers) = (self.fraud_addresses.max(1), self.fraud_numbers.max(1));
        let fraud = Poisson::new(self.fraud_per_second, 0, end, move |random, at| Visit {
            at,
            caller: Caller::attacker(),
            from: addresses::cloud(random.below(addresses), 16),
            call: Call::Otp {
                phone: 882_000_000_000 + random.below(numbers),
            },
        });
        // Innocent callers: the users (group 0); each real sign-up (group 1) and each real code
        // (group 2) a newcomer of its own; the partner (group 3).
        let newcomers = |group: u32| {
            let mut count = 0;
            move || {
                count += 1;
                (count, Caller::innocent(group, count))
            }
        };
        let mut signup = newcomers(1);
        let signups = Poisson::new(
            self.real_signups_per_hour / 3_600.0,
            0,
            end,
            move |random, at| {
                let (number, caller) = signup();
                Visit {
                    at,
                    caller,
                    from: addresses::home(random),
                    call: Call::Signup {
                        device: Some(1_000_000_000 + u64::from(number)),
                    },
                }
            },
        );
        let mut code = newcomers(2);
        let codes = Poisson::new(
            self.real_codes_per_hour / 3_600.0,
            0,
            end,
            move |random, at| {
                let (number, caller) = code();
                Visit {
                    at,
                    caller,
                    from: addresses::home(random),
                    call: Call::Otp {
                        phone: 447_700_000_000 + u64::from(number),
                    },
                }
            },
        );
        let partner_caller = Caller::innocent(3, 0);
        let partner = Poisson::new(self.partner_per_second, 0, end, move |random, at| Visit {
            at,
            caller: partner_caller,
            from: addresses::partner_server(1, random.below(2)),
            call: Call::Partner { key: "partner-b" },
        });
        let mut sources: Vec<Box<dyn Source>> = vec![
            Box::new(fraud),
            Box::new(signups),
            Box::new(codes),
            Box::new(partner),
        ];
        for user in 0..self.users {
            sources.push(Box::new(Person::at_home(user, self.habits.clone(), end)));
        }
        sources
    }
}
