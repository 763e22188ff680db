//! # tollgate
//!
//! Rate limiting for Rust services built on tower and axum: name who to count and how much each
//! may do, per route; get correct `429`s with `Retry-After` and the IETF `RateLimit` headers; keep
//! the count in memory on one machine or in Redis across a fleet, and decide in advance what
//! happens when Redis is down.
//!
//! This facade re-exports the parts:
//!
//! * [`core`] (always): quotas, algorithms, decisions, keys, the `Store` contract, the
//!   in-memory store and the store-failure wrapper (`FallbackStore`) — its main items are also
//!   re-exported at the top level;
//! * `tower` (feature `tower`): the `RateLimitLayer` middleware;
//! * `axum` (feature `axum`): typed limits as extractors;
//! * `redis` (feature `redis`): the Redis and Redis Cluster store;
//! * `admin` (feature `admin`): the admin API and status page for the person on call.
//!
//! ```
//! use futures_executor::block_on;
//! use tollgate::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
//!
//! let store = MemoryStore::new();
//! let rule = RuleId::new("sms-per-phone")?;
//! let quota = Quota::fixed_window(3, std::time::Duration::from_secs(3600))?;
//! let phone = Key::new("+91-98xxxxxx01");
//! let item = Item::new(&rule, quota, &phone);
//! for _ in 0..3 {
//!     assert!(block_on(store.check(&[item]))?.is_allowed());
//! }
//! assert!(!block_on(store.check(&[item]))?.is_allowed());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use tollgate_core as core;
pub use tollgate_core::{
    Algorithm, BatchDecision, BlockedCache, BlockedStats, Capabilities, Clock, Counting, Decision,
    FallbackStore, FleetModes, FleetStats, FleetStore, Item, ItemDecision, Key, LeaseSettings,
    MemoryStore, Mode, OnStoreFailure, Quota, QuotaError, Rate, Receipt, RefundError, RefundNow,
    RefusalReason, RuleId, SplitSettings, Store, StoreError, Stores, SubBuckets, SyncSettings,
    SystemClock, Take, Timestamp, Unsupported,
};

/// The tower middleware (feature `tower`).
#[cfg(feature = "tower")]
pub use tollgate_tower as tower;

/// Rule files: TOML rules checked with every mistake at its line and column, hot reload, the
/// overlay a fleet document goes through (feature `config`).
#[cfg(feature = "config")]
pub use tollgate_config as config;

/// Fleet-wide rule changes published through Redis, and the fleet's top refused callers
/// (feature `fleet`).
#[cfg(feature = "fleet")]
pub use tollgate_fleet as fleet;

/// Typed limits as axum extractors (feature `axum`).
#[cfg(feature = "axum")]
pub use tollgate_axum as axum;

/// The Redis and Redis Cluster store (feature `redis`).
#[cfg(feature = "redis")]
pub use tollgate_redis as redis;

/// The admin API and status page (feature `admin`).
#[cfg(feature = "admin")]
pub use tollgate_admin as admin;

/// The client side of a 429 (feature `client`): a tower layer and a reqwest middleware that
/// wait as the server asks.
#[cfg(feature = "client")]
pub use tollgate_client as client;

/// The README's examples, compiled and run as doc tests (they use the `axum`, `redis`, `admin`
/// and `client` features).
#[cfg(all(
    doctest,
    feature = "axum",
    feature = "redis",
    feature = "admin",
    feature = "client"
))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
