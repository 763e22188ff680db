//! A flood of 10 keys at 20 times their limit from 4 gateways on one redis-server, with and
//! without the blocked-caller cache (`BlockedCache`): store calls per refused request, next to
//! the formula.
//!
//! The bench starts its own `redis-server` (via `tollgate-redis-harness`, on a free loopback
//! port, killed at the end). Four gateways each hold their own `RedisStore` connection (one
//! prefix, so shared keys), each wrapped in a `BlockedCache`; the rule's items ask for the cache
//! (`with_cache_blocked(true)`) or not. Time is a manual clock the script reads (the store's
//! test clock) and the caches share, so the flood rate is exact: every 1/(F·R) of virtual time
//! each of the 10 keys gets one request, from the gateways in turn (key k's n-th request from
//! gateway (n + k) mod G). Per algorithm and cache setting:
//!
//! * **token bucket** (burst 5, 10 a second: one unit back every 100 ms): store calls that
//!   answered a refusal, per refused request, next to the stated (G − 1)/(F − 1) and to
//!   G/(F − 1) (the gateway that got the unit also asks once more before the next one is due);
//! * **fixed window** (10 a second): store calls that answered a refusal per key per window,
//!   next to the stated ≈ G (without the cache: F·L − L).
//!
//! Both settings refuse exactly the same requests (checked): the cache only saves calls.
//!
//! Run: `cargo bench -p tollgate-redis --bench blocked_cache -- [--seconds S]` (S virtual
//! seconds a case, default 20). Without `--bench` (as `cargo test --all-targets` runs it) it
//! makes a smoke run of 2 virtual seconds.

#![allow(clippy::print_stdout, reason = "a bench binary prints its table")]

mod common;

use std::time::Duration;

use futures_util::future::join_all;
use tollgate_core::{FleetModes, Item, Key, Quota, Rate, RuleId, Store, Timestamp};
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_redis_harness::RedisServer;
use tollgate_testing::ManualClock;
use tollgate_wrappers::BlockedCache;

use crate::common::Options;

const GATEWAYS: usize = 4;
const KEYS: usize = 10;
/// The flood, in times each key's limit.
const FLOOD: u64 = 20;
/// Each key's limit: units a second.
const RATE: u64 = 10;

type Gateway = BlockedCache<RedisStore, ManualClock>;

/// What one case counted.
#[derive(Default)]
struct Counts {
    requests: u64,
    refused: u64,
    refused_locally: u64,
    store_calls: u64,
}

async fn gateways(url: &str, prefix: &str, clock: &ManualClock) -> Vec<Gateway> {
    let mut gateways = Vec::new();
    for _ in 0..GATEWAYS {
        let connection = RedisConnection::connect(url)
            .await
            .expect("connect to redis-server");
        let store = RedisStore::builder()
            .prefix(prefix)
            .test_clock(clock.clone())
            .build(connection)
            .expect("a valid prefix");
        gateways.push(BlockedCache::with_clock(store, clock.clone()));
    }
    gateways
}

/// Floods the keys for `seconds` of virtual time, every key at `FLOOD` times `RATE`.
async fn flood(
    gateways: &[Gateway],
    clock: &ManualClock,
    quota: Quota,
    cached: bool,
    seconds: u64,
) -> Counts {
    let rule = RuleId::new("flooded").expect("valid");
    let keys: Vec<Key> = (0..KEYS).map(|k| Key::new(format!("key{k}"))).collect();
    let step = Duration::from_micros(1_000_000 / (FLOOD * RATE));
    let steps = seconds * FLOOD * RATE;
    let calls_before: u64 = gateways.iter().map(|g| g.stats().store_checks).sum();
    let mut counts = Counts::default();
    for n in 0..steps {
        let checks = keys.iter().enumerate().map(|(k, key)| {
            let gateway = &gateways[(n as usize + k) % GATEWAYS];
            let item = Item::new(&rule, quota, key)
                .with_fleet_modes(FleetModes::new().with_cache_blocked(cached));
            async move { gateway.check(&[item]).await.expect("redis answers") }
        });
        for answer in join_all(checks).await {
            counts.requests += 1;
            if !answer.is_allowed() {
                counts.refused += 1;
                counts.refused_locally += u64::from(answer.items()[0].refused_locally());
            }
        }
        clock.advance(step);
    }
    let calls_after: u64 = gateways.iter().map(|g| g.stats().store_checks).sum();
    counts.store_calls = calls_after - calls_before;
    counts
}

