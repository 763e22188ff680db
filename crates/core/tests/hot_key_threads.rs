//! Many threads on one hot key of the in-memory store, on the real clock: the store never
//! admits more than the quota allows over the time the checks took.
//!
//! A check that waited for its shard's lock once carried a "now" older than the time another
//! thread had charged the key at; the store read it as a clock that stepped back and capped the
//! backlog, handing the delay back as tokens (16 threads admitted 1,804 where a bucket of 200
//! refilled 200 a second allows 400). The bound below uses the measured time only as the
//! length of the run: what the quota allows in it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store};

const THREADS: usize = 16;
const RUN: Duration = Duration::from_millis(500);

/// `THREADS` threads check `quota` on one key until the run ends: the admitted count and the
/// run's length in seconds (from the first check to the last answer).
fn flood(quota: Quota) -> (u64, f64) {
    let store = MemoryStore::new();
    let admitted = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (store, admitted) = (store.clone(), Arc::clone(&admitted));
            std::thread::spawn(move || {
                let rule = RuleId::new("hot").expect("valid");
                let key = Key::new("one caller");
                let item = Item::new(&rule, quota, &key);
                while started.elapsed() < RUN {
                    let answer = store.check_now(&[item]).expect("memory answers now");
                    if answer.expect("memory never fails").is_allowed() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Instant::now()
            })
        })
        .collect();
    let last = threads
        .into_iter()
        .map(|thread| thread.join().expect("a checking thread does not panic"))
        .max()
        .unwrap_or(started);
    (
        admitted.load(Ordering::Relaxed),
        last.duration_since(started).as_secs_f64(),
    )
}

#[test]
fn a_token_bucket_never_admits_more_than_its_capacity_and_refill() {
    let quota = Quota::token_bucket(200, Rate::per_second(200)).expect("valid");
    let (admitted, seconds) = flood(quota);
    let allowed = 200 + (200.0 * seconds).ceil() as u64;
    assert!(
        admitted <= allowed,
        "{admitted} admitted where the bucket allows {allowed} in {seconds:.3} s"
    );
    assert!(admitted >= 200, "the full bucket was admitted: {admitted}");
}

#[test]
fn a_fixed_window_never_admits_more_than_its_limit_per_window() {
    let quota = Quota::fixed_window(200, Duration::from_secs(1)).expect("valid");
    let (admitted, seconds) = flood(quota);
    // The run is shorter than a window, so it touches at most two.
    assert!(
        admitted <= 400,
        "{admitted} admitted in {seconds:.3} s: at most two windows of 200"
    );
}
