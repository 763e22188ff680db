//! The kinds of trouble a policy is scored against, each a generator whose parameters are
//! printed with its results.

mod crowd;
mod otp;
mod outage;
mod partner;
mod pumping;
mod real_codes;
mod slow;
mod wave;

use std::ops::Range;

pub use crowd::Crowd;
pub use otp::OtpFraud;
pub use outage::OutageAndFraud;
pub use partner::{LOOPING_KEY, PartnerLoop};
pub use pumping::OtpAttack;
pub use real_codes::RealCodes;
pub use slow::{EXPORTING_ACCOUNT, Service, SlowExports};
pub use wave::Wave;

use crate::timeline::{Source, Timeline};

/// A scenario: simulated traffic, the same visit for visit for every policy scored on it.
///
/// ```
/// use tollgate_simulator::{Crowd, Scenario};
///
/// let crowd = Scenario::Crowd(Crowd { users: 10, minutes: 1.0, ..Crowd::default() });
/// assert_eq!(crowd.name(), "crowd");
/// assert_eq!(crowd.duration_micros(), 60_000_000);
/// assert!(crowd.timeline(7).all(|visit| visit.at < 60_000_000));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Scenario {
    /// (a) The sign-up wave.
    Wave(Wave),
    /// (b) The partner loop.
    Partner(PartnerLoop),
    /// (c) The crowd behind a carrier's NAT.
    Crowd(Crowd),
    /// (d) A store outage while a fraudster pumps SMS codes.
    Outage(OutageAndFraud),
    /// (e) One account's slow exports filling the service beside users browsing.
    Slow(SlowExports),
    /// (f) SMS pumping among real people asking for one-time codes, in normal times.
    Otp(OtpFraud),
}

impl Scenario {
    /// All six, with their default (full-length) parameters.
    pub fn all() -> Vec<Scenario> {
        vec![
            Scenario::Wave(Wave::default()),
            Scenario::Partner(PartnerLoop::default()),
            Scenario::Crowd(Crowd::default()),
            Scenario::Outage(OutageAndFraud::default()),
            Scenario::Slow(SlowExports::default()),
            Scenario::Otp(OtpFraud::default()),
        ]
    }

