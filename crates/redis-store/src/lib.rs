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
//! writes what the request charged if it goes ahead — and, even for a refused request, what
//! reading a state in its quota's terms changed (below), so nobody is left waiting on a state
//! that would be rewritten anyway. A request is one round trip on a single server, and on a
//! cluster when its items share a hash slot. Items in several slots take one execution per
//! slot, side by side; when one slot refuses, the slots that charged take those charges back,
//! one more round trip (this can briefly over-refuse concurrent requests on those keys;
//! `BENCHMARKS.md` measures how often: 8–11 % of the admissible requests in a deliberately
//! hostile mix, held under 20 % by a test). Pacing items in several slots first read their earliest
//! starts, one more; shadow items in several slots are checked once the request is known to go
//! ahead, one more. That exchange runs in a task of its own, so a caller that stops waiting
//! leaves no charge of a refused request behind.
//!
//! A call the server refused without running it (a moved slot, a failover in progress, a busy
//! or loading server) is sent again, up to three times; a call whose answer was lost is never
//! sent again, since the script may have run (the cluster client's own retries are off for
//! this reason).
//!
//! ## Quota changes and clocks that step back
//!
//! Every state records what it was written under — a bucket's emission interval, a window's
//! start and length; a log's entries are absolute times — and each check reads it in the terms
//! of the quota on the item, exactly as the in-memory store does: a caller keeps what it owed,
//! capped at the new quota's full allowance. A clock that steps back (a failover onto a replica
//! whose `TIME` is behind) grants nothing. The rules, per algorithm, are in
//! [`tollgate_core::algorithm`]'s docs; the script follows them to the microsecond (the
//! `matches_memory` test compares both stores on random sequences of quota changes and clock
//! steps).
//!
//! A `TIME` past [`Timestamp::MAX_SUPPORTED`](tollgate_core::Timestamp::MAX_SUPPORTED) (2^52 − 1
//! µs, the year 2112: a misread server clock) is not supported: the script then reads and writes
//! nothing and every call answers a [`StoreError`](tollgate_core::StoreError) that
//! [`is_time_out_of_range`](tollgate_core::StoreError::is_time_out_of_range), naming the range,
//! as the in-memory store does; the keys answer as before once the clock is back in range.
//!
//! ## Refunds happen once
//!
//! [`Store::refund`](tollgate_core::Store::refund) gives back what a
//! [`Receipt`](tollgate_core::Receipt) still holds (its rules are
//! [`AlgorithmState::refund`](tollgate_core::algorithm::AlgorithmState::refund)'s), and only
//! once: the script first sets a **refund marker**, `<prefix>:r1:{<hash tag>}:<receipt id>`
//! (`SET NX`), and applies the refund only if it could. A refund whose answer was lost fails
//! with the receipt inside the [`RefundError`](tollgate_core::RefundError); retrying it finds
//! the marker and gives nothing more. The marker shares the state's hash tag (one slot, one
//! execution) and lives exactly as long as the charge could still matter — a bucket's until its
//! part of the schedule has passed, a fixed window's until the window ends, a sliding counter's
//! one window later, a log entry's until it leaves the window — so it costs one small key per
//! refund for that long. A refund that arrives once the charge can no longer matter gives
//! nothing and sets no marker. The charges a refused cross-slot request takes back are not
//! receipts: they carry no marker and apply once, as sent; a bucket's gives back
//! `min(µs, until − now, tat − now)`, which does not depend on the order in which concurrent
//! requests take theirs back.
//!
//! ## Stored keys
//!
//! `<prefix>:<format><version>:{<rule id>:<escaped key>}`, for example
//! `tg:t2:{login:%06user77}`. The hash tag holds the rule and the caller's key (so one rule's
//! state for one key lives in one slot); the key is escaped so a caller cannot inject a hash
//! tag or collide with another key, and hashed when long; the format tag means state written by
//! another algorithm or layout version is never misread. Values (times and lengths in µs):
//!
//! | algorithm | type | value | expires |
//! |---|---|---|---|
//! | token bucket, GCRA, pacing (`t2`) | string | the theoretical arrival time and the emission interval it was written under, packed: 7 bytes of TAT (most significant first), then the interval | when full again |
//! | fixed window (`w2`) | string | the window's start, length and count, packed: a form byte, the start (as a number of windows since the epoch), the length, the count | at the window's end |
//! | sliding window counter (`s2`) | string | as the fixed window's, with the previous and the current count | one window after the current one ends |
//! | sliding window log (`l3`) | sorted set | `at:cost:cumulative` scored by `at`: one member per µs, with the running total, so a check reads two entries instead of summing the log (refunding the newest entry touches one member; refunding an older one rewrites the entries after it — about 0.5 s of server time behind 100,000 entries, so keep logs for small, strict limits) | one window after the newest entry, under the window of the latest check (every check sets it again, since a changed quota may have lengthened the window) |
//! | refund marker (`r1`) | string | `1` | when the refunded charge could no longer matter |
//!
//! The string states are binary so that a key costs what Redis's smallest allocation for a short
//! string allows: a value of at most 12 bytes shares 32 bytes with its object, 88 B a key in all
//! for a 27-byte name (the decimal text before, `tat:interval` and `start:length:count`, took
//! 104 and 120). The numbers are varints, and a duration is counted in the largest of µs, ms, s
//! and minutes that divides it, so a bucket refilling over an hour takes 8 bytes and a day's
//! window counting thousands 8; `src/lua/state.lua` describes the bytes. `redis-cli --no-raw GET`
//! shows them escaped. A state in that decimal text (from a gateway of an earlier version) is
//! still read, and written packed on its next change.
//!
//! **Rolling upgrades.** A layout version is part of the key name, so gateways of two versions
//! never misread each other's state — but they do not share it either: while both run, each
//! counts in its own keys, and a caller can get up to twice its quota for one window (once from
//! each). The old keys expire by themselves. The previous layout's `t1`, `w1`, `s1` and `l2`
//! keys are such old keys: the formats above replaced them. To avoid the double allowance,
//! switch every gateway at once, or accept it for one window's length.
//!
//! The packed values kept their layouts' names (`t2`, `w2`, `s2`), because this version reads
//! the decimal text the one before wrote: upgrading carries every caller's state over. The other
//! way does not hold: a gateway of the version before cannot read a packed value, and a check
//! there on a key an upgraded gateway has written fails as on a value tollgate did not write
//! (below) — the rule's failure plan applies — until that gateway is upgraded too or the key
//! expires. Upgrade every gateway close together, and give a failure plan that suits the gap.
//!
//! **Values tollgate did not write.** A state key holding a value that is not a state's
//! encoding — text of another shape, a zero interval or length, a packed value cut short, with
//! bytes left over or not in its one canonical form, a log member of another shape — makes
//! every check and refund that touches it fail with a `StoreError` saying
//! `the value at <key> is not a tollgate state` (a value of the wrong Redis type fails with
//! `WRONGTYPE`), before anything is written; the rule's failure plan then applies. Such a value
//! is never read as "no state". The check is of form, not of origin: bytes that happen to be a
//! well-formed state (a hand-set `0:1000`; of random 8–10-byte values starting below `0x20`,
//! about one in four) are read as that state, which may be an idle one. That grants nothing
//! a writer of the key could not take anyway by deleting it: whoever can write tollgate's keys
//! can reset any caller. Deleting the key resets that caller.
//!
//! ## Resets reach every gateway
//!
//! [`Store::reset`](tollgate_core::Store::reset) deletes the caller's state and then announces the
//! rule and key on the channel `<prefix>:resets` (`PUBLISH`; the message is the rule id, `:`, and
//! the key's encoding). A [`ResetFollower`] on each gateway hears it and forgets the caller in that
//! gateway's [`BlockedCache`](tollgate_wrappers::BlockedCache), so an admin reset on one gateway
//! unblocks the caller on all of them. An announcement is a hint, never trusted for more: it only
//! makes a gateway ask the store again. One that is missed (a subscription dropped at that moment)
//! costs at most until the entry's own time; a follower that subscribes again clears its cache, so
//! a gap costs one store call per blocked caller instead.
//!
//! ## When Redis fails
//!
//! Errors are [`StoreError`](tollgate_core::StoreError)s, never refusals. Give each rule its
//! plan with `tollgate_wrappers::FallbackStore` (open, local, closed; deadlines and a circuit
//! breaker).
//!
//! ## Testing
//!
//! Feature `testing` adds [`RedisStoreBuilder::test_clock`]: the script takes "now" from a
//! manual clock instead of `TIME`, so the whole conformance suite runs against real servers
//! without sleeping.
//!
//! The guide's chapters *Redis and Redis Cluster* (`docs/guide/src/redis.md`) and *Failure
//! policies* (`docs/guide/src/failure-policies.md`) in the repository show it at work, task by
//! task.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod builder;
mod connecting;
mod connection;
mod cross_slot;
mod error;
mod holds;
mod layout;
mod replica_ack;
mod resets;
mod script;
mod server_clock;
mod slot_map;
mod split;
mod store;
mod subscribe;

pub use builder::{DEFAULT_PREFIX, RedisStoreBuilder};
pub use connection::{ConnectionSettings, RedisConnection};
pub use error::ConnectError;
pub use replica_ack::ReplicaAckStats;
pub use resets::ResetFollower;
pub use store::RedisStore;
pub use subscribe::subscribe;
/// The core crate whose `Store` contract this crate implements.
pub use tollgate_core as core;
