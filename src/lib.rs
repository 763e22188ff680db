//! # tollgate
//!
//! Rate limiting for Rust services built on tower and axum: name who to count and how much each
//! may do, per route; get correct `429`s with `Retry-After` and the IETF `RateLimit` headers; keep
//! the count in memory on one machine or in Redis across a fleet, and decide in advance what
//! happens when Redis is down.
//!
//! With no feature, it brings the core, re-exported at the top level (`tollgate::MemoryStore`,
//! `tollgate::FallbackStore`, ...) and as [`core`]: quotas and the algorithms, decisions, keys,
//! the `Store` contract, the clock, the in-memory store, and the stores that wrap a store —
//! `FallbackStore` (a deadline, a circuit breaker and each rule's failure policy), `FleetStore`
//! (leases, sync and splits), `SubBuckets`, `BlockedCache` and `Stores`. Each integration is a
//! feature of its own:
//!
//! | feature | brings |
//! |---|---|
//! | `tower` | `tollgate::tower`: the `RateLimitLayer` middleware for any tower service — rules per route, keys read from the request (`tollgate::tower::key`), `429` with `Retry-After` and the `RateLimit` headers |
//! | `axum` | `tower`, plus `tollgate::axum`: typed limits as extractors (`Limited<L>`, `Limiter`); the layer reads axum's `ConnectInfo<SocketAddr>` and `MatchedPath` |
//! | `redis` | `tollgate::redis`: `RedisStore` on Redis and Redis Cluster, and `ResetFollower` |
//! | `config` | `tower`, plus `tollgate::config`: TOML rule files checked with every mistake at its line and column, hot reload (`RuleWatcher`), write-back |
//! | `fleet` | `redis` and `config`, plus `tollgate::published`: rule documents published to every gateway through Redis, and the fleet's top refused callers |
//! | `metrics` | decisions, the store's health and rule loads through the `metrics` facade: `RateLimitLayer::metrics`, `FallbackStoreBuilder::metrics`, `MemoryStore::publish_metrics` (names in `tollgate::core::metrics`) |
//! | `admin` | `config`, plus `tollgate::admin`: the admin API (rules, changes, stats, resets, health, OpenAPI) and the status page; with `fleet`, changes go to every gateway |
//! | `testing` | `tollgate::core::testing`, for your own tests: a manual clock, an event recorder and the store conformance suite (`conformance_suite!`); with `redis`, `RedisStoreBuilder::test_clock` |
//! | `client` | `tollgate::client`: the client side of a `429` — `RetryAfterLayer` for tower HTTP clients and `RetryAfterMiddleware` for `reqwest-middleware`, waiting as the server asks |
//! | `envoy` | `config`, plus `tollgate::envoy`: Envoy's rate limit service (`ShouldRateLimit`, RLS v3) and quota service (RLQS) answering from a rule file's `envoy = { domain, descriptor }` rules in any store, and the migration from envoyproxy/ratelimit's YAML; the ready binary is `tollgate-envoy`'s |
//! | `grpc` | `tower`, plus gRPC answers for gRPC calls (`RESOURCE_EXHAUSTED` with `RetryInfo` and `QuotaFailure`), rules by gRPC method, rules charging each inbound message (`Rule::per_message`, and `per_message` in rule files with `config`); with `client`, `GrpcRetryLayer` and retries of gRPC refusals |
//!
//! No feature is on by default.
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
//!
//! The guide's chapter *Getting started* (`docs/guide/src/getting-started.md`) in the repository
//! shows it at work, task by task.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// Everything of `tollgate-core` (the contract, quotas, keys, clocks, the algorithms and the
/// in-memory store), the stores that wrap stores of `tollgate-wrappers` beside it, and, with
/// feature `testing`, the testing kit as `core::testing`.
pub mod core {
    pub use tollgate_core::{
        Algorithm, BatchDecision, Capabilities, Charge, Clock, CountedIn, Counting,
        DEFAULT_MAX_KEYS, DEFAULT_SLOT_TTL, Decision, DerivedSuffix, DynStore, Estimate,
        FingerprintSecret, FingerprintSecretError, FleetModes, Item, ItemDecision, Key, KeyBuilder,
        LeaseSettings, MAX_REPLICA_ACK, MAX_SUB_BUCKETS, MemoryStats, MemoryStore,
        MemoryStoreBuilder, Mode, OnStoreFailure, Quota, QuotaError, Rate, Receipt, RefundError,
        RefundNow, RefusalReason, RuleId, RuleIdError, Settlement, SplitSettings, Store,
        StoreError, StoreErrorKind, SyncSettings, SystemClock, Take, Timestamp, Unsupported,
        Verdict, algorithm, quota, whole_seconds_up,
    };

    /// Metric names (feature `metrics`).
    #[cfg(feature = "metrics")]
    pub use tollgate_core::metrics;

    /// The extension point stores are written on (feature `redis`, whose store uses it, as
    /// before the wrappers moved out of core). An application has no use for it.
    #[cfg(feature = "redis")]
    pub use tollgate_core::store_kit;

