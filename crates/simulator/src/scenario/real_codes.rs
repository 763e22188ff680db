//! Real people asking for one-time codes among an SMS pumping attack, shared by the code-fraud
//! scenario and the outage scenario: some of their numbers in the attack's countries and ranges.

use std::collections::BTreeMap;
use std::fmt;

use crate::addresses;
use crate::phones::{Country, HOME, RANGE_SIZE, Range};
use crate::random::Random;
use crate::timeline::Source;
use crate::visit::{Call, Caller, Visit};

use super::pumping::Targets;

/// Real people asking for one-time codes: each to their own phone, as they sign up (signed
/// out, naming the app's device) or sign in (signed in). The figures are parameters, printed
/// with the results.
#[derive(Debug, Clone, PartialEq)]
pub struct RealCodes {
    /// People asking for a code, an hour (each a newcomer of the scenario).
    pub per_hour: f64,
    /// Chance a code is late and the person asks again 30 to 120 s later; a second retry is as
    /// likely again.
    pub late_chance: f64,
    /// Share of them signed in (a login's second step); the rest are signing up.
    pub signed_in: f64,
    /// Share behind a carrier's NAT (its addresses from 100.64.0.1, one /24 block, as the crowd
    /// scenario's); the rest at home, rarely two in a block.
    pub behind_nat: f64,
    /// The NAT's addresses.
    pub nat_addresses: u64,
    /// Share whose number is in one of the attack's destination countries (anywhere in it).
    pub in_attacked_countries: f64,
    /// Share whose number is in one of the attack's very ranges.
    pub in_attacked_ranges: f64,
}

impl Default for RealCodes {
    fn default() -> Self {
        RealCodes {
            per_hour: 600.0,
            late_chance: 0.1,
            signed_in: 0.5,
            behind_nat: 0.25,
            nat_addresses: 16,
            in_attacked_countries: 0.2,
            in_attacked_ranges: 0.01,
        }
    }
}

impl fmt::Display for RealCodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} people an hour ({:.0}% signed in), late {:.0}% (asked again, as likely again), \
             {:.0}% behind {} NAT addresses, numbers {:.0}% in the attack's countries and \
             {:.0}% in its ranges",
            self.per_hour,
            self.signed_in * 100.0,
            self.late_chance * 100.0,
            self.behind_nat * 100.0,
            self.nat_addresses,
            self.in_attacked_countries * 100.0,
            self.in_attacked_ranges * 100.0
        )
    }
}

/// The innocent group real code askers are numbered in.
const REAL_CODES_GROUP: u32 = 4;
/// Real askers' accounts and devices, numbered apart from the browsing users' and sign-ups'.
const REAL_ACCOUNTS: u32 = 100_000_000;
const REAL_DEVICES: u64 = 3_000_000_000;

impl RealCodes {
    /// Real people's code requests from 0 to `end` (µs), some in `targets`' countries and
    /// ranges.
    pub(crate) fn source(&self, targets: &Targets, end: u64) -> Box<dyn Source> {
        Box::new(CodeAskers {
            model: self.clone(),
            ranges: targets.ranges.clone(),
            countries: targets.countries.clone(),
            end,
            at: 0,
            upcoming: None,
            people: 0,
            pending: BTreeMap::new(),
            order: 0,
        })
    }
}

/// Real people as a source: a Poisson stream of people, each asking once and again while the
/// code is late.
struct CodeAskers {
    model: RealCodes,
    ranges: Vec<Range>,
    countries: Vec<&'static Country>,
    end: u64,
    at: u64,
    /// When the next person starts (drawn once the last one started).
    upcoming: Option<u64>,
    people: u32,
    /// Asks planned, by (time, order of planning).
    pending: BTreeMap<(u64, u64), Visit>,
    order: u64,
}

impl CodeAskers {
    /// A number for the next person: in the attack's ranges, its countries, or at home.
    fn number(&self, random: &mut Random) -> u64 {
        if !self.ranges.is_empty() && random.chance(self.model.in_attacked_ranges) {
            let range = self.ranges[random.below(self.ranges.len() as u64) as usize];
            return range.number(random.below(RANGE_SIZE));
        }
        if !self.countries.is_empty() && random.chance(self.model.in_attacked_countries) {
            let country = self.countries[random.below(self.countries.len() as u64) as usize];
            return country.number(random);
        }
        HOME[random.below(HOME.len() as u64) as usize].number(random)
    }

    /// Plans the asks of a person starting at `at`.
    fn start_person(&mut self, random: &mut Random, at: u64) {
        self.people += 1;
        let person = self.people;
        let phone = self.number(random);
        let signed_in = random.chance(self.model.signed_in);
        let from = if random.chance(self.model.behind_nat) {
            addresses::carrier_nat(random.below(self.model.nat_addresses.clamp(1, 254)))
        } else {
            addresses::home(random)
        };
        let call = Call::Otp {
            phone,
            account: signed_in.then(|| REAL_ACCOUNTS.saturating_add(person)),
            device: Some(REAL_DEVICES + u64::from(person)),
        };
        let mut ask_at = at;
        for ask in 0..3 {
            if ask > 0 {
                if !random.chance(self.model.late_chance) {
                    break;
                }
                ask_at += random.between(30_000_000, 120_000_000);
            }
            self.order += 1;
            let visit = Visit {
                at: ask_at,
                caller: Caller::innocent(REAL_CODES_GROUP, person),
                from,
                call: call.clone(),
            };
            self.pending.insert((ask_at, self.order), visit);
        }
    }
}

impl Source for CodeAskers {
    fn next(&mut self, random: &mut Random) -> Option<Visit> {
        let per_second = self.model.per_hour / 3_600.0;
        loop {
            if self.upcoming.is_none() && per_second.is_finite() && per_second > 0.0 {
                self.upcoming = Some(self.at.saturating_add(random.gap_micros(per_second)));
            }
            let next_person = self.upcoming.filter(|at| *at < self.end);
            let next_ask = self.pending.first_key_value().map(|((at, _), _)| *at);
            match (next_ask, next_person) {
                (Some(ask), Some(person)) if person < ask => {}
                (Some(ask), _) => {
                    let (_, visit) = self.pending.pop_first()?;
                    return (ask < self.end).then_some(visit);
                }
                (None, None) => return None,
                (None, Some(_)) => {}
            }
            let person = next_person?;
            self.upcoming = None;
            self.at = person;
            self.start_person(random, person);
        }
    }
}
