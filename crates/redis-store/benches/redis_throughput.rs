//! Checks per second and latency of the Redis store, next to `redis-benchmark` sending the same
//! `EVALSHA` to the same server at the same concurrency.
//!
//! The bench starts its own `redis-server` (via `tollgate-redis-harness`, on a free loopback
//! port, killed at the end), loads the store's one Lua script, then:
//!
//! 1. **Closed loop**, for each workload and each concurrency C (default 1, 16, 64), every
//!    round: *tollgate* — C tokio tasks sharing one [`RedisStore`] (one multiplexed
//!    connection), each calling `Store::check_one` in a loop for S seconds, timing every call;
//!    *baseline* — `redis-benchmark -c C -n N --csv` with the `EVALSHA` that `check_one` sends,
//!    argument for argument, over C connections (N = its last rate, or tollgate's, times S).
//!    The two run one right after the other, tollgate first in even rounds and
//!    `redis-benchmark` first in odd ones; each ratio compares runs of one round.
//! 2. **Open loop at half load**, every round: tollgate at half its peak (its best median
//!    closed-loop rate for the workload; `--load 0.25,0.5` adds other fractions) for S
//!    seconds, each check started at its own, evenly spaced, scheduled instant whether or not
//!    earlier ones have answered; latency from that instant. *Baseline*: the same `EVALSHA`,
//!    built by the bench and sent on a plain redis-rs multiplexed connection, at the same rate
//!    from the same generator (`redis-benchmark` cannot hold a rate); order alternating.
//!
//! Workloads: `hot key` (every check on one key) and `N keys` (each check on a key drawn at
//! random from N, default 100,000: `redis-benchmark -r N` draws the same keys). The quota is a
//! token bucket of 50 million tokens refilled one a minute, so every check is allowed and
//! writes its key (asserted for tollgate; `redis-benchmark` runs with `-e` and fails on any
//! error reply); a 3-second warm-up creates most keys, and the hot key is reset before each
//! run. The client runtime has one worker thread by default, like `redis-benchmark`:
//! on a 2-core machine the other core is the server's.
//!
//! Run: `cargo bench -p tollgate-redis --bench redis_throughput -- [--seconds S] [--rounds R]
//! [--concurrency 1,16,64] [--keys N] [--threads T] [--load 0.5]` (or `TOLLGATE_BENCH_SECONDS`,
//! ... in the environment), or `scripts/bench-redis`. Defaults: 2 s, 3 rounds — under two
//! minutes. Without `--bench` (as `cargo test --all-targets` runs it) it makes a smoke run of a
//! few seconds (one round of 0.2 s, 1,000 keys), which still asserts every decision.

#![allow(clippy::print_stdout, reason = "a bench binary prints its tables")]

// The bench's own modules live in `benches/redis_throughput/`, out of the way of cargo's bench
// discovery, which takes every `benches/*.rs` for a bench of its own.
#[path = "redis_throughput/bench.rs"]
mod bench;
#[path = "redis_throughput/checkers.rs"]
mod checkers;
mod common;
#[path = "redis_throughput/figures.rs"]
mod figures;
#[path = "redis_throughput/load.rs"]
mod load;
#[path = "redis_throughput/redis_benchmark.rs"]
mod redis_benchmark;
#[path = "redis_throughput/report.rs"]
mod report;
#[path = "redis_throughput/workload.rs"]
mod workload;

use std::time::Duration;

use crate::bench::Bench;
use crate::common::Options;

/// What a run does, from the command line or the environment.
struct Settings {
    seconds: f64,
    rounds: usize,
    concurrency: Vec<usize>,
    keys: usize,
    threads: usize,
    /// Open-loop rates, as fractions of the peak.
    loads: Vec<f64>,
}

impl Settings {
    fn from(options: &Options) -> Settings {
        let settings = Settings {
            seconds: options.get("seconds", 2.0),
            rounds: options.get("rounds", 3),
            concurrency: options.list("concurrency", &[1, 16, 64]),
            keys: options.get("keys", 100_000),
            threads: options.get("threads", 1),
            loads: options.list("load", &[0.5]),
        };
        assert!(settings.seconds > 0.0 && settings.rounds > 0 && settings.keys > 0);
        assert!(settings.concurrency.iter().all(|&c| c > 0));
        assert!(settings.loads.iter().all(|&load| load > 0.0));
        settings
    }

    fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.seconds)
    }
}

fn main() {
    let options = Options::from_env().or_smoke(&[
        "--rounds",
        "1",
        "--seconds",
        "0.2",
        "--concurrency",
        "1,4",
        "--keys",
        "1000",
        "--load",
        "0.25",
    ]);
    let settings = Settings::from(&options);
    assert!(
        redis_benchmark::is_installed(),
        "redis-benchmark is missing (Debian: apt-get install redis-tools)"
    );
    let bench = Bench::start(&settings);
    let series = bench.closed_loops(&settings);
    println!();
    report::closed_loop(&series, settings.seconds);
    let loads = bench.open_loops(&settings, &series);
    println!();
    report::open_loop(&loads, settings.seconds);
}
