//! One run: the server, the store and a bare connection on it, the workloads, and the rounds.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;
use tollgate_redis::RedisStore;
use tollgate_redis_harness::RedisServer;

use crate::Settings;
use crate::checkers::{Bare, Tollgate};
use crate::figures::Figures;
use crate::load::{self, Checker};
use crate::redis_benchmark;
use crate::report::{OpenLoad, Pair, Series};
use crate::workload::{Keys, Workload};

/// A workload, ready for each way of sending it.
struct Prepared {
    tollgate: Tollgate,
    bare: Bare,
    /// `redis-benchmark`'s arguments.
    benchmark_args: Vec<String>,
}

/// The server and everything that loads it.
pub(crate) struct Bench {
    server: RedisServer,
    runtime: Runtime,
    workloads: Vec<Prepared>,
}

impl Bench {
    /// Starts a server, loads the script, connects the store and a bare connection, checks
    /// `redis-benchmark`'s command once, and warms every workload's keys up.
    pub(crate) fn start(settings: &Settings) -> Bench {
        let server = crate::common::start_server();
        let runtime = crate::common::runtime(settings.threads);
        let url = server.url();
        let (store, connection) = runtime.block_on(async {
            let store = RedisStore::connect(&url)
                .await
                .unwrap_or_else(|error| panic!("could not connect the store: {error}"));
            let client = redis::Client::open(url.as_str()).expect("a valid redis url");
            let connection = client
                .get_multiplexed_async_connection()
                .await
                .unwrap_or_else(|error| panic!("could not connect to redis: {error}"));
            (store, connection)
        });
        let loaded = server
            .cli(&["SCRIPT", "LOAD", RedisStore::script_source()])
            .unwrap_or_else(|error| panic!("SCRIPT LOAD failed: {error}"));
        assert_eq!(loaded.trim(), RedisStore::script_sha());
        let workloads = [Keys::Hot, Keys::Many(settings.keys)]
            .into_iter()
            .map(|keys| {
                let workload = Workload::new(keys);
                Prepared {
                    benchmark_args: workload.benchmark_args(&store),
                    tollgate: Tollgate {
                        store: store.clone(),
                        workload: Arc::clone(&workload),
                    },
                    bare: Bare {
                        connection: connection.clone(),
                        store: store.clone(),
                        workload,
                    },
                }
            })
            .collect();
        let bench = Bench {
            server,
            runtime,
            workloads,
        };
        bench.check_benchmark_command();
        bench.warm_up();
        bench
    }

    /// Sends `redis-benchmark`'s hot-key command once through `redis-cli`: it must be
    /// allowed, like every tollgate check.
    fn check_benchmark_command(&self) {
        let command: Vec<&str> = self.workloads[0]
            .benchmark_args
            .iter()
            .map(String::as_str)
            .collect();
        let answer = self
            .server
            .cli(&command)
            .unwrap_or_else(|error| panic!("redis-benchmark's EVALSHA failed: {error}"));
        assert_eq!(
            answer.lines().next().map(str::trim),
            Some("1"),
            "redis-benchmark's EVALSHA must be allowed; it answered:\n{answer}"
        );
    }

    /// Three seconds of checks on every workload, so timed runs mostly find their keys.
    fn warm_up(&self) {
        for prepared in &self.workloads {
            let load = load::closed_loop(&prepared.tollgate, 64, Duration::from_secs(3));
            self.runtime.block_on(load);
        }
        let keys = self.server.cli(&["DBSIZE"]).unwrap_or_default();
        eprintln!("warmed up: {} keys on the server", keys.trim());
    }

    /// Readies a workload for a timed run (resets its hot key).
    fn fresh(&self, prepared: &Prepared) {
        let workload = &prepared.tollgate.workload;
        self.runtime
            .block_on(workload.reset(&prepared.tollgate.store));
    }