    pub use tollgate_wrappers::*;

    /// The testing kit (feature `testing`): a manual clock, the store conformance suite, an
    /// allocation counter and a recorder of `tracing` events.
    #[cfg(feature = "testing")]
    pub use tollgate_testing as testing;

    #[cfg(feature = "testing")]
    pub use tollgate_testing::conformance_suite;
}
pub use tollgate_core::{
    Algorithm, BatchDecision, Capabilities, Clock, Counting, Decision, FleetModes, Item,
    ItemDecision, Key, LeaseSettings, MemoryStore, Mode, OnStoreFailure, Quota, QuotaError, Rate,
    Receipt, RefundError, RefundNow, RefusalReason, RuleId, SplitSettings, Store, StoreError,
    SyncSettings, SystemClock, Take, Timestamp, Unsupported,
};
pub use tollgate_wrappers::{
    BlockedCache, BlockedStats, FallbackStore, FleetStats, FleetStore, Stores, SubBuckets,
};

/// The tower middleware (feature `tower`).
#[cfg(feature = "tower")]
pub use tollgate_tower as tower;

/// Rule files: TOML rules checked with every mistake at its line and column, hot reload, the
/// overlay a fleet document goes through (feature `config`).
#[cfg(feature = "config")]
pub use tollgate_config as config;

/// Rule documents published through Redis to every gateway, and the fleet's top refused callers
/// (feature `fleet`).
#[cfg(feature = "fleet")]
pub use tollgate_published as published;

/// The earlier path of [`published`] (feature `fleet`), with the earlier names of its types, kept
/// so code written against it builds.
#[cfg(feature = "fleet")]
#[doc(hidden)]
pub mod fleet {
    pub use tollgate_published::*;
    pub use tollgate_published::{
        DocumentRefusal as FleetRefusal, PublishedRules as FleetRules,
        PublishedRulesBuilder as FleetBuilder, PublishedRulesError as FleetError,
        PublishedRulesStatus as FleetStatus,
    };
}

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

/// Envoy's rate limit services from rule files (feature `envoy`): the `tollgate-envoy` crate.
#[cfg(feature = "envoy")]
pub use tollgate_envoy as envoy;

/// The README's example, compiled as a doc test (it uses the `axum` feature; the guide's
/// chapters are the `guide` module's).
#[cfg(all(
    doctest,
    feature = "axum",
    feature = "redis",
    feature = "admin",
    feature = "client"
))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The guide's chapters (`docs/guide/src`), compiled and run as doc tests: the guide is an
/// mdBook for reading, and its code is tested here, against the workspace's crates, because
/// `mdbook test` cannot link them. Its examples use every feature.
#[cfg(all(
    doctest,
    feature = "axum",
    feature = "redis",
    feature = "config",
    feature = "fleet",
    feature = "metrics",
    feature = "admin",
    feature = "testing",
    feature = "client",
    feature = "grpc",
    feature = "envoy"
))]
pub mod guide {
    #[doc = include_str!("../docs/guide/src/getting-started.md")]
    pub struct GettingStarted;

    #[doc = include_str!("../docs/guide/src/algorithms.md")]
    pub struct Algorithms;

    #[doc = include_str!("../docs/guide/src/keys.md")]
    pub struct Keys;

    #[doc = include_str!("../docs/guide/src/routes.md")]
    pub struct Routes;

    #[doc = include_str!("../docs/guide/src/refusals.md")]
    pub struct Refusals;

    #[doc = include_str!("../docs/guide/src/rule-files.md")]
    pub struct RuleFiles;

    #[doc = include_str!("../docs/guide/src/redis.md")]
    pub struct Redis;

    #[doc = include_str!("../docs/guide/src/failure-policies.md")]
    pub struct FailurePolicies;

    #[doc = include_str!("../docs/guide/src/fleet-modes.md")]
    pub struct FleetModes;

    #[doc = include_str!("../docs/guide/src/concurrency-and-cost.md")]
    pub struct ConcurrencyAndCost;

    #[doc = include_str!("../docs/guide/src/grpc.md")]
    pub struct Grpc;

    #[doc = include_str!("../docs/guide/src/envoy.md")]
    pub struct Envoy;

    #[doc = include_str!("../docs/guide/src/admin.md")]
    pub struct Admin;

    #[doc = include_str!("../docs/guide/src/metrics.md")]
    pub struct Metrics;

    #[doc = include_str!("../docs/guide/src/client.md")]
    pub struct Client;

    #[doc = include_str!("../docs/guide/src/simulator.md")]
    pub struct Simulator;

    #[doc = include_str!("../docs/guide/src/recipes.md")]
    pub struct Recipes;

    #[doc = include_str!("../docs/guide/src/testing.md")]
    pub struct Testing;

    #[doc = include_str!("../docs/guide/src/operating.md")]
    pub struct Operating;

    #[doc = include_str!("../docs/guide/src/design-choices.md")]
    pub struct DesignChoices;
}