fn main() {
    let options = Options::from_env().or_smoke(&["--seconds", "2"]);
    let seconds: u64 = options.get("seconds", 20);
    let server = RedisServer::start().expect("start redis-server (apt install redis-server)");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let (g, f) = (GATEWAYS as f64, FLOOD as f64);
    runtime.block_on(async {
        println!(
            "{:<13} {:>5} {:>9} {:>9} {:>10} {:>11} {:>15} {:>17}   formula",
            "algorithm",
            "cache",
            "requests",
            "refused",
            "locally",
            "store calls",
            "calls/refused",
            "refusing/refused"
        );
        let bucket = Quota::token_bucket(5, Rate::per_second(RATE)).expect("a valid quota");
        let window = Quota::fixed_window(RATE, Duration::from_secs(1)).expect("a valid quota");
        for (index, (name, quota)) in [("token bucket", bucket), ("fixed window", window)]
            .into_iter()
            .enumerate()
        {
            let mut uncached_refused = None;
            for cached in [false, true] {
                // Every case on a whole second, with keys of its own.
                let clock = ManualClock::new(Timestamp::from_secs(1_700_000_000));
                let prefix = format!("bench{index}{}", u8::from(cached));
                let gateways = gateways(&server.url(), &prefix, &clock).await;
                let run = flood(&gateways, &clock, quota, cached, seconds).await;
                let allowed = run.requests - run.refused;
                let refusing = run.store_calls - allowed;
                assert_eq!(refusing, run.refused - run.refused_locally);
                // On exact virtual time the cache refuses exactly what the store would have.
                if let Some(uncached) = uncached_refused.replace(run.refused) {
                    assert_eq!(run.refused, uncached, "{name}: the same requests refused");
                }
                let per_refused = run.store_calls as f64 / run.refused.max(1) as f64;
                let refusing_per_refused = refusing as f64 / run.refused.max(1) as f64;
                let formula = match (index, cached) {
                    (0, false) => "1 (every refusal asks)".to_owned(),
                    (0, true) => format!(
                        "(G-1)/(F-1) = {:.3}; G/(F-1) = {:.3}",
                        (g - 1.0) / (f - 1.0),
                        g / (f - 1.0)
                    ),
                    (_, false) => format!(
                        "{:.1} refusing calls per key per window (F·L - L = {})",
                        refusing as f64 / (KEYS as u64 * seconds) as f64,
                        FLOOD * RATE - RATE
                    ),
                    _ => format!(
                        "{:.2} refusing calls per key per window (≈ G = {GATEWAYS})",
                        refusing as f64 / (KEYS as u64 * seconds) as f64
                    ),
                };
                println!(
                    "{:<13} {:>5} {:>9} {:>9} {:>10} {:>11} {:>15.3} {:>17.3}   {}",
                    name,
                    if cached { "on" } else { "off" },
                    run.requests,
                    run.refused,
                    run.refused_locally,
                    run.store_calls,
                    per_refused,
                    refusing_per_refused,
                    formula
                );
            }
        }
        println!(
            "\n{GATEWAYS} gateways, {KEYS} keys, each flooded at {FLOOD}x its limit ({} requests a \
             second a key) for {seconds} virtual s a case. Token bucket: burst 5, {RATE}/s. Fixed \
             window: {RATE} a 1 s window. \"refusing\" counts store calls that answered a refusal.",
            FLOOD * RATE
        );
    });
}
