//! One hot key on a 3-master Redis Cluster, with and without sub-buckets: each master's share
//! of the commands and the checks per second, measured side by side in one run.
//!
//! The bench starts its own cluster (via `tollgate-redis-harness`: three masters with a
//! replica each, on free loopback ports, stopped at the end). T tasks (default 32) of one
//! gateway check one global key in a closed loop for S seconds, through a `FleetStore` over a
//! `RedisStore` on the cluster, as the layer asks (`check_now`, else `check`). The quota is
//! far above the offered rate, so every check runs the full script; the rule is either one
//! key or spread over N sub-buckets (default 6). Per run, each master's `INFO commandstats`
//! calls (all commands; `CONFIG RESETSTAT` before) give its share; checks per second are
//! against the one-key run of the same process.
//!
//! Run: `cargo bench -p tollgate-redis --bench sub_buckets -- [--seconds S] [--tasks T]
//! [--sub-buckets N]`. Without `--bench` (as `cargo test --all-targets` runs it) it makes a
//! smoke run of 0.3 s.

#![allow(clippy::print_stdout, reason = "a bench binary prints its table")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate_core::{FleetModes, Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_redis_harness::{RedisCluster, RedisServer};
use tollgate_wrappers::FleetStore;

use crate::common::Options;

/// Every command a server has run since its stats were reset.
fn commands(server: &RedisServer) -> u64 {
    let info = server
        .cli(&["INFO", "commandstats"])
        .expect("INFO commandstats");
    info.lines()
        .filter(|line| !line.starts_with("cmdstat_info:") && !line.starts_with("cmdstat_config:"))
        .filter_map(|line| line.split("calls=").nth(1))
        .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
        .sum()
}

/// Checks made and allowed by `tasks` tasks in `seconds`, every check of the one hot key.
async fn flood(
    store: &FleetStore<RedisStore>,
    sub_buckets: u32,
    tasks: usize,
    seconds: f64,
) -> (u64, u64, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let (checks, allowed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (store, stop) = (store.clone(), Arc::clone(&stop));
            let (checks, allowed) = (Arc::clone(&checks), Arc::clone(&allowed));
            tokio::spawn(async move {
                let (rule, key) = (RuleId::new("trending").expect("valid"), Key::global());
                let quota =
                    Quota::token_bucket(1 << 30, Rate::per_second(1_000_000)).expect("valid");
                let item = Item::new(&rule, quota, &key)
                    .with_fleet_modes(FleetModes::new().with_sub_buckets(sub_buckets));
                while !stop.load(Ordering::Relaxed) {
                    let answer = match store.check_now(&[item]) {
                        Some(answer) => answer,
                        None => store.check(&[item]).await,
                    }
                    .expect("the cluster answers");
                    checks.fetch_add(1, Ordering::Relaxed);
                    allowed.fetch_add(u64::from(answer.is_allowed()), Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle.await.expect("a flooding task does not panic");
    }
    (
        checks.load(Ordering::Relaxed),
        allowed.load(Ordering::Relaxed),
        started.elapsed(),
    )
}

fn main() {
    let options = Options::from_env().or_smoke(&["--seconds", "0.3", "--tasks", "4"]);
    let seconds: f64 = options.get("seconds", 3.0);
    let tasks: usize = options.get("tasks", 32);
    let spread: u32 = options.get("sub-buckets", 6);
    let cluster = RedisCluster::start().unwrap_or_else(|error| panic!("{error}"));
    let masters = cluster.masters().expect("the cluster's masters");
    let runtime = common::runtime(1);
    runtime.block_on(async {
        let connection = RedisConnection::connect_cluster(&cluster.urls())
            .await
            .expect("connect to the cluster");
        let store = FleetStore::new(
            RedisStore::builder()
                .prefix("bench")
                .build(connection)
                .expect("a valid prefix"),
        );
        println!(
            "{:<14} {:>10} {:>12} {:>9} {:>30}",
            "key", "checks", "checks/s", "/ one key", "share of commands per master"
        );
        let mut one_key_rate = None;
        for sub_buckets in [1, spread] {
            for master in &masters {
                master
                    .cli(&["CONFIG", "RESETSTAT"])
                    .expect("CONFIG RESETSTAT");
            }
            let (checks, allowed, elapsed) = flood(&store, sub_buckets, tasks, seconds).await;
            assert_eq!(allowed, checks, "the quota is far above the offered rate");
            let per_master: Vec<u64> = masters.iter().map(|master| commands(master)).collect();
            let total = per_master.iter().sum::<u64>().max(1) as f64;
            let shares: Vec<String> = per_master
                .iter()
                .map(|calls| format!("{:.2}", *calls as f64 / total))
                .collect();
            let rate = checks as f64 / elapsed.as_secs_f64();
            let baseline = *one_key_rate.get_or_insert(rate);
            let name = if sub_buckets == 1 {
                "one key".to_owned()
            } else {
                format!("{sub_buckets} sub-buckets")
            };
            println!(
                "{:<14} {:>10} {:>12.0} {:>9.2} {:>30}",
                name,
                checks,
                rate,
                rate / baseline,
                shares.join(" / ")
            );
        }
    });
}
