//! # tollgate-wrappers
//!
//! The stores that wrap stores, for [tollgate](https://docs.rs/tollgate). Each implements
//! `tollgate_core::Store` around another store and carries out part of what an item asks of
//! the stack (its [`FleetModes`](tollgate_core::FleetModes) and failure policy):
//!
//! * **when the store is gone** — [`FallbackStore`]: any primary store behind a timeout and a
//!   circuit breaker (one per node of a store of several), each rule answering by its
//!   `OnStoreFailure` (open, open within a local limit, local, closed) when the primary cannot;
//! * **counting across a fleet of gateways** — [`FleetStore`]: leases of tokens, counting
//!   locally and syncing every interval, or a split allowance, chosen per rule by its
//!   `Counting`;
//! * **one hot key as several** — [`SubBuckets`]: a key's quota spread over sub-keys (so over
//!   several Redis Cluster slots);
//! * **callers already refused** — [`BlockedCache`]: refuses, on this gateway and without a
//!   store call, a caller the store has refused until a time not yet reached;
//! * **which store** — [`Stores`]: a default store and named ones (a home region's), each rule
//!   counted in the one it names, one request all-or-nothing across them.
//!
//! A rule that asks for a wrapper its stack lacks is refused by
//! `Store::capabilities`, never counted otherwise in silence.
//!
//! They are written on `tollgate_core::store_kit`, the extension point any store outside
//! `tollgate-core` uses: what they lend from core (copies and narrowed receipts for refunds,
//! a call's deadline) goes through it, and receipts stay single-use for applications.
//!
//! ```
//! use futures_executor::block_on;
//! use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
//! use tollgate_wrappers::FallbackStore;
//!
//! // Any primary (here memory; in production Redis) behind a timeout and a breaker.
//! let store = FallbackStore::builder(MemoryStore::new()).build();
//! let rule = RuleId::new("posting")?;
//! let quota = Quota::token_bucket(5, Rate::per_hour(30))?;
//! let account = Key::new("account-4821");
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
//! let answer = runtime.block_on(store.check(&[Item::new(&rule, quota, &account)]))?;
//! assert!(answer.is_allowed());
//! # let _ = block_on(async {});
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Features
//!
//! * `metrics` — the wrappers' metrics through the `metrics` facade
//!   ([`FallbackStoreBuilder::metrics`], [`BlockedCache::publish_metrics`],
//!   [`FleetStore::publish_metrics`]; names in `tollgate_core::metrics`).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod blocked;
mod fallback;
mod fleet;
mod stores;
mod sub_buckets;
mod time_range;

pub use blocked::{BlockedCache, BlockedStats, DEFAULT_MAX_BLOCKED};
pub use fallback::{
    DEFAULT_COOL_DOWN, DEFAULT_FAILURE_THRESHOLD, DEFAULT_TIMEOUT, FallbackStats, FallbackStore,
    FallbackStoreBuilder,
};
pub use fleet::{FleetStats, FleetStore};
pub use stores::{MAX_STORE_NAME_LEN, StoreNameError, Stores};
pub use sub_buckets::SubBuckets;
