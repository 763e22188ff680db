//! One-time codes by SMS: a pumping attacker's requests and real people's, shared by the
//! code-fraud scenario and the outage scenario.

use std::collections::BTreeMap;
use std::fmt;

use crate::addresses;
use crate::phones::{Country, HOME, PREMIUM, RANGE_SIZE, Range};
use crate::random::Random;
use crate::timeline::Source;
use crate::visit::{Call, Caller, Visit};

/// An SMS pumping attack: code requests to premium-rate numbers the attacker is paid for,
/// packed into a few ranges of far-off destinations, from rented cloud addresses. Every field
/// is a flag of `tollgate-sim` (`--otp-rate`, `--otp-addresses`, ...).
///
/// The attacker's script sends a fresh `X-Device-Id` with every request (an id costs nothing
/// to make up); with `signs_up` above 0 it first makes an account (a `POST /signup`) for each
/// `signs_up` codes and asks for them signed in as it. The simulation plays the codes either
/// way: it does not drop those whose account's sign-up was refused.
#[derive(Debug, Clone, PartialEq)]
pub struct OtpAttack {
    /// Code requests a second.
    pub per_second: f64,
    /// The addresses it sends from (at most 254 a block).
    pub addresses: u64,
    /// The /24 blocks they fall in (1 to 512, at most one an address).
    pub blocks: u64,
    /// The premium numbers it asks codes for (at most 10,000 a range).
    pub numbers: u64,
    /// The ranges (10,000 numbers each: a number but its last four digits) they fall in, spread
    /// over up to 3 destinations (1 to 1,000: the smallest destination holds about 700).
    pub ranges: u64,
    /// Accounts made first, one per this many codes (0: none; it asks signed out).
    pub signs_up: u64,
    /// How long it lasts (the scenario lasts as long).
    pub hours: f64,
}

impl Default for OtpAttack {
    fn default() -> Self {
        OtpAttack {
            per_second: 10.0,
            addresses: 50,
            blocks: 4,
            numbers: 2_000,
            ranges: 20,
            signs_up: 0,
            hours: 1.0,
        }
    }
}

impl OtpAttack {
    /// What is wrong with these parameters, if anything (each is otherwise simulated as given).
    ///
    /// ```
    /// use tollgate_simulator::OtpAttack;
    ///
    /// assert_eq!(OtpAttack::default().problem(), None);
    /// let crowded = OtpAttack { numbers: 30_001, ranges: 3, ..OtpAttack::default() };
    /// assert!(crowded.problem().is_some_and(|problem| problem.contains("10,000 a range")));
    /// ```
    pub fn problem(&self) -> Option<String> {
        let fail = |problem: String| Some(problem);
        if !(self.per_second.is_finite() && (0.0..=1_000_000.0).contains(&self.per_second)) {
            return fail(format!("a rate of {} a second", self.per_second));
        }
        if !(self.hours.is_finite() && self.hours * 3_600.0 >= 1.0 && self.hours <= 1_000.0) {
            return fail(format!(
                "an attack of {} hours (a second to 1,000 hours)",
                self.hours
            ));
        }
        if !(1..=512).contains(&self.blocks) || self.blocks > self.addresses {
            return fail(format!(
                "{} blocks for {} addresses (1 to 512, at most one an address)",
                self.blocks, self.addresses
            ));
        }
        if self.addresses == 0 || self.addresses > 254 * self.blocks {
            return fail(format!(
                "{} addresses in {} /24 blocks (1 to {})",
                self.addresses,
                self.blocks,
                254 * self.blocks
            ));
        }
        if !(1..=MAX_RANGES).contains(&self.ranges) {
            return fail(format!("{} ranges (1 to 1,000)", self.ranges));
        }
        if self.numbers < self.ranges || self.numbers > self.ranges * RANGE_SIZE {
            return fail(format!(
                "{} numbers in {} ranges (at least one and at most 10,000 a range)",
                self.numbers, self.ranges
            ));
        }
        None
    }

    pub(crate) fn duration(&self) -> u64 {
        (self.hours * 3_600e6) as u64
    }

    pub(crate) fn parameters(&self) -> Vec<(&'static str, String)> {
        let signs_up = match self.signs_up {
            0 => "none: it asks signed out".to_owned(),
            n => format!("one account per {n} codes"),
        };
        vec![
            ("attack: codes a second", self.per_second.to_string()),
            ("attack: hours", self.hours.to_string()),
            (
                "attack: addresses",
                format!("{} in {} /24 blocks", self.addresses, self.blocks),
            ),
            (
                "attack: premium numbers",
                format!("{} in {} ranges", self.numbers, self.ranges),
            ),
            ("attack: accounts", signs_up),
        ]
    }

