//! An SMS pumping attack on one-time codes, shared by the code-fraud scenario and the outage
//! scenario: its parameters, where it aims (its ranges), and its requests.

use crate::addresses;
use crate::phones::{Country, PREMIUM, RANGE_SIZE, Range};
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
            ranges: targets.ranges.clone(),
            numbers: self.numbers.min(targets.ranges.len() as u64 * RANGE_SIZE),
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
    ranges: Vec<Range>,
    /// Its numbers: number `n` is number `n / ranges` of range `n % ranges` (consecutive within
    /// each range, as premium numbers are leased).
    numbers: u64,
    signs_up: u64,
    codes: u64,
    /// A code waiting behind its account's sign-up (at the same moment).
    queued: Option<Visit>,
}

impl Pumping {
    /// Its number `n` (below `numbers`, so `ranges` is not empty).
    fn number(&self, n: u64) -> u64 {
        let ranges = self.ranges.len() as u64;
        self.ranges[(n % ranges) as usize].number(n / ranges)
    }
}

impl Source for Pumping {
    fn next(&mut self, random: &mut Random) -> Option<Visit> {
        if let Some(code) = self.queued.take() {
            return Some(code);
        }
        if !(self.per_second.is_finite() && self.per_second > 0.0) || self.numbers == 0 {
            return None;
        }
        self.at = self.at.saturating_add(random.gap_micros(self.per_second));
        if self.at >= self.end {
            return None;
        }
        let from = addresses::cloud(random.below(self.addresses), self.blocks);
        let phone = self.number(random.below(self.numbers));
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
    pub(super) ranges: Vec<Range>,
    pub(super) countries: Vec<&'static Country>,
}

impl Targets {
    /// `attack`'s ranges, drawn from `random` (as many as [`OtpAttack::problem`] allows; each
    /// destination holds at least twice its third of [`MAX_RANGES`]).
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
}
