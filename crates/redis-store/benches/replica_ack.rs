//! What a replica's acknowledgement costs on a Redis Cluster: checks per second and latency
//! (median, p99) of a rule answered at once against the same rule answered once a replica
//! holds its count (`FleetModes::with_replica_ack`: `WAIT 1 <ms>` after the script), side by
//! side in one run.
//!
//! The bench starts its own cluster (via `tollgate-redis-harness`: three masters with a
//! replica each, on free loopback ports, stopped at the end). T tasks (default 16) of one
//! gateway check keys spread over every slot in a closed loop for S seconds a case, through one
//! `RedisStore`, under a quota far above the offered rate (every check runs the whole script).
//! Each round runs both cases, without then with the acknowledgement; the ratios are taken
//! within a round and reported as median and range over R rounds (default 5).
//!
//! Run: `cargo bench -p tollgate-redis --bench replica_ack -- [--seconds S] [--tasks T]
//! [--rounds R]`. Without `--bench` (as `cargo test --all-targets` runs it) it makes a smoke
//! run of 0.2 s.

#![allow(clippy::print_stdout, reason = "a bench binary prints its table")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tollgate_core::{FleetModes, Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::RedisStore;
use tollgate_redis_harness::RedisCluster;

use crate::common::Options;

/// Keys the tasks take in turn: enough that every master serves many.
const KEYS: u64 = 1_000;

/// The longest a check waits for a replica: far above a loopback replica's answer.
const WAIT: Duration = Duration::from_millis(100);

/// One case's outcome.
struct Case {
    per_second: f64,
    median: Duration,
    p99: Duration,
}

/// `tasks` tasks checking for `seconds`, with or without the acknowledgement.
async fn flood(store: &RedisStore, acknowledged: bool, tasks: u64, seconds: f64) -> Case {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let (store, stop) = (store.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                let rule = RuleId::new("login").expect("valid");
                let quota =
                    Quota::token_bucket(1 << 30, Rate::per_second(1_000_000)).expect("valid");
                let modes = if acknowledged {
                    FleetModes::new().with_replica_ack(WAIT)
                } else {
                    FleetModes::new()
                };
                let mut latencies = Vec::new();
                let mut n = task;
                while !stop.load(Ordering::Relaxed) {
                    let key = Key::new(format!("account-{}", n % KEYS));
                    n += tasks;
                    let item = Item::new(&rule, quota, &key).with_fleet_modes(modes);
                    let began = Instant::now();
                    let answer = store.check_one(&item).await.expect("the cluster answers");
                    latencies.push(began.elapsed());
                    assert!(answer.decision().is_allowed(), "far below the quota");
                }
                latencies
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for handle in handles {
        latencies.extend(handle.await.expect("a checking task does not panic"));
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let at = |fraction: f64| {
        let index = ((latencies.len() as f64 - 1.0) * fraction).round() as usize;
        latencies.get(index).copied().unwrap_or_default()
    };
    Case {
        per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        median: at(0.5),
        p99: at(0.99),
    }
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn main() {
    let options =
        Options::from_env().or_smoke(&["--seconds", "0.2", "--tasks", "4", "--rounds", "1"]);
    let seconds: f64 = options.get("seconds", 2.0);
    let tasks: u64 = options.get("tasks", 16);
    let rounds: usize = options.get("rounds", 5);
    let cluster = RedisCluster::start().unwrap_or_else(|error| panic!("{error}"));
    let runtime = common::runtime(1);
    runtime.block_on(async {
        let store = RedisStore::builder()
            .prefix("bench")
            .connect_cluster(&cluster.urls())
            .await
            .expect("connect to the cluster");
        println!(
            "{:<6} {:>12} {:>9} {:>9} {:>12} {:>9} {:>9} {:>9} {:>9}",
            "round",
            "plain/s",
            "p50 µs",
            "p99 µs",
            "acked/s",
            "p50 µs",
            "p99 µs",
            "rate ×",
            "p99 ×"
        );
        let (mut rate_ratios, mut p99_ratios) = (Vec::new(), Vec::new());
        for round in 1..=rounds {
            let plain = flood(&store, false, tasks, seconds).await;
            let acked = flood(&store, true, tasks, seconds).await;
            let rate_ratio = acked.per_second / plain.per_second;
            let p99_ratio = micros(acked.p99) / micros(plain.p99).max(1.0);
            rate_ratios.push(rate_ratio);
            p99_ratios.push(p99_ratio);
            println!(
                "{:<6} {:>12.0} {:>9.0} {:>9.0} {:>12.0} {:>9.0} {:>9.0} {:>9.2} {:>9.2}",
                round,
                plain.per_second,
                micros(plain.median),
                micros(plain.p99),
                acked.per_second,
                micros(acked.median),
                micros(acked.p99),
                rate_ratio,
                p99_ratio
            );
        }
        let (rate_low, rate_high) = common::range(rate_ratios.iter().copied());
        let (p99_low, p99_high) = common::range(p99_ratios.iter().copied());
        println!(
            "acknowledged / plain: checks/s {:.2} (range {rate_low:.2}–{rate_high:.2}), p99 {:.2} (range {p99_low:.2}–{p99_high:.2})",
            common::median(rate_ratios),
            common::median(p99_ratios),
        );
        let acks = store.connection().replica_acks();
        println!(
            "replica acknowledgements: {} acknowledged, {} not",
            acks.acknowledged, acks.unacknowledged
        );
    });
}
