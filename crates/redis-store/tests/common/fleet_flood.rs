//! A fleet flood as a user runs it, shared by the fleet-mode tests and the `fleet_modes`
//! bench: G gateways, each a `FleetStore` over a `RedisStore` of its own connection to one
//! `redis-server`, each with `spawn_ticker`; T tasks per gateway check one hot key until a
//! deadline on a multi-thread runtime, each check followed only by the yield a server's
//! connection task makes when it reads its next request (no pauses). Each check is also made
//! through an in-memory exact limiter every gateway shares: the same offered checks at the same
//! instants, the baseline. Store calls are the server's own count of scripts run
//! (`INFO commandstats`).

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate_core::{Counting, FleetModes, Item, Key, MemoryStore, Quota, RuleId, Store};
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_redis_harness::RedisServer;
use tollgate_wrappers::FleetStore;

/// How often each gateway ticks (ends leases, pushes due keys).
pub const TICK: Duration = Duration::from_millis(50);

/// One flood's outcome: the mode's admitted count and store calls, and the exact limiter's
/// admitted count over the same second.
#[derive(Debug)]
pub struct Outcome {
    pub checks: u64,
    pub admitted: u64,
    pub exact: u64,
    pub calls: u64,
    pub seconds: f64,
}

/// A multi-thread runtime of its own for each shape.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Scripts the server has run (`EVALSHA` and `EVAL` calls): the store calls.
pub fn scripts_run(server: &RedisServer) -> u64 {
    let stats = server
        .cli(&["INFO", "commandstats"])
        .expect("INFO commandstats");
    stats
        .lines()
        .filter(|line| line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:"))
        .filter_map(|line| {
            let calls = line.split("calls=").nth(1)?.split(',').next()?;
            calls.parse::<u64>().ok()
        })
        .sum()
}

pub async fn gateways(
    server: &RedisServer,
    count: usize,
    prefix: &str,
) -> Vec<FleetStore<RedisStore>> {
    let mut gateways = Vec::new();
    for _ in 0..count {
        let connection = RedisConnection::connect(&server.url())
            .await
            .expect("connect to redis-server");
        let store = RedisStore::builder()
            .prefix(prefix)
            .build(connection)
            .expect("a valid prefix");
        gateways.push(FleetStore::new(store));
    }
    gateways
}

/// `gateways` × 50 tasks checking one key of `rule` until `deadline`, each check also made
/// through `exact` (an in-memory exact limiter every gateway shares, so the same offered checks
/// at the same instants): the mode's admitted count and the exact limiter's.
async fn flood(
    gateways: &[FleetStore<RedisStore>],
    exact: &MemoryStore,
    quota: Quota,
    counting: Counting,
    tasks_each: usize,
    deadline: Instant,
) -> (u64, u64, u64) {
    let rule = &RuleId::new("partner-api").expect("valid");
    let checks = Arc::new(AtomicU64::new(0));
    let admitted = Arc::new(AtomicU64::new(0));
    let exact_admitted = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for gateway in gateways {
        for _ in 0..tasks_each {
            let (gateway, exact, rule) = (gateway.clone(), exact.clone(), rule.clone());
            let (admitted, exact_admitted) = (Arc::clone(&admitted), Arc::clone(&exact_admitted));
            let checks = Arc::clone(&checks);
            tasks.push(tokio::spawn(async move {
                let key = Key::new("acme");
                let plain = Item::new(&rule, quota, &key);
                let item = plain.with_fleet_modes(FleetModes::new().with_counting(counting));
                while Instant::now() < deadline {
                    let counted = exact.check_now(&[plain]).expect("memory answers now");
                    if counted.expect("memory never fails").is_allowed() {
                        exact_admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    // As the layer asks: decided now when it can be, else through the store.
                    let answer = match gateway.check_now(&[item]) {
                        Some(answer) => answer,
                        None => gateway.check(&[item]).await,
                    };
                    checks.fetch_add(1, Ordering::Relaxed);
                    if answer.expect("the store answers").is_allowed() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    // A connection task reads its next request.
                    tokio::task::yield_now().await;
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("a flood task does not panic");
    }
    (
        checks.load(Ordering::Relaxed),
        admitted.load(Ordering::Relaxed),
        exact_admitted.load(Ordering::Relaxed),
    )
}

/// Waits until the wall clock is halfway into a window of `window`, as the stores align windows
/// on the Unix epoch. A run that began a moment before a boundary would give the exact limiter
/// a whole window's limit in that moment, which no limiter a round trip away can match: the
/// comparison would measure where the run began, not the mode.
async fn halfway_into_a_window(window: Duration) {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970");
    let window_nanos = window.as_nanos().max(1);
    let into = since_epoch.as_nanos() % window_nanos;
    let halfway = window_nanos / 2;
    let wait = (halfway + window_nanos - into) % window_nanos;
    let wait = u64::try_from(wait).expect("a window shorter than 584 years");
    tokio::time::sleep(Duration::from_nanos(wait)).await;
}

/// Runs `counting` over `count` gateways of `tasks_each` tasks beside the exact limiter, for
/// `run`, on a redis-server of its own (so its count of scripts is this run's alone).
pub fn run(
    count: usize,
    tasks_each: usize,
    quota: Quota,
    counting: Counting,
    run: Duration,
) -> Outcome {
    let server = RedisServer::start().expect("start redis-server (apt install redis-server)");
    runtime().block_on(async {
        let fleet = gateways(&server, count, "fleet").await;
        let tickers: Vec<_> = fleet.iter().map(|g| g.spawn_ticker(TICK)).collect();
        let exact = MemoryStore::new();
        if let Some(window) = quota.window() {
            halfway_into_a_window(window).await;
        }
        let before = scripts_run(&server);
        let started = Instant::now();
        let (checks, admitted, exact) =
            flood(&fleet, &exact, quota, counting, tasks_each, started + run).await;
        let seconds = started.elapsed().as_secs_f64();
        let calls = scripts_run(&server).saturating_sub(before);
        for ticker in tickers {
            ticker.abort();
        }
        Outcome {
            checks,
            admitted,
            exact,
            calls,
            seconds,
        }
    })
}