    /// Its short name: `wave`, `partner`, `crowd`, `outage`, `slow` or `otp`.
    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Wave(_) => "wave",
            Scenario::Partner(_) => "partner",
            Scenario::Crowd(_) => "crowd",
            Scenario::Outage(_) => "outage",
            Scenario::Slow(_) => "slow",
            Scenario::Otp(_) => "otp",
        }
    }

    /// A line saying what happens in it.
    pub fn title(&self) -> &'static str {
        match self {
            Scenario::Wave(_) => "the sign-up wave: scripted accounts from cloud machines",
            Scenario::Partner(_) => "the partner loop: one API key calling nonstop",
            Scenario::Crowd(_) => "the crowd: real users behind a carrier's NAT",
            Scenario::Outage(_) => "a store outage while a fraudster pumps SMS codes",
            Scenario::Slow(_) => "slow exports: one account's 30-second reports beside users",
            Scenario::Otp(_) => "one-time-code fraud: SMS pumping among real people's codes",
        }
    }

    /// Its parameters, named, as printed with its results.
    pub fn parameters(&self) -> Vec<(&'static str, String)> {
        match self {
            Scenario::Wave(wave) => wave.parameters(),
            Scenario::Partner(partner) => partner.parameters(),
            Scenario::Crowd(crowd) => crowd.parameters(),
            Scenario::Outage(outage) => outage.parameters(),
            Scenario::Slow(slow) => slow.parameters(),
            Scenario::Otp(otp) => otp.parameters(),
        }
    }

    /// How long it lasts, in simulated microseconds.
    pub fn duration_micros(&self) -> u64 {
        match self {
            Scenario::Wave(wave) => wave.duration(),
            Scenario::Partner(partner) => partner.duration(),
            Scenario::Crowd(crowd) => crowd.duration(),
            Scenario::Outage(outage) => outage.duration(),
            Scenario::Slow(slow) => slow.duration(),
            Scenario::Otp(otp) => otp.duration(),
        }
    }

    /// How much work the service does a request and how many it works on at once, when the
    /// scenario models it (requests then overlap: see [`SlowExports`]).
    pub fn service(&self) -> Option<Service> {
        match self {
            Scenario::Slow(slow) => Some(slow.service()),
            _ => None,
        }
    }

    /// What is wrong with its parameters, if anything: an SMS pumping attack's
    /// ([`OtpAttack::problem`]), or a store outage that would not fall within the run.
    ///
    /// ```
    /// use tollgate_simulator::{OtpAttack, OutageAndFraud, Scenario};
    ///
    /// assert_eq!(Scenario::Outage(OutageAndFraud::default()).problem(), None);
    /// let short = OtpAttack { hours: 0.1, ..OtpAttack::default() };
    /// let outage = Scenario::Outage(OutageAndFraud { attack: short, ..OutageAndFraud::default() });
    /// assert!(outage.problem().is_some_and(|problem| problem.contains("past the end")));
    /// ```
    pub fn problem(&self) -> Option<String> {
        match self {
            Scenario::Otp(otp) => otp.attack.problem(),
            Scenario::Outage(outage) => outage.attack.problem().or_else(|| {
                let down = outage.outage();
                let minutes = |micros: u64| micros as f64 / 60e6;
                (down.is_empty() || down.end > outage.duration()).then(|| {
                    format!(
                        "the store would be down from minute {} to {}, past the end of a {}-minute \
                         attack: the outage scenario needs an attack of at least {} hours",
                        minutes(down.start),
                        minutes(down.end),
                        minutes(outage.duration()),
                        minutes(down.end) / 60.0
                    )
                })
            }),
            _ => None,
        }
    }

    /// What sending one code costs, in dollars, where the scenario sends codes and bills them.
    pub fn sms_price(&self) -> Option<f64> {
        match self {
            Scenario::Outage(outage) => Some(outage.sms_price),
            Scenario::Otp(otp) => Some(otp.sms_price),
            _ => None,
        }
    }

    /// When the store is down, if it ever is.
    pub fn outage(&self) -> Option<Range<u64>> {
        match self {
            Scenario::Outage(outage) => Some(outage.outage()),
            _ => None,
        }
    }

    /// When a partner's loop runs (µs from the start), if one does: its requests are the
    /// attacker's.
    pub fn looping(&self) -> Option<Range<u64>> {
        match self {
            Scenario::Partner(partner) if partner.loops() => {
                Some(partner.loop_start()..partner.loop_end())
            }
            _ => None,
        }
    }

    /// The same scenario, `factor` times as long (`0.1`: a tenth), at the same rates: the
    /// wave's attempts shrink with its hours; the outage and the loop keep their place; an
    /// SMS pumping attack lasts `factor` times as long.
    ///
    /// ```
    /// use tollgate_simulator::{Scenario, Wave};
    ///
    /// let short = Scenario::Wave(Wave::default()).scaled(0.1);
    /// assert_eq!(short, Scenario::Wave(Wave { attempts: 4_000, hours: 0.8, ..Wave::default() }));
    /// ```
    pub fn scaled(&self, factor: f64) -> Scenario {
        let factor = if factor.is_finite() && factor > 0.0 {
            factor
        } else {
            1.0
        };
        match self {
            Scenario::Wave(wave) => Scenario::Wave(Wave {
                attempts: (wave.attempts as f64 * factor).round() as u64,
                hours: wave.hours * factor,
                ..wave.clone()
            }),
            Scenario::Partner(partner) => Scenario::Partner(PartnerLoop {
                quiet_minutes: partner.quiet_minutes * factor,
                loop_minutes: partner.loop_minutes * factor,
                ..partner.clone()
            }),
            Scenario::Crowd(crowd) => Scenario::Crowd(Crowd {
                minutes: crowd.minutes * factor,
                ..crowd.clone()
            }),
            Scenario::Outage(outage) => Scenario::Outage(OutageAndFraud {
                attack: OtpAttack {
                    hours: outage.attack.hours * factor,
                    ..outage.attack.clone()
                },
                outage_from_minute: outage.outage_from_minute * factor,
                outage_minutes: outage.outage_minutes * factor,
                ..outage.clone()
            }),
            Scenario::Slow(slow) => Scenario::Slow(SlowExports {
                minutes: slow.minutes * factor,
                ..slow.clone()
            }),
            Scenario::Otp(otp) => Scenario::Otp(OtpFraud {
                attack: OtpAttack {
                    hours: otp.attack.hours * factor,
                    ..otp.attack.clone()
                },
                ..otp.clone()
            }),
        }
    }

    /// Its visits in time order, all randomness from `seed`.
    pub fn timeline(&self, seed: u64) -> Timeline {
        let sources: Vec<Box<dyn Source>> = match self {
            Scenario::Wave(wave) => wave.sources(),
            Scenario::Partner(partner) => partner.sources(),
            Scenario::Crowd(crowd) => crowd.sources(),
            Scenario::Outage(outage) => outage.sources(seed),
            Scenario::Slow(slow) => slow.sources(),
            Scenario::Otp(otp) => otp.sources(seed),
        };
        Timeline::new(sources, seed)
    }
}
