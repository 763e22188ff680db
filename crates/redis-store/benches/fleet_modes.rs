//! A hot partner key counted exactly, by leases and by local-then-sync, from 4 gateways on one
//! redis-server: Redis commands per check, checks per second against the in-memory store
//! measured in the same run, and the admitted count against the exact limiter next to each
//! mode's stated bound.
//!
//! The bench starts its own `redis-server` (via `tollgate-redis-harness`, on a free loopback
//! port, killed at the end). Four gateways each hold their own `RedisStore` connection (one
//! prefix, so one key), wrapped in a `FleetStore` ticking every 50 ms; each gateway runs T
//! tasks (default 8) checking the partner's key (a token bucket of 200, refilled 200 a second)
//! in a closed loop for S seconds — an offered rate far above the limit — asking as the layer
//! does (`check_now`, else `check`). Per mode:
//!
//! * **commands per check**: the server's `INFO commandstats` calls (every command, scripts'
//!   inner ones included, the `INFO` itself excluded) before and after, over the checks made;
//!   the target for lease and sync is ≤ 0.05;
//! * **checks per second / memory**: against one `MemoryStore` shared by the same 4 × T tasks
//!   for the same S seconds, first in the run (target ≥ 0.5);
//! * **over / under**: admitted minus the exact limiter's B + R·t over the run (t the run's
//!   length), next to the bound: leases min(R·L, G·H), sync G·M; under-admission at a
//!   refusal for leases is at most (G − 1)·H.
//!
//! Run: `cargo bench -p tollgate-redis --bench fleet_modes -- [--seconds S] [--tasks T]`.
//! Without `--bench` (as `cargo test --all-targets` runs it) it makes a smoke run of 0.3 s.

#![allow(clippy::print_stdout, reason = "a bench binary prints its table")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate_core::{
    Counting, FleetModes, FleetStore, Item, Key, LeaseSettings, MemoryStore, Quota, Rate, RuleId,
    Store, SyncSettings,
};
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_redis_harness::RedisServer;

use crate::common::Options;

const GATEWAYS: usize = 4;
const CAPACITY: u64 = 200;
const RATE: u64 = 200;

fn quota() -> Quota {
    Quota::token_bucket(CAPACITY, Rate::per_second(RATE)).expect("a valid quota")
}

fn lease() -> LeaseSettings {
    LeaseSettings::new()
        .max_units(20)
        .top_up_every(Duration::from_millis(100))
        .lifetime(Duration::from_secs(1))
}

fn sync() -> SyncSettings {
    SyncSettings::new().every(Duration::from_millis(200))
}

/// What one mode's run counted.
struct Run {
    checks: u64,
    admitted: u64,
    elapsed: Duration,
}

