//! # tollgate-redis
//!
//! The shared count: tollgate's [`Store`](tollgate_core::Store) on Redis and Redis Cluster, so
//! every gateway of a fleet counts against one number.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tollgate_core::{Item, Key, Quota, Rate, RuleId, Store};
//! use tollgate_redis::RedisStore;
//!
//! // One server; `RedisStore::builder().connect_cluster(&nodes)` for a cluster.
//! let store = RedisStore::connect("redis://127.0.0.1:6379/").await?;
//! let rule = RuleId::new("login")?;
//! let account = Key::new("user77");
//! let quota = Quota::token_bucket(10, Rate::per_minute(10))?;
//! let decision = store.check_one(&Item::new(&rule, quota, &account)).await?;
//! println!("allowed: {}", decision.decision().is_allowed());
//! # Ok(()) }
//! ```
//!
//! ## How a check runs
//!
//! One Lua script (`src/lua/`) serves every operation and is loaded once (`EVALSHA`; reloaded
//! on `NOSCRIPT`). It reads "now" from the server's `TIME`, loads each key's state, decides
//! every item with the same integer formulas as `tollgate_core::algorithm` (exact: Lua numbers
//! are doubles, so products that could pass 2^53 are computed by long multiplication), and
//! writes only if the request goes ahead. A request is one round trip on a single server, and
//! on a cluster when its items share a hash slot. Items in several slots take one execution per
//! slot, side by side; when one slot refuses, the slots that charged are refunded by receipt,
//! one more round trip (this can briefly over-refuse concurrent requests on those keys;
//! `BENCHMARKS.md` measures how often), and pacing items in several slots first read their
//! earliest starts, one more. That exchange runs in a task of its own, so a caller that stops
//! waiting leaves no charge of a refused request behind.
//!
//! A call the server refused without running it (a moved slot, a failover in progress, a busy
//! or loading server) is sent again, up to three times; a call whose answer was lost is never
//! sent again, since the script may have run (the cluster client's own retries are off for
//! this reason).
//!
//! ## Stored keys
//!
//! `<prefix>:<format><version>:{<rule id>:<escaped key>}`, for example
//! `tg:t1:{login:%06user77}`. The hash tag holds the rule and the caller's key (so one rule's
//! state for one key lives in one slot); the key is escaped so a caller cannot inject a hash
//! tag or collide with another key, and hashed when long; the format tag means state written by
//! another algorithm or layout version is never misread. Values:
//!
//! | algorithm | type | value | expires |
//! |---|---|---|---|
//! | token bucket, GCRA, pacing (`t`) | string | theoretical arrival time, µs | when full again |
//! | fixed window (`w`) | string | `window:count` | at the window's end |
//! | sliding window counter (`s`) | string | `window:previous:current` | one window after the current one ends |
//! | sliding window log (`l`) | sorted set | `at:cost:cumulative` scored by `at`: one member per µs, with the running total, so a check reads two entries instead of summing the log (refunding the newest entry touches one member; refunding an older one rewrites the entries after it — about 0.5 s of server time behind 100,000 entries, so keep logs for small, strict limits) | one window after the newest entry |
//!
//! ## When Redis fails
//!
//! Errors are [`StoreError`](tollgate_core::StoreError)s, never refusals. Give each rule its
//! plan with `tollgate_core::FallbackStore` (open, local, closed; deadlines and a circuit
//! breaker).
//!
//! ## Testing
//!
//! Feature `testing` adds [`RedisStoreBuilder::test_clock`]: the script takes "now" from a
//! manual clock instead of `TIME`, so the whole conformance suite runs against real servers
//! without sleeping.

mod builder;
mod connection;
mod cross_slot;
mod error;
mod layout;
mod script;
mod split;
mod store;

pub use builder::{DEFAULT_PREFIX, RedisStoreBuilder};
pub use connection::{ConnectionSettings, RedisConnection};
pub use error::ConnectError;
pub use store::RedisStore;
/// The core crate whose `Store` contract this crate implements.
pub use tollgate_core as core;
