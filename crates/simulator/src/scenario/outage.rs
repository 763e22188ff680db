//! (d) A store outage during normal traffic, while a fraudster pumps one-time codes to premium
//! numbers it is paid for: where failing open and failing closed each cost something.

use std::ops::Range;

use crate::addresses;
use crate::people::{Habits, Person};
use crate::random::Random;
use crate::timeline::{Poisson, Source};
use crate::visit::{Call, Caller, Visit};

use super::otp::{DEFAULT_SMS_PRICE, TARGETS_STREAM};
use super::pumping::{OtpAttack, Targets};
use super::real_codes::RealCodes;

/// The outage scenario's parameters.
///
/// Defaults: 30 minutes of normal traffic (1,000 users browsing, 120 real sign-ups an hour,
/// [`RealCodes`]' 600 people an hour asking for one-time codes, one partner at 20 a second)
/// with the store down from minute 10 to minute 15. Throughout, a fraudster pumps codes to
/// premium numbers ([`OtpAttack`]'s defaults but for its length: 10 codes a second to 2,000
/// numbers in 20 ranges, from 50 rented addresses), as the code-fraud scenario's attacker; the
/// scenario lasts as long as the attack.
#[derive(Debug, Clone, PartialEq)]
pub struct OutageAndFraud {
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
    /// Real people asking for one-time codes.
    pub codes: RealCodes,
    /// A partner's requests a second.
    pub partner_per_second: f64,
    /// The fraudster's attack; the scenario lasts as long.
    pub attack: OtpAttack,
    /// What sending one code costs (for the bill), in dollars.
    pub sms_price: f64,
}

impl Default for OutageAndFraud {
    fn default() -> Self {
        OutageAndFraud {
            outage_from_minute: 10.0,
            outage_minutes: 5.0,
            users: 1_000,
            habits: Habits::default(),
            real_signups_per_hour: 120.0,
            codes: RealCodes::default(),
            partner_per_second: 20.0,
            attack: OtpAttack {
                hours: 0.5,
                ..OtpAttack::default()
            },
            sms_price: DEFAULT_SMS_PRICE,
        }
    }
}

impl OutageAndFraud {
    pub(crate) fn duration(&self) -> u64 {
        self.attack.duration()
    }

    /// When the store is down (µs from the start).
    pub fn outage(&self) -> Range<u64> {
        let from = (self.outage_from_minute * 60e6) as u64;
        from..from + (self.outage_minutes * 60e6) as u64
    }

    pub(crate) fn parameters(&self) -> Vec<(&'static str, String)> {
        let mut parameters = vec![
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
            (
                "partner requests a second",
                self.partner_per_second.to_string(),
            ),
            ("real codes", self.codes.to_string()),
            ("SMS price", format!("${}", self.sms_price)),
        ];
        parameters.extend(self.attack.parameters());
        parameters
    }

    pub(crate) fn sources(&self, seed: u64) -> Vec<Box<dyn Source>> {
        let end = self.duration();
        let targets = Targets::draw(&self.attack, &mut Random::new(seed ^ TARGETS_STREAM));
        // Innocent callers: the users (group 0); each real sign-up (group 1) and each person
        // asking for a code (group 4) a newcomer of its own; the partner (group 3).
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
        let partner_caller = Caller::innocent(3, 0);
        let partner = Poisson::new(self.partner_per_second, 0, end, move |random, at| Visit {
            at,
            caller: partner_caller,
            from: addresses::partner_server(1, random.below(2)),
            call: Call::Partner { key: "partner-b" },
        });
        let mut sources: Vec<Box<dyn Source>> = vec![
            self.attack.source(&targets, end),
            Box::new(signups),
            self.codes.source(&targets, end),
            Box::new(partner),
        ];
        for user in 0..self.users {
            sources.push(Box::new(Person::at_home(user, self.habits.clone(), end)));
        }
        sources
    }
}
