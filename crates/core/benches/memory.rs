//! Bytes per key: what one more caller costs in tollgate's [`MemoryStore`], per algorithm, and in
//! governor's keyed limiter for the same callers.
//!
//! Each case runs in a fresh child process (this binary re-run with `--case NAME`), which
//! stores [`KEYS`] distinct keys with one check each and reports two figures:
//!
//! * **heap** — growth of the live bytes the program asked the allocator for, counted by the
//!   wrapping global allocator below. Exact, but blind to malloc's own per-chunk overhead and
//!   rounding;
//! * **RSS** — growth of the process's resident memory (`VmRSS` in `/proc/self/status`): what
//!   the machine really pays, allocator overhead included, to within a page.
//!
//! Keys are `"user:{i}"` for i in 0..1,000,000 (6–11 bytes; 7–12 encoded, so they sit inline in
//! the store), except the `long_keys` case, which uses 32-byte keys
//! (`"user:{i:07}@tenant-0042.example"`, 33 encoded) to show the cost of keys over 15 encoded
//! bytes. The store is built with `max_keys(4_000_000)` and quotas that keep every key live for
//! the whole run (buckets refill over hours, windows are a day long), so nothing is evicted or
//! swept; each case checks that all keys are still held. The sliding window log has one entry
//! per key.
//!
//! Run: `cargo bench -p tollgate-core --bench memory` (optionally `-- NAME` to run the cases
//! whose name contains NAME). `cargo bench --no-run` only compiles it.

// A global allocator must be an `unsafe impl`; this one only counts and delegates to `System`.
#![allow(unsafe_code)]
#![allow(clippy::print_stdout, reason = "a bench binary prints its table")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use governor::DefaultKeyedRateLimiter;
use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store};

/// Counts the bytes currently allocated (as requested by the program) and delegates to `System`.
struct CountingAllocator {
    live: AtomicUsize,
}

