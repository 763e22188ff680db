//! Bytes per key on the Redis server: what one more caller costs, per algorithm, next to a
//! plain key of the same name.
//!
//! The bench starts its own `redis-server` (via `tollgate-redis-harness`, on a free loopback
//! port, killed at the end). For each case it empties the server (`FLUSHALL SYNC`), writes
//! 100,000 keys (`--keys N`), then reports two figures per key:
//!
//! * **`MEMORY USAGE`** — Redis's own estimate for one key (its name, value object and
//!   main-table entry), averaged over **every** key written (pipelined, 1,000 a round trip).
//!   Exact for these small values (`SAMPLES` only matters for large collections);
//! * **`used_memory` Δ** — growth of the server's `used_memory` (`INFO memory`) divided by the
//!   keys: what the server really pays, including what `MEMORY USAGE` leaves out (the expiry
//!   table's entry, both hash tables' bucket arrays, allocator rounding).
//!
//! Callers are short account ids, `user100000` ... `user199999` (10 bytes), under the rule
//! `login`, so stored names look like `tg:t2:{login:%0Auser100000}` (27 bytes); with
//! `--callers ipv4` they are IPv4 addresses from the benchmarking block 198.18.0.0/15
//! (`198.18.0.0` ... `198.19.134.159`, 10 to 14 bytes; names of 27 to 31 bytes). Each algorithm's
//! keys are written through the store (`Store::check_one`, 64 checks in flight on one
//! connection), with quotas that keep every key alive for the whole run (buckets refill over
//! an hour, windows last a day); the sliding window log gets three checks per key, so each log
//! holds three entries (checked with `ZCARD`). **Baseline**, measured in the same run: a plain
//! `SET <name> <16-digit integer> PX 60000` on the token bucket's very names — a µs timestamp,
//! the heart of what a GCRA or token bucket key holds (its value is that timestamp and the
//! emission interval it was written under, packed in 8 bytes or so), with no tollgate in between.
//!
//! Target: at most 88 bytes per key (`MEMORY USAGE`) for token bucket, GCRA and fixed window
//! (issue 25: the name's 32-byte allocation, a value of at most 12 bytes in one 32-byte
//! allocation with its object, and the 24-byte table entry; names of 31 bytes or more cost 16
//! more, as some of `--callers ipv4`'s do).
//!
//! Run: `cargo bench -p tollgate-redis --bench redis_memory -- [--keys N] [--callers ipv4]
//! [NAME]` (NAME: only the cases whose name contains it), or `scripts/bench-redis`. About half
//! a minute. Without `--bench` (as `cargo test --all-targets` runs it) it makes a smoke run with
//! 200 keys per case.

#![allow(clippy::print_stdout, reason = "a bench binary prints its table")]

mod common;
#[path = "redis_memory/inspect.rs"]
mod inspect;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use tollgate_core::{Algorithm, Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::RedisStore;

use crate::common::Options;
use crate::inspect::Measured;

/// Checks in flight while keys are written.
const WRITERS: usize = 64;

/// The rule every key belongs to.
const RULE: &str = "login";

const HOUR: Duration = Duration::from_secs(3_600);
const DAY: Duration = Duration::from_secs(86_400);

/// Target for token bucket, GCRA and fixed window, bytes per key.
const TARGET_BYTES: f64 = 88.0;

/// One algorithm's case.
struct Case {
    name: &'static str,
    quota: fn() -> Quota,
    /// Checks per key (a log holds one entry per check).
    checks: usize,
    /// Whether the 100-byte target applies.
    targeted: bool,
}

/// Every case, in table order.
const CASES: [Case; 6] = [
    Case {
        name: "token_bucket",
        quota: || Quota::token_bucket(10, Rate::per_hour(10)).expect("a valid quota"),
        checks: 1,
        targeted: true,
    },
    Case {
        name: "gcra",
        quota: || Quota::gcra(Rate::per_hour(10), 10).expect("a valid quota"),
        checks: 1,
        targeted: true,
    },
    Case {
        name: "fixed_window",
        quota: || Quota::fixed_window(10, DAY).expect("a valid quota"),
        checks: 1,
        targeted: true,
    },
    Case {
        name: "sliding_window_counter",
        quota: || Quota::sliding_window_counter(10, DAY).expect("a valid quota"),
        checks: 1,
        targeted: false,
    },
    Case {
        name: "sliding_window_log",
        quota: || Quota::sliding_window_log(10, DAY).expect("a valid quota"),
        checks: 3,
        targeted: false,
    },
    Case {
        name: "leaky_bucket",
        quota: || Quota::leaky_bucket(Rate::per_hour(10), HOUR).expect("a valid quota"),
        checks: 1,
        targeted: false,
    },
];

/// Who the callers are.
#[derive(Debug, Clone, Copy)]
enum Callers {
    /// `user100000`, `user100001`, ...
    Accounts,
    /// `198.18.0.0`, `198.18.0.1`, ... (RFC 2544's benchmarking block).
    Ipv4,
}

impl std::str::FromStr for Callers {
    type Err = String;

