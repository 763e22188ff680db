//! # tollgate-core
//!
//! The core of [tollgate](https://docs.rs/tollgate), a rate-limiting ecosystem for tower and axum
//! services: the contract every other part is written against. It knows nothing of HTTP, tower,
//! Redis or the stores that wrap stores; it holds what every part shares:
//!
//! * **what** a rule allows — a [`Quota`]: an [`Algorithm`] and its numbers, built from a [`Rate`]
//!   that cannot be misread (`Rate::per_second(10)` means ten a second);
//! * **the algorithms** — token bucket (computed as GCRA, also built from a rate and a burst),
//!   fixed window, sliding window counter, sliding window log and leaky-bucket pacing, in
//!   [`algorithm`];
//! * **who** is counted — a [`Key`] of bounded, unambiguous parts, under a [`RuleId`];
//! * **the answer** — a [`Decision`]: data, never an error, with sub-second precision;
//! * **where counts live** — the [`Store`] contract (batches, all-or-nothing, receipts and
//!   refunds, peek and reset) and the bounded, sharded [`MemoryStore`];
//! * **what a stack can do** — [`FleetModes`], what an item asks of the stores that wrap stores
//!   (counting across a fleet, sub-buckets, cached refusals, a named store; the crate
//!   `tollgate-wrappers` carries them out, and its `FallbackStore` each item's
//!   [`OnStoreFailure`]), and [`Capabilities`], what a store stack carries out of it
//!   ([`Store::capabilities`]): a rule asking for more is refused, not counted otherwise in
//!   silence;
//! * **costs known afterwards** — an [`Estimate`] charged up front and settled with the actual
//!   cost (the excess owed as debt, the rest given back);
//! * **when** — a [`Clock`]: only the store's clock decides.
//!
//! ```
//! use futures_executor::block_on;
//! use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
//!
//! // Posting: 30 an hour per account, bursts of 5.
//! let posting = RuleId::new("posting")?;
//! let quota = Quota::token_bucket(5, Rate::per_hour(30))?;
//! let store = MemoryStore::new();
//! let account = Key::new("account-4821");
//!
//! let mut allowed = 0;
//! for _ in 0..10 {
//!     let answer = block_on(store.check(&[Item::new(&posting, quota, &account)]))?;
//!     allowed += u32::from(answer.is_allowed());
//! }
//! assert_eq!(allowed, 5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Features
//!
//! * `store-kit` — the `store_kit` module, for crates that implement [`Store`] on another
//!   backend or around another store: the only way outside this crate to report a charge, and
//!   what a wrapper borrows of core (see the module). Applications never need it.
//!
//! Its testing kit (a manual clock, the conformance suite every store runs) is the crate
//! `tollgate-testing`.
//!
//! The guide's chapters *Choosing an algorithm* (`docs/guide/src/algorithms.md`) and *Testing your
//! own limits* (`docs/guide/src/testing.md`) in the repository show it at work, task by task.
#![cfg_attr(docsrs, feature(doc_cfg))]
// What `store_kit` lends (sync memory calls, receipt copies, answer marks, capability marks) is
// used only through it: without the feature it is unused, not dead. Builds with every feature
// (clippy in CI) still find real dead code.
#![cfg_attr(not(feature = "store-kit"), allow(dead_code))]

pub mod algorithm;
mod call_deadline;
mod capabilities;
mod clock;
mod counting;
mod decision;
mod dyn_store;
mod error;
mod fingerprint;
mod fleet_modes;
mod item;
mod key;
mod memory;
#[cfg(feature = "metrics")]
pub mod metrics;
mod policy;
pub mod quota;
mod rate;
mod receipt;
mod rule_id;
mod settlement;
mod store;
#[cfg(feature = "store-kit")]
pub mod store_kit;

pub use capabilities::{Capabilities, Unsupported};
pub use clock::{Clock, SystemClock, Timestamp};
pub use counting::{Counting, LeaseSettings, SplitSettings, SyncSettings};
pub use decision::{Decision, RefusalReason, Verdict, whole_seconds_up};
pub use dyn_store::DynStore;
pub use error::{QuotaError, RuleIdError, StoreError, StoreErrorKind};
pub use fingerprint::{FingerprintSecret, FingerprintSecretError};
pub use fleet_modes::{FleetModes, MAX_REPLICA_ACK, MAX_SUB_BUCKETS};
pub use item::{Item, Take};
pub use key::{Key, KeyBuilder};
pub use memory::{DEFAULT_MAX_KEYS, MemoryStats, MemoryStore, MemoryStoreBuilder};
pub use policy::{Mode, OnStoreFailure};
pub use quota::{Algorithm, DEFAULT_SLOT_TTL, Quota};
pub use rate::Rate;
pub use receipt::{Charge, Receipt, RefundError, RefundNow};
pub use rule_id::{DerivedSuffix, RuleId};
pub use settlement::{Estimate, Settlement};
pub use store::{BatchDecision, CountedIn, ItemDecision, Store};