impl CountingAllocator {
    /// Bytes allocated and not yet freed.
    fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; only counters change.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            self.live.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            self.live.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) };
        self.live.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`, and the caller upholds `realloc`'s contract.
        let new_ptr = unsafe { System.realloc(ptr, layout, new_size) };
        if !new_ptr.is_null() {
            self.live.fetch_add(new_size, Ordering::Relaxed);
            self.live.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        new_ptr
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator {
    live: AtomicUsize::new(0),
};

/// Distinct keys stored per case.
const KEYS: usize = 1_000_000;

/// The most keys the store may hold: far above [`KEYS`], so nothing is evicted.
const MAX_KEYS: usize = 4_000_000;

const DAY: Duration = Duration::from_secs(86_400);

/// What a case stores.
#[derive(Clone, Copy)]
enum Case {
    Tollgate(fn() -> Quota),
    TollgateLongKeys(fn() -> Quota),
    GovernorString,
    GovernorKey,
}

/// Every case, by name, in table order.
const CASES: [(&str, Case); 9] = [
    ("token_bucket", Case::Tollgate(token_bucket)),
    ("gcra", Case::Tollgate(gcra)),
    ("fixed_window", Case::Tollgate(fixed_window)),
    (
        "sliding_window_counter",
        Case::Tollgate(sliding_window_counter),
    ),
    ("sliding_window_log", Case::Tollgate(sliding_window_log)),
    ("leaky_bucket", Case::Tollgate(leaky_bucket)),
    (
        "token_bucket/long_keys",
        Case::TollgateLongKeys(token_bucket),
    ),
    ("governor/String", Case::GovernorString),
    ("governor/Key", Case::GovernorKey),
];

fn token_bucket() -> Quota {
    Quota::token_bucket(10, Rate::per_hour(10)).expect("valid quota")
}

fn gcra() -> Quota {
    Quota::gcra(Rate::per_hour(10), 10).expect("valid quota")
}

fn fixed_window() -> Quota {
    Quota::fixed_window(10, DAY).expect("valid quota")
}

fn sliding_window_counter() -> Quota {
    Quota::sliding_window_counter(10, DAY).expect("valid quota")
}

fn sliding_window_log() -> Quota {
    Quota::sliding_window_log(10, DAY).expect("valid quota")
}

fn leaky_bucket() -> Quota {
    Quota::leaky_bucket(Rate::per_hour(10), Duration::from_secs(3_600)).expect("valid quota")
}

/// Governor's side of the same token bucket: 10 an hour, bursts of 10.
fn governor_quota() -> governor::Quota {
    let ten = std::num::NonZeroU32::new(10).expect("ten is not zero");
    governor::Quota::per_hour(ten).allow_burst(ten)
}

fn short_key(i: usize) -> String {
    format!("user:{i}")
}

fn long_key(i: usize) -> String {
    format!("user:{i:07}@tenant-0042.example")
}

/// One case's figures, as a child process reports them.
struct Measured {
    keys_held: usize,
    heap_bytes: usize,
    rss_bytes: usize,
    elapsed: Duration,
}

impl Measured {
    fn to_line(&self) -> String {
        format!(
            "measured {} {} {} {}",
            self.keys_held,
            self.heap_bytes,
            self.rss_bytes,
            self.elapsed.as_nanos()
        )
    }

    fn from_line(line: &str) -> Option<Measured> {
        let mut fields = line.strip_prefix("measured ")?.split(' ');
        let mut next = || fields.next()?.parse::<u128>().ok();
        Some(Measured {
            keys_held: usize::try_from(next()?).ok()?,
            heap_bytes: usize::try_from(next()?).ok()?,
            rss_bytes: usize::try_from(next()?).ok()?,
            elapsed: Duration::from_nanos(u64::try_from(next()?).ok()?),
        })
    }
}

/// Resident memory of this process, from `/proc/self/status` (Linux), in bytes.
fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// Stores [`KEYS`] keys for `case` and measures what they cost. Runs in a child process.
fn measure(case: Case) -> Measured {
    let heap_before = ALLOCATOR.live();
    let rss_before = rss_bytes();
    let start = Instant::now();
    // Taken while the store or limiter is still alive.
    let after = |keys_held: usize| Measured {
        keys_held,
        heap_bytes: ALLOCATOR.live().saturating_sub(heap_before),
        rss_bytes: rss_bytes().saturating_sub(rss_before),
        elapsed: start.elapsed(),
    };
    match case {
        Case::Tollgate(quota) => {
            let store = fill_tollgate(quota(), short_key);
            after(store.stats().keys)
        }
        Case::TollgateLongKeys(quota) => {
            let store = fill_tollgate(quota(), long_key);
            after(store.stats().keys)
        }
        Case::GovernorString => {
            let limiter = DefaultKeyedRateLimiter::<String>::keyed(governor_quota());
            for i in 0..KEYS {
                assert!(limiter.check_key(&short_key(i)).is_ok());
            }
            after(limiter.len())
        }
        Case::GovernorKey => {
            let limiter = DefaultKeyedRateLimiter::<Key>::keyed(governor_quota());
            for i in 0..KEYS {
                assert!(limiter.check_key(&Key::new(short_key(i))).is_ok());
            }
            after(limiter.len())
        }
    }
}

fn fill_tollgate(quota: Quota, key: fn(usize) -> String) -> MemoryStore {
    let store = MemoryStore::builder().max_keys(MAX_KEYS).build();
    let rule = RuleId::new("bench").expect("valid rule id");
    for i in 0..KEYS {
        let key = Key::new(key(i));
        let answer = store
            .check(&[Item::new(&rule, quota, &key)])
            .now_or_never()
            .expect("the in-memory store answers with a ready future")
            .expect("the in-memory store does not fail");
        assert!(answer.is_allowed(), "a fresh key's first check is allowed");
    }
    store
}

/// Runs `name` in a fresh copy of this binary and reads its report.
fn run_child(name: &str) -> Measured {
    let exe = std::env::current_exe().expect("the bench binary knows its path");
    let output = Command::new(exe)
        .args(["--case", name])
        .output()
        .expect("the bench binary can run itself");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "case {name} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .find_map(Measured::from_line)
        .expect("the child reports its figures")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(at) = args.iter().position(|arg| arg == "--case") {
        let name = args.get(at + 1).expect("--case takes a case name");
        let (_, case) = CASES
            .iter()
            .find(|(case_name, _)| case_name == name)
            .expect("a known case name");
        println!("{}", measure(*case).to_line());
        return;
    }
    // `cargo bench` passes `--bench`; anything else not starting with `--` filters cases.
    let filter = args.iter().find(|arg| !arg.starts_with("--"));

    println!("{KEYS} keys per case, one check each; bytes per key = growth / keys held");
    println!(
        "{:<24} {:>10} {:>12} {:>12} {:>12}",
        "case", "keys held", "heap B/key", "RSS B/key", "ns/insert"
    );
    for (name, _) in CASES {
        if filter.is_some_and(|filter| !name.contains(filter.as_str())) {
            continue;
        }
        let measured = run_child(name);
        let held = measured.keys_held.max(1);
        println!(
            "{:<24} {:>10} {:>12.1} {:>12.1} {:>12.0}",
            name,
            measured.keys_held,
            measured.heap_bytes as f64 / held as f64,
            measured.rss_bytes as f64 / held as f64,
            measured.elapsed.as_nanos() as f64 / KEYS as f64,
        );
    }
}