    /// Every workload at every concurrency, tollgate and `redis-benchmark`, round by round.
    pub(crate) fn closed_loops(&self, settings: &Settings) -> Vec<Series> {
        let mut all: Vec<(usize, Series)> = Vec::new();
        for (at, prepared) in self.workloads.iter().enumerate() {
            for &concurrency in &settings.concurrency {
                let workload = prepared.tollgate.workload.name();
                let rounds = Vec::with_capacity(settings.rounds);
                all.push((
                    at,
                    Series {
                        workload,
                        concurrency,
                        rounds,
                    },
                ));
            }
        }
        for round in 0..settings.rounds {
            for (at, series) in &mut all {
                let pair = self.closed_pair(settings, &self.workloads[*at], series, round);
                eprintln!(
                    "round {}/{}: {:<12} c={:<3} tollgate {:>8.0}/s  redis-benchmark {:>8.0}/s",
                    round + 1,
                    settings.rounds,
                    series.workload,
                    series.concurrency,
                    pair.tollgate.rate,
                    pair.baseline.rate
                );
                series.rounds.push(pair);
            }
        }
        all.into_iter().map(|(_, series)| series).collect()
    }

    /// One round of tollgate and `redis-benchmark`: tollgate first in even rounds.
    /// `redis-benchmark` sends a fixed number of requests: its last rate (or tollgate's, just
    /// measured) times the run's length.
    fn closed_pair(
        &self,
        settings: &Settings,
        prepared: &Prepared,
        series: &Series,
        round: usize,
    ) -> Pair {
        let concurrency = series.concurrency;
        let tollgate = || {
            self.fresh(prepared);
            let load = load::closed_loop(&prepared.tollgate, concurrency, settings.duration());
            self.runtime.block_on(load)
        };
        let baseline = |estimate: f64| {
            self.fresh(prepared);
            let requests = (estimate * settings.seconds).max(1_000.0) as u64;
            let args = &prepared.benchmark_args;
            redis_benchmark::run(self.server.port(), concurrency, requests, args)
        };
        if round.is_multiple_of(2) {
            let tollgate = tollgate();
            let baseline = baseline(tollgate.rate);
            Pair { tollgate, baseline }
        } else {
            let last = series
                .rounds
                .last()
                .map_or(1_000.0, |pair| pair.baseline.rate);
            let baseline = baseline(last);
            let tollgate = tollgate();
            Pair { tollgate, baseline }
        }
    }

    /// Every workload at each fraction of its peak, tollgate and the bare `EVALSHA`, round by
    /// round (tollgate first in even rounds).
    pub(crate) fn open_loops(&self, settings: &Settings, series: &[Series]) -> Vec<OpenLoad> {
        let mut all: Vec<(usize, OpenLoad)> = Vec::new();
        for (at, prepared) in self.workloads.iter().enumerate() {
            let workload = prepared.tollgate.workload.name();
            let peak = series
                .iter()
                .filter(|series| series.workload == workload)
                .map(Series::tollgate_rate)
                .fold(0.0, f64::max);
            for &fraction in &settings.loads {
                let rounds = Vec::with_capacity(settings.rounds);
                let workload = workload.clone();
                all.push((
                    at,
                    OpenLoad {
                        workload,
                        peak,
                        fraction,
                        rounds,
                    },
                ));
            }
        }
        for round in 0..settings.rounds {
            for (at, load) in &mut all {
                let prepared = &self.workloads[*at];
                let rate = load.peak * load.fraction;
                let pair = if round.is_multiple_of(2) {
                    let tollgate = self.open(prepared, &prepared.tollgate, rate, settings);
                    let baseline = self.open(prepared, &prepared.bare, rate, settings);
                    Pair { tollgate, baseline }
                } else {
                    let baseline = self.open(prepared, &prepared.bare, rate, settings);
                    let tollgate = self.open(prepared, &prepared.tollgate, rate, settings);
                    Pair { tollgate, baseline }
                };
                eprintln!(
                    "round {}/{}: {:<12} {:>3.0}% of peak, {:>6.0}/s: p99 tollgate {:.3} ms, \
                     bare EVALSHA {:.3} ms",
                    round + 1,
                    settings.rounds,
                    load.workload,
                    load.fraction * 100.0,
                    rate,
                    pair.tollgate.p99_ms,
                    pair.baseline.p99_ms
                );
                load.rounds.push(pair);
            }
        }
        all.into_iter().map(|(_, load)| load).collect()
    }

    /// One open-loop run of `prepared`'s workload through `checker`.
    fn open(
        &self,
        prepared: &Prepared,
        checker: &impl Checker,
        rate: f64,
        settings: &Settings,
    ) -> Figures {
        self.fresh(prepared);
        load::open_loop(self.runtime.handle(), checker, rate, settings.duration())
    }
}
