//! What the Redis benches share: their options, the server they start, the runtime they run
//! the store on, and the median they report.

// Each bench compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::str::FromStr;

use tokio::runtime::Runtime;
use tollgate_redis_harness::RedisServer;

/// A bench's options: `--name value` (or `--name=value`) after `cargo bench ... --`, the last
/// one winning; else the environment variable `TOLLGATE_BENCH_<NAME>` (`--rounds` reads
/// `TOLLGATE_BENCH_ROUNDS`); else the bench's default.
pub(crate) struct Options {
    args: Vec<String>,
}

impl Options {
    /// This process's arguments.
    pub(crate) fn from_env() -> Options {
        Options {
            args: std::env::args().skip(1).collect(),
        }
    }

    /// Whether `cargo bench` started this binary (it passes `--bench`). `cargo test
    /// --all-targets` runs bench binaries without it: they then make a short smoke run (see
    /// [`or_smoke`](Options::or_smoke)), so a bench that no longer works fails as a test.
    pub(crate) fn is_bench(&self) -> bool {
        self.args.iter().any(|arg| arg == "--bench")
    }

    /// These options under `cargo bench`; otherwise (a test run) `smoke`, the few small
    /// settings of a run that takes seconds and still checks every decision it makes.
    pub(crate) fn or_smoke(self, smoke: &[&str]) -> Options {
        if self.is_bench() {
            return self;
        }
        Options {
            args: smoke.iter().map(|arg| (*arg).to_owned()).collect(),
        }
    }

    /// The value of `--name`, or of `TOLLGATE_BENCH_<NAME>`, or `default`.
    ///
    /// # Panics
    ///
    /// If the value does not parse: a bench run with a mistyped option should stop, not run
    /// with a default nobody asked for.
    pub(crate) fn get<T: FromStr>(&self, name: &str, default: T) -> T {
        match self.raw(name) {
            Some(value) => value
                .parse()
                .unwrap_or_else(|_| panic!("--{name} {value:?} is not a valid value")),
            None => default,
        }
    }

    /// A comma-separated list (`--concurrency 1,16,64`), or `default`.
    ///
    /// # Panics
    ///
    /// As [`get`](Self::get).
    pub(crate) fn list<T: FromStr + Clone>(&self, name: &str, default: &[T]) -> Vec<T> {
        match self.raw(name) {
            Some(value) => value
                .split(',')
                .map(|part| {
                    part.trim()
                        .parse()
                        .unwrap_or_else(|_| panic!("--{name}: {part:?} is not a valid value"))
                })
                .collect(),
            None => default.to_vec(),
        }
    }

    /// The first argument that is neither a flag nor a flag's value: a filter on case names.
    pub(crate) fn filter(&self) -> Option<&str> {
        let mut after_flag = false;
        for arg in &self.args {
            if arg.starts_with("--") {
                // `--bench` takes no value; `--name value` does, `--name=value` has it.
                after_flag = arg != "--bench" && !arg.contains('=');
            } else if after_flag {
                after_flag = false;
            } else {
                return Some(arg);
            }
        }
        None
    }

    /// The last value given for `--name` (so options after a script's defaults override
    /// them), else the environment's.
    fn raw(&self, name: &str) -> Option<String> {
        let flag = format!("--{name}");
        let inline = format!("--{name}=");
        let mut found = None;
        for (at, arg) in self.args.iter().enumerate() {
            if *arg == flag {
                let value = self.args.get(at + 1);
                found = Some(
                    value
                        .unwrap_or_else(|| panic!("{flag} needs a value"))
                        .clone(),
                );
            } else if let Some(value) = arg.strip_prefix(&inline) {
                found = Some(value.to_owned());
            }
        }
        found.or_else(|| {
            let variable = format!("TOLLGATE_BENCH_{}", name.to_uppercase().replace('-', "_"));
            std::env::var(variable).ok()
        })
    }
}

/// Starts a `redis-server` on a free loopback port (killed when the value is dropped).
///
/// # Panics
///
/// If the server does not start; the message says why (and how to install Redis).
pub(crate) fn start_server() -> RedisServer {
    let server = RedisServer::start().unwrap_or_else(|error| panic!("{error}"));
    eprintln!("redis-server started on 127.0.0.1:{}", server.port());
    server
}

/// A tokio runtime with `threads` worker threads (timers and I/O on).
///
/// # Panics
///
/// If the runtime cannot be built.
pub(crate) fn runtime(threads: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()
        .expect("a tokio runtime for the bench")
}

/// The median of `values` (the mean of the middle two for an even count; 0 when empty).
pub(crate) fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.into_iter().collect();
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

/// The lowest and highest of `values`.
pub(crate) fn range(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    values
        .into_iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), value| {
            (low.min(value), high.max(value))
        })
}
