//! A policy simulator for tollgate: scores a limiting policy against the trouble Chirp met —
//! a sign-up wave, a partner stuck in a loop, thousands of real users behind a carrier's NAT,
//! a store outage during SMS fraud, one account's slow exports filling the service — before
//! anyone enforces it.
//!
//! Each scenario is a seeded generator of visits (who, from which address, when, asking
//! what). Each visit is one service call into Chirp's real router and the real
//! `RateLimitLayer` built from the policy's rule file, on a manual clock set to the visit's
//! time: no socket, no wall clock, and the same seed gives the same result to the request.
//! The score counts what the attackers got through, which innocent callers were refused at
//! least once, the load admitted, and how soon a looping partner was stopped.
//!
//! ```
//! use tollgate_simulator::{Policy, Scenario, Wave, simulate};
//!
//! let wave = Scenario::Wave(Wave { attempts: 300, hours: 1.0, ..Wave::default() });
//! let per_ip = simulate(&wave, &Policy::per_ip(100)?, 7, &mut |_| {})?;
//! let layered = simulate(&wave, &Policy::layered()?, 7, &mut |_| {})?;
//! assert!(layered.score.accounts_created < per_ip.score.accounts_created);
//! # Ok::<(), tollgate_simulator::Error>(())
//! ```
//!
//! The command line (`tollgate-sim`) runs every scenario against every policy and writes a
//! table, a CSV and one SVG chart a scenario; see the guide's "Choosing numbers" (`docs/guide/src/simulator.md`).

mod addresses;
mod error;
mod outage;
mod outcome;
mod people;
mod phones;
mod policy;
mod random;
pub mod report;
mod run;
mod scenario;
mod serving;
mod story;
mod timeline;
mod visit;

pub use error::Error;
pub use outcome::{Outcome, RuleInOutage, Score, Second};
pub use people::Habits;
pub use policy::{Policy, PolicyKind};
pub use run::{START, simulate};
pub use scenario::{
    Crowd, EXPORTING_ACCOUNT, LOOPING_KEY, OtpAttack, OtpFraud, OutageAndFraud, PartnerLoop,
    RealCodes, Scenario, Service, SlowExports, Wave,
};
pub use story::story_notes;
pub use timeline::Timeline;
pub use visit::{Call, Caller, Side, Visit};
