//! (b) The partner loop: one partner's job stuck in a loop, calling as fast as it can for an
//! hour, beside its own normal traffic, the other partners' and the users'.

use crate::addresses;
use crate::people::{Habits, Person};
use crate::timeline::{Poisson, Source};
use crate::visit::{Call, Caller, Visit};

/// The looping partner's API key (it has no contract quota of its own in Chirp's file).
pub const LOOPING_KEY: &str = "partner-loop";

/// The partner loop's parameters.
///
/// Defaults: 5,000 requests a second for an hour (the loop of the simulator's story,
/// [`story_notes`](crate::story_notes)), starting 5 minutes in, from the
/// partner's 4 servers. The partner's normal jobs send 20 a second on the same key; four other
/// partners send 300 (`partner-acme`, under a 500-a-second contract), 50, 10 and 2 a second,
/// each from 2 servers; 1,000 users browse from home.
#[derive(Debug, Clone, PartialEq)]
pub struct PartnerLoop {
    /// The loop's requests a second.
    pub loop_per_second: f64,
    /// Minutes of normal traffic before the loop starts (and after it stops).
    pub quiet_minutes: f64,
    /// How long the loop runs.
    pub loop_minutes: f64,
    /// The looping partner's normal traffic, requests a second, on the same key.
    pub normal_per_second: f64,
    /// The other partners: API key and requests a second.
    pub other_partners: Vec<(&'static str, f64)>,
    /// Users browsing meanwhile.
    pub users: u32,
    /// How they browse.
    pub habits: Habits,
}

impl Default for PartnerLoop {
    fn default() -> Self {
        PartnerLoop {
            loop_per_second: 5_000.0,
            quiet_minutes: 5.0,
            loop_minutes: 60.0,
            normal_per_second: 20.0,
            other_partners: vec![
                ("partner-acme", 300.0),
                ("partner-b", 50.0),
                ("partner-c", 10.0),
                ("partner-d", 2.0),
            ],
            users: 1_000,
            habits: Habits::default(),
        }
    }
}

impl PartnerLoop {
    /// Whether there is a loop at all (a positive rate for a positive time).
    pub(crate) fn loops(&self) -> bool {
        self.loop_per_second.is_finite()
            && self.loop_per_second > 0.0
            && self.loop_end() > self.loop_start()
    }

    /// When the loop starts (µs).
    pub fn loop_start(&self) -> u64 {
        (self.quiet_minutes * 60e6) as u64
    }

    /// When the loop stops (µs).
    pub fn loop_end(&self) -> u64 {
        self.loop_start()
            .saturating_add((self.loop_minutes * 60e6) as u64)
    }

    pub(crate) fn duration(&self) -> u64 {
        self.loop_end().saturating_add(self.loop_start())
    }

    pub(crate) fn parameters(&self) -> Vec<(&'static str, String)> {
        let others = self
            .other_partners
            .iter()
            .map(|(key, rate)| format!("{key} {rate}/s"))
            .collect::<Vec<_>>()
            .join(", ");
        vec![
            ("loop requests a second", self.loop_per_second.to_string()),
            ("loop minutes", self.loop_minutes.to_string()),
            (
                "quiet minutes before and after",
                self.quiet_minutes.to_string(),
            ),
            (
                "the partner's normal requests a second",
                self.normal_per_second.to_string(),
            ),
            ("other partners", others),
            ("users", self.users.to_string()),
            ("habits", self.habits.to_string()),
        ]
    }

    pub(crate) fn sources(&self) -> Vec<Box<dyn Source>> {
        let end = self.duration();
        let looping = Poisson::new(
            self.loop_per_second,
            self.loop_start(),
            self.loop_end(),
            |random, at| Visit {
                at,
                caller: Caller::attacker(),
                from: addresses::partner_server(0, random.below(4)),
                call: Call::Partner { key: LOOPING_KEY },
            },
        );
        let mut sources: Vec<Box<dyn Source>> = vec![Box::new(looping)];
        // Innocent callers: the users (group 0), the partners' normal traffic (group 1).
        let partners = std::iter::once((LOOPING_KEY, self.normal_per_second))
            .chain(self.other_partners.iter().copied());
        for (index, (key, rate)) in partners.enumerate() {
            let caller = Caller::innocent(1, index as u32);
            let servers = if index == 0 { 4 } else { 2 };
            let partner = index as u64;
            sources.push(Box::new(Poisson::new(rate, 0, end, move |random, at| {
                Visit {
                    at,
                    caller,
                    from: addresses::partner_server(partner, random.below(servers)),
                    call: Call::Partner { key },
                }
            })));
        }
        for user in 0..self.users {
            sources.push(Box::new(Person::at_home(user, self.habits.clone(), end)));
        }
        sources
    }
}
