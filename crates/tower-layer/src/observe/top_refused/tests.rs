//! The sketch's stated bounds on a seeded Zipf stream.

use std::collections::HashMap;

use tollgate_core::Key;

use super::window::{SLICE, SLICES, Window};

/// A small seeded generator (xorshift64*), so the stream is the same on every run.
struct Seeded(u64);

impl Seeded {
    fn next_unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
        bits as f64 / (1u64 << 53) as f64
    }
}

/// `n` draws from Zipf(s = 1) over `callers` callers (rank r has weight 1/r).
fn zipf(n: usize, callers: usize, seed: u64) -> Vec<u32> {
    let mut cumulative = Vec::with_capacity(callers);
    let mut total = 0.0;
    for rank in 1..=callers {
        total += 1.0 / rank as f64;
        cumulative.push(total);
    }
    let mut rng = Seeded(seed);
    (0..n)
        .map(|_| {
            let target = rng.next_unit() * total;
            cumulative.partition_point(|&weight| weight < target) as u32
        })
        .collect()
}

#[test]
fn a_zipf_stream_is_summarised_within_n_over_k_and_every_heavy_caller_is_listed() {
    const N: usize = 1_000_000;
    const CALLERS: usize = 100_000;
    const K: usize = 100;
    let stream = zipf(N, CALLERS, 0x5eed);
    let mut exact: HashMap<u32, u64> = HashMap::new();
    let mut window = Window::new(K);
    let now = 1_700_000_000_000_000; // every refusal in one five-minute slice
    for caller in &stream {
        *exact.entry(*caller).or_default() += 1;
        window.add(&Key::new(caller.to_le_bytes()), now);
    }
    let bound = (N / K) as u64;
    let merged = window.top(K, now);
    assert_eq!(merged.samples, N as u64);
    for (key, estimate) in &merged.top {
        let caller = u32::from_le_bytes(key.as_bytes()[1..5].try_into().expect("4 bytes"));
        let truth = exact.get(&caller).copied().unwrap_or_default();
        assert!(
            estimate.count >= truth,
            "never under: {caller} {estimate:?} {truth}"
        );
        assert!(
            estimate.count - truth <= bound,
            "within N/k: {caller} {estimate:?} {truth}"
        );
        assert!(estimate.error <= bound);
    }
    let listed: Vec<u32> = merged
        .top
        .iter()
        .map(|(key, _)| u32::from_le_bytes(key.as_bytes()[1..5].try_into().expect("4 bytes")))
        .collect();
    let heavy: Vec<u32> = exact
        .iter()
        .filter(|(_, count)| **count > bound)
        .map(|(caller, _)| *caller)
        .collect();
    assert!(!heavy.is_empty(), "the stream has heavy callers");
    for caller in &heavy {
        assert!(
            listed.contains(caller),
            "heavy caller {caller} ({}) listed",
            exact[caller]
        );
    }
    assert!(
        window.held() <= K,
        "fixed memory: {} counters",
        window.held()
    );
}

#[test]
fn the_window_forgets_slices_older_than_an_hour_and_bounds_its_memory() {
    let mut window = Window::new(10);
    let slice = SLICE.as_micros() as u64;
    let start = 1_700_000_000_000_000 / slice * slice;
    for minute in 0..(SLICES as u64 * 2) {
        for caller in 0..50u32 {
            window.add(&Key::new(caller.to_le_bytes()), start + minute * slice);
        }
    }
    assert!(window.held() <= 10 * SLICES, "k counters per slice at most");
    let now = start + (SLICES as u64 * 2 - 1) * slice;
    assert_eq!(
        window.top(5, now).samples,
        50 * SLICES as u64,
        "only the last hour"
    );
    let later = now + SLICES as u64 * slice;
    assert_eq!(
        window.top(5, later).samples,
        0,
        "an hour of quiet forgets everything"
    );
}

#[test]
fn a_caller_evicted_from_one_slice_is_never_under_counted_over_the_hour() {
    let slice = SLICE.as_micros() as u64;
    let start = 1_700_000_000_000_000 / slice * slice;
    let (a, b) = (Key::new("a"), Key::new("b"));
    let mut window = Window::new(1);
    window.add(&a, start);
    window.add(&b, start + 1);
    window.add(&b, start + 2); // a is evicted from the first slice
    for i in 0..3 {
        window.add(&a, start + slice + i);
    }
    let merged = window.top(2, start + slice + 10);
    let (_, estimate) = merged
        .top
        .iter()
        .find(|(key, _)| *key == a)
        .expect("a is listed");
    assert!(estimate.count >= 4, "a was refused 4 times: {estimate:?}");
    assert!(estimate.count - estimate.error <= 4);
}
