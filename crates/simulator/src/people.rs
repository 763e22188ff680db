//! Real users: each comes back to the app now and then and, in a session, reads the feed and
//! profiles, sometimes posts or follows someone, and sometimes has to log in again.

use std::fmt;
use std::net::IpAddr;

use crate::random::Random;
use crate::timeline::Source;
use crate::visit::{Call, Caller, Visit};

/// How real users behave. The defaults describe a heavy but human user of a social app; every
/// figure is a parameter, printed with the results.
#[derive(Debug, Clone, PartialEq)]
pub struct Habits {
    /// Mean minutes between the starts of a user's sessions (2 an hour: a heavy user).
    pub minutes_between_sessions: f64,
    /// Reads in a session, from and to (the feed, and 30% of them profiles).
    pub reads_per_session: (u64, u64),
    /// The first reads of a session come in a burst as the app loads (up to this many,
    /// 150–600 ms apart); the rest are 2–15 s apart, as someone scrolls and reads.
    pub burst_reads: u64,
    /// Chance a session posts once (and, again, twice).
    pub post_chance: f64,
    /// Chance a session follows someone.
    pub follow_chance: f64,
    /// Chance a session starts with a login (the session expired).
    pub login_chance: f64,
    /// Chance a login mistypes the password first.
    pub typo_chance: f64,
    /// Share of users who are power users: four times the reads, sessions three times as often.
    pub power_users: f64,
}

impl Default for Habits {
    fn default() -> Self {
        Habits {
            minutes_between_sessions: 30.0,
            reads_per_session: (5, 40),
            burst_reads: 10,
            post_chance: 0.3,
            follow_chance: 0.15,
            login_chance: 0.2,
            typo_chance: 0.05,
            power_users: 0.05,
        }
    }
}

impl fmt::Display for Habits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a session every {} min on average, {}–{} reads (the first {} in a burst), \
             posts {:.0}%, follows {:.0}%, logs in {:.0}% (typo {:.0}%), power users {:.0}%",
            self.minutes_between_sessions,
            self.reads_per_session.0,
            self.reads_per_session.1,
            self.burst_reads,
            self.post_chance * 100.0,
            self.follow_chance * 100.0,
            self.login_chance * 100.0,
            self.typo_chance * 100.0,
            self.power_users * 100.0
        )
    }
}

/// One real user, as a source of visits.
pub(crate) struct Person {
    account: u32,
    caller: Caller,
    /// Its address: fixed (behind a carrier's NAT), or drawn at the start (a home).
    from: Option<IpAddr>,
    habits: Habits,
    power: bool,
    end: u64,
    /// The rest of the current session, latest first.
    session: Vec<Visit>,
    next_session: u64,
    started: bool,
}

impl Person {
    /// Innocent caller `account` at home (an address drawn from the seed), active until `end`
    /// (µs).
    pub(crate) fn at_home(account: u32, habits: Habits, end: u64) -> Self {
        Person::new(account, None, habits, end)
    }

    /// Innocent caller `account` behind the shared address `from`, active until `end` (µs).
    pub(crate) fn behind(account: u32, from: IpAddr, habits: Habits, end: u64) -> Self {
        Person::new(account, Some(from), habits, end)
    }

    fn new(account: u32, from: Option<IpAddr>, habits: Habits, end: u64) -> Self {
        Person {
            account,
            caller: Caller::innocent(0, account),
            from,
            habits,
            power: false,
            end,
            session: Vec::new(),
            next_session: 0,
            started: false,
        }
    }

    fn minutes_between_sessions(&self) -> f64 {
        let minutes = self.habits.minutes_between_sessions;
        if self.power { minutes / 3.0 } else { minutes }
    }

    /// Plans the session starting at `start`, latest visit first.
    fn plan(&mut self, random: &mut Random, start: u64) {
        let from = *self
            .from
            .get_or_insert_with(|| crate::addresses::home(random));
        let account = self.account;
        let mut calls: Vec<(u64, Call)> = Vec::new();
        let mut at = start;
        if random.chance(self.habits.login_chance) {
            if random.chance(self.habits.typo_chance) {
                calls.push((
                    at,
                    Call::Login {
                        account,
                        right_password: false,
                    },
                ));
                at += random.between(3_000_000, 10_000_000);
            }
            calls.push((
                at,
                Call::Login {
                    account,
                    right_password: true,
                },
            ));
            at += random.between(500_000, 2_000_000);
        }
        let (low, high) = self.habits.reads_per_session;
        let reads = random.between(low, high) * if self.power { 4 } else { 1 };
        for read in 0..reads {
            let call = if random.chance(0.3) {
                Call::Profile {
                    account,
                    profile: random.below(1_000_000) as u32,
                }
            } else {
                Call::Feed { account }
            };
            calls.push((at, call));
            at += if read < self.habits.burst_reads {
                random.between(150_000, 600_000)
            } else {
                random.between(2_000_000, 15_000_000)
            };
        }
        let span = at - start;
        let sometime = |random: &mut Random| start + random.below(span.max(1));
        if random.chance(self.habits.post_chance) {
            calls.push((sometime(random), Call::Post { account }));
            if random.chance(self.habits.post_chance) {
                calls.push((sometime(random), Call::Post { account }));
            }
        }
        if random.chance(self.habits.follow_chance) {
            let target = random.below(1_000_000) as u32;
            calls.push((sometime(random), Call::Follow { account, target }));
        }
        calls.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        self.session = calls
            .into_iter()
            .map(|(at, call)| Visit {
                at,
                caller: self.caller,
                from,
                call,
            })
            .collect();
    }
}

impl Source for Person {
    fn next(&mut self, random: &mut Random) -> Option<Visit> {
        if !self.started {
            self.started = true;
            self.power = random.chance(self.habits.power_users);
            // Somewhere in their cycle when the scenario starts.
            let gap = self.minutes_between_sessions() * 60.0;
            self.next_session = random.below((gap * 1e6) as u64);
        }
        loop {
            if let Some(visit) = self.session.pop() {
                if visit.at >= self.end {
                    self.session.clear();
                    return None;
                }
                return Some(visit);
            }
            if self.next_session >= self.end {
                return None;
            }
            let start = self.next_session;
            self.plan(random, start);
            let last = self.session.first().map_or(start, |visit| visit.at);
            let gap = random.gap_micros(1.0 / (self.minutes_between_sessions() * 60.0));
            self.next_session = last + gap;
        }
    }
}