    /// The attacker's visits from 0 to `end` (µs), to `targets`.
    pub(crate) fn source(&self, targets: &Targets, end: u64) -> Box<dyn Source> {
        Box::new(Pumping {
            per_second: self.per_second,
            at: 0,
            end,
            addresses: self.addresses.max(1),
            blocks: self.blocks.max(1),
            numbers: targets.numbers(self.numbers),
            signs_up: self.signs_up,
            codes: 0,
            queued: None,
        })
    }
}

/// The most ranges an attack may use: spread over its 3 destinations, each holds them (the
/// smallest, Moldova's mobile numbers, about 700).
pub(crate) const MAX_RANGES: u64 = 1_000;

/// The attacker's devices and accounts, numbered apart from real people's.
const ATTACKER_DEVICES: u64 = 5_000_000_000;
const ATTACKER_ACCOUNTS: u32 = 2_000_000_000;

/// The attacker as a source of visits: a Poisson stream of code requests, each account's first
/// code preceded by its sign-up.
struct Pumping {
    per_second: f64,
    at: u64,
    end: u64,
    addresses: u64,
    blocks: u64,
    numbers: Vec<u64>,
    signs_up: u64,
    codes: u64,
    /// A code waiting behind its account's sign-up (at the same moment).
    queued: Option<Visit>,
}

impl Source for Pumping {
    fn next(&mut self, random: &mut Random) -> Option<Visit> {
        if let Some(code) = self.queued.take() {
            return Some(code);
        }
        if !(self.per_second.is_finite() && self.per_second > 0.0) || self.numbers.is_empty() {
            return None;
        }
        self.at = self.at.saturating_add(random.gap_micros(self.per_second));
        if self.at >= self.end {
            return None;
        }
        let from = addresses::cloud(random.below(self.addresses), self.blocks);
        let phone = self.numbers[random.below(self.numbers.len() as u64) as usize];
        let mut device = || Some(ATTACKER_DEVICES + random.below(u64::from(u32::MAX)));
        let account = (self.signs_up > 0)
            .then(|| ATTACKER_ACCOUNTS.saturating_add((self.codes / self.signs_up) as u32));
        let first_of_account = self.signs_up > 0 && self.codes.is_multiple_of(self.signs_up);
        self.codes += 1;
        let visit = |call| Visit {
            at: self.at,
            caller: Caller::attacker(),
            from,
            call,
        };
        let code = visit(Call::Otp {
            phone,
            account,
            device: device(),
        });
        if first_of_account {
            self.queued = Some(code);
            return Some(visit(Call::Signup { device: device() }));
        }
        Some(code)
    }
}

/// Where an attack sends its codes: its ranges (spread over up to 3 premium destinations),
/// drawn from the seed.
pub(crate) struct Targets {
    ranges: Vec<Range>,
    countries: Vec<&'static Country>,
}

impl Targets {
    /// `attack`'s ranges, drawn from `random` (as many as [`OtpAttack::problem`] allows; each
    /// destination holds a third of [`MAX_RANGES`] many times over).
    pub(crate) fn draw(attack: &OtpAttack, random: &mut Random) -> Targets {
        let wanted = attack.ranges.clamp(1, MAX_RANGES);
        let mut countries: Vec<&'static Country> = Vec::new();
        while countries.len() < (wanted as usize).min(3) {
            let country = &PREMIUM[random.below(PREMIUM.len() as u64) as usize];
            if !countries.iter().any(|chosen| chosen.code == country.code) {
                countries.push(country);
            }
        }
        let mut ranges: Vec<Range> = Vec::new();
        let mut tries = 0;
        while (ranges.len() as u64) < wanted && tries < wanted * 20 {
            tries += 1;
            let country = countries[ranges.len() % countries.len()];
            let range = country.range(random);
            if !ranges.contains(&range) {
                ranges.push(range);
            }
        }
        Targets { ranges, countries }
    }

    /// `count` distinct numbers, dealt over the ranges in turn (consecutive within each, as
    /// premium numbers are leased).
    fn numbers(&self, count: u64) -> Vec<u64> {
        let ranges = self.ranges.len().max(1) as u64;
        (0..count.min(ranges * RANGE_SIZE))
            .filter_map(|n| {
                let range = self.ranges.get((n % ranges) as usize)?;
                Some(range.number(n / ranges))
            })
            .collect()
    }
}

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