/// Runs `tasks` tasks on each store of `stores` for `seconds`, each checking the hot key with
/// `counting` in a loop.
async fn flood<S: Store + Clone>(
    stores: &[S],
    counting: Counting,
    tasks: usize,
    seconds: f64,
) -> Run {
    let stop = Arc::new(AtomicBool::new(false));
    let (checks, admitted) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let started = Instant::now();
    let mut handles = Vec::new();
    for store in stores {
        for _ in 0..tasks {
            let (store, stop) = (store.clone(), Arc::clone(&stop));
            let (checks, admitted) = (Arc::clone(&checks), Arc::clone(&admitted));
            handles.push(tokio::spawn(async move {
                let (rule, key) = (RuleId::new("partner").expect("valid"), Key::new("acme"));
                let item = Item::new(&rule, quota(), &key)
                    .with_fleet_modes(FleetModes::new().with_counting(counting));
                let mut made: u64 = 0;
                while !stop.load(Ordering::Relaxed) {
                    // As the layer asks: an answer now if the store has one, else awaited.
                    let answer = match store.check_now(&[item]) {
                        Some(answer) => answer,
                        None => store.check(&[item]).await,
                    }
                    .expect("the store answers");
                    checks.fetch_add(1, Ordering::Relaxed);
                    admitted.fetch_add(u64::from(answer.is_allowed()), Ordering::Relaxed);
                    made += 1;
                    // Checks decided in memory never wait: give the other tasks (and the
                    // timer) a turn now and then, the same in every mode.
                    if made.is_multiple_of(64) {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
    }
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle.await.expect("a flooding task does not panic");
    }
    Run {
        checks: checks.load(Ordering::Relaxed),
        admitted: admitted.load(Ordering::Relaxed),
        elapsed: started.elapsed(),
    }
}

/// Every command the server has run, from `INFO commandstats`.
fn commands(server: &RedisServer) -> u64 {
    let info = server
        .cli(&["INFO", "commandstats"])
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|line| line.split("calls=").nth(1))
        .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
        .sum()
}

async fn gateways(url: &str, prefix: &str) -> Vec<FleetStore<RedisStore>> {
    let mut gateways = Vec::new();
    for _ in 0..GATEWAYS {
        let connection = RedisConnection::connect(url)
            .await
            .expect("connect to redis-server");
        let store = RedisStore::builder()
            .prefix(prefix)
            .build(connection)
            .expect("a valid prefix");
        let gateway = FleetStore::new(store);
        drop(gateway.spawn_ticker(Duration::from_millis(50)));
        gateways.push(gateway);
    }
    gateways
}

fn main() {
    let options = Options::from_env().or_smoke(&["--seconds", "0.3", "--tasks", "2"]);
    let seconds: f64 = options.get("seconds", 3.0);
    let tasks: usize = options.get("tasks", 8);
    let server = RedisServer::start().expect("start redis-server (apt install redis-server)");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let memory = MemoryStore::new();
        let baseline = flood(
            &vec![memory; GATEWAYS],
            Counting::Exact,
            tasks,
            seconds,
        )
        .await;
        let baseline_rate = baseline.checks as f64 / baseline.elapsed.as_secs_f64();
        println!(
            "{:<7} {:>10} {:>12} {:>10} {:>14} {:>9} {:>9} {:>10} {:>10}",
            "mode", "checks", "checks/s", "/ memory", "commands/check", "admitted", "exact", "over", "bound"
        );
        println!(
            "{:<7} {:>10} {:>12.0} {:>10} {:>14} {:>9} {:>9} {:>10} {:>10}",
            "memory", baseline.checks, baseline_rate, "1.00", "-", baseline.admitted, "-", "-", "-"
        );
        let held = lease().held_at_most();
        let lease_bound = (RATE * lease().lease_lifetime().as_secs()).min(GATEWAYS as u64 * held);
        let sync_bound = GATEWAYS as u64 * sync().unsynced_at_most(&quota());
        for (index, (name, counting, bound)) in [
            ("exact", Counting::Exact, 0),
            ("lease", Counting::Lease(lease()), lease_bound),
            ("sync", Counting::Sync(sync()), sync_bound),
        ]
        .into_iter()
        .enumerate()
        {
            let gateways = gateways(&server.url(), &format!("bench{index}")).await;
            let before = commands(&server);
            let run = flood(&gateways, counting, tasks, seconds).await;
            for gateway in &gateways {
                gateway.settle().await;
            }
            let after = commands(&server);
            let per_check = after.saturating_sub(before + 1) as f64 / run.checks.max(1) as f64;
            let rate = run.checks as f64 / run.elapsed.as_secs_f64();
            let exact = CAPACITY as f64 + RATE as f64 * run.elapsed.as_secs_f64();
            let over = run.admitted as f64 - exact;
            assert!(run.admitted > 0, "{name}: the flood got something through");
            println!(
                "{:<7} {:>10} {:>12.0} {:>10.2} {:>14.4} {:>9} {:>9.0} {:>+10.0} {:>10}",
                name,
                run.checks,
                rate,
                rate / baseline_rate,
                per_check,
                run.admitted,
                exact,
                over,
                if bound == 0 { "0".to_owned() } else { format!("<= {bound}") },
            );
        }
        println!(
            "\n{GATEWAYS} gateways x {tasks} tasks, {seconds} s a mode; token bucket of {CAPACITY}, \
             {RATE}/s. Bounds: lease min(R·L, G·H) with L = 1 s, H = {held}; sync G·M with \
             M = B + R·I = {}; lease under-admission at a refusal <= (G - 1)·H = {}.",
            sync().unsynced_at_most(&quota()),
            (GATEWAYS as u64 - 1) * held
        );
    });
}