    fn from_str(name: &str) -> Result<Callers, String> {
        match name {
            "user" | "accounts" => Ok(Callers::Accounts),
            "ipv4" => Ok(Callers::Ipv4),
            _ => Err(format!("unknown callers {name:?}: user or ipv4")),
        }
    }
}

impl Callers {
    /// The first `count` callers' keys.
    fn keys(self, count: usize) -> Arc<[Key]> {
        (0..count)
            .map(|i| {
                Key::new(match self {
                    Callers::Accounts => format!("user{}", 100_000 + i),
                    Callers::Ipv4 => {
                        let (high, low) = (i >> 8, i & 0xff);
                        format!("198.{}.{}.{low}", 18 + (high >> 8), high & 0xff)
                    }
                })
            })
            .collect()
    }
}

/// The callers, and the store and connection that write and inspect their keys.
struct Bench {
    store: RedisStore,
    connection: MultiplexedConnection,
    rule: RuleId,
    callers: Arc<[Key]>,
}

fn main() {
    let options = Options::from_env().or_smoke(&["--keys", "200"]);
    let keys: usize = options.get("keys", 100_000);
    let callers: Callers = options.get("callers", Callers::Accounts);
    let filter = options.filter();
    let server = common::start_server();
    let runtime = common::runtime(1);
    let bench = runtime.block_on(Bench::connect(&server.url(), callers.keys(keys)));

    let baseline = runtime.block_on(bench.baseline());
    println!("{keys} keys per case, callers {callers:?}; bytes per key, averaged over every key");
    println!(
        "{:<26} {:>9} {:>9} {:>12} {:>9} {:>8}  verdict",
        "case", "keys held", "entries", "MEMORY USAGE", "vs plain", "used Δ"
    );
    print_row("plain SET (baseline)", &baseline, &baseline, None);
    for case in &CASES {
        if filter.is_some_and(|filter| !case.name.contains(filter)) {
            continue;
        }
        let measured = runtime.block_on(bench.case(case));
        let target = case.targeted.then_some(TARGET_BYTES);
        print_row(case.name, &measured, &baseline, target);
    }
    println!(
        "\nMEMORY USAGE = Redis's estimate per key (name, value, main-table entry); used Δ = growth \
         of INFO used_memory / keys held; vs plain = MEMORY USAGE / the baseline's; \
         target <= {TARGET_BYTES:.0} B (MEMORY USAGE) for token bucket, GCRA and fixed window"
    );
}

fn print_row(name: &str, measured: &Measured, baseline: &Measured, target: Option<f64>) {
    let verdict = match target {
        Some(target) if measured.memory_usage <= target => "meets target",
        Some(_) => "MISSES target",
        None => "-",
    };
    let entries = measured
        .entries
        .map_or_else(|| "-".to_owned(), |entries| format!("{entries:.2}"));
    println!(
        "{:<26} {:>9} {:>9} {:>12.1} {:>9.2} {:>8.1}  {verdict}",
        name,
        measured.keys_held,
        entries,
        measured.memory_usage,
        measured.memory_usage / baseline.memory_usage,
        measured.used_memory,
    );
}

impl Bench {
    async fn connect(url: &str, callers: Arc<[Key]>) -> Bench {
        let store = RedisStore::connect(url)
            .await
            .unwrap_or_else(|error| panic!("could not connect the store: {error}"));
        let client = redis::Client::open(url).expect("a valid redis url");
        let connection = client
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|error| panic!("could not connect to redis: {error}"));
        Bench {
            store,
            connection,
            rule: RuleId::new(RULE).expect("a valid rule id"),
            callers,
        }
    }

    /// The stored names of every caller's `algorithm` state.
    fn names(&self, algorithm: Algorithm) -> Vec<String> {
        self.callers
            .iter()
            .map(|caller| {
                self.store
                    .stored_key(&self.rule, caller, algorithm)
                    .expect("the redis store knows every algorithm of the bench")
            })
            .collect()
    }

    /// Plain `SET name <µs timestamp> PX 60000` on the token bucket's names.
    async fn baseline(&self) -> Measured {
        let names = self.names(Algorithm::TokenBucket);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("the clock is past 1970")
            .as_micros();
        assert_eq!(now.to_string().len(), 16, "a µs timestamp has 16 digits");
        let mut connection = self.connection.clone();
        let before = inspect::empty(&mut connection).await;
        inspect::set_all(&mut connection, &names, &now.to_string(), 60_000).await;
        inspect::measure(&mut connection, &names, before, false).await
    }

    /// One algorithm's keys, written through the store.
    async fn case(&self, case: &Case) -> Measured {
        let quota = (case.quota)();
        let names = self.names(quota.algorithm());
        let is_log = quota.algorithm() == Algorithm::SlidingWindowLog;
        let mut connection = self.connection.clone();
        let before = inspect::empty(&mut connection).await;
        self.fill(quota, case.checks).await;
        inspect::measure(&mut connection, &names, before, is_log).await
    }

    /// `checks` checks on every caller, [`WRITERS`] at a time; every one must be allowed.
    async fn fill(&self, quota: Quota, checks: usize) {
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let (store, rule) = (self.store.clone(), self.rule.clone());
                let callers = Arc::clone(&self.callers);
                tokio::spawn(async move {
                    for caller in callers.iter().skip(writer).step_by(WRITERS) {
                        for _ in 0..checks {
                            let answer = store
                                .check_one(&Item::new(&rule, quota, caller))
                                .await
                                .unwrap_or_else(|error| panic!("a check failed: {error}"));
                            assert!(answer.decision().is_allowed(), "the quota allows {checks}");
                        }
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.expect("a writer does not panic");
        }
    }
}
