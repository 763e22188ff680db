//! Concurrency holds: the id each one is stored under.

use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Ids stay below 2^53, where the script's numbers are exact.
const ID_MASK: u64 = (1 << 53) - 1;

/// A new hold id: a per-process counter through a randomly keyed hash, cut to 53 bits, so ids
/// collide (within one gateway or across a fleet sharing a Redis) about as often as random
/// 53-bit numbers: with 10,000 holds in flight for one caller, about once in 10^8 fleets.
pub(crate) fn fresh_hold_id() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    let keys = KEYS.get_or_init(RandomState::new);
    (keys.hash_one(COUNTER.fetch_add(1, Ordering::Relaxed)) & ID_MASK).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_nonzero_and_exact_in_a_double() {
        let ids: std::collections::HashSet<u64> = (0..10_000).map(|_| fresh_hold_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|&id| id > 0 && id < 1 << 53));
    }
}
