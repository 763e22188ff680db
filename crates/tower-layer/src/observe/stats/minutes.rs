//! One counter per minute over the last hour, lock-free: each slot packs the minute it counts
//! with its count, so a slot left over from an earlier hour reads as zero and is restarted by
//! the first increment of its new minute — no sweeper, no lock, no count lost at a rollover.

use std::sync::atomic::{AtomicU64, Ordering};

/// Minutes kept: the last hour.
pub(crate) const MINUTES: usize = 60;

/// Bits of a slot holding the count (the rest hold the minute, modulo 2^24 — 31 years).
const COUNT_BITS: u32 = 40;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

/// Counts per minute for the last [`MINUTES`] minutes.
#[derive(Debug)]
pub(crate) struct MinuteCounts {
    slots: [AtomicU64; MINUTES],
}

impl Default for MinuteCounts {
    fn default() -> Self {
        MinuteCounts {
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The stamp stored for `minute` (minutes since the Unix epoch), shifted above the count; never
/// zero for a real minute, so a fresh slot (0) matches none.
fn stamp(minute: u64) -> u64 {
    ((minute % (1 << 24)) | 1 << 23) << COUNT_BITS
}

impl MinuteCounts {
    /// Adds one to `minute`'s count.
    pub(crate) fn add(&self, minute: u64) {
        let slot = &self.slots[slot_of(minute)];
        let stamp = stamp(minute);
        let _ = slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |packed| {
            Some(if packed & !COUNT_MASK == stamp {
                stamp | ((packed & COUNT_MASK) + 1).min(COUNT_MASK)
            } else {
                stamp | 1
            })
        });
    }

    /// `minute`'s count (zero when its slot holds another minute).
    pub(crate) fn get(&self, minute: u64) -> u64 {
        let packed = self.slots[slot_of(minute)].load(Ordering::Relaxed);
        if packed & !COUNT_MASK == stamp(minute) {
            packed & COUNT_MASK
        } else {
            0
        }
    }

    /// The counts of the `n` minutes up to and including `now`, oldest first (`n` at most
    /// [`MINUTES`]).
    pub(crate) fn last(&self, now: u64, n: usize) -> Vec<u64> {
        let n = n.min(MINUTES) as u64;
        (0..n)
            .rev()
            .map(|back| now.checked_sub(back).map_or(0, |minute| self.get(minute)))
            .collect()
    }
}

fn slot_of(minute: u64) -> usize {
    // The remainder is below MINUTES.
    usize::try_from(minute % MINUTES as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_minute_counts_apart_and_an_hour_old_slot_reads_as_zero() {
        let counts = MinuteCounts::default();
        counts.add(1_000);
        counts.add(1_000);
        counts.add(1_001);
        assert_eq!(counts.last(1_001, 3), [0, 2, 1]);
        // An hour later the same slot belongs to another minute.
        assert_eq!(counts.get(1_060), 0);
        counts.add(1_060);
        assert_eq!(counts.get(1_060), 1);
        assert_eq!(counts.get(1_000), 0);
    }

    #[test]
    fn many_threads_lose_no_count() {
        let counts = std::sync::Arc::new(MinuteCounts::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let counts = std::sync::Arc::clone(&counts);
                std::thread::spawn(move || (0..10_000).for_each(|_| counts.add(7)))
            })
            .collect();
        for thread in threads {
            thread.join().expect("counting thread");
        }
        assert_eq!(counts.get(7), 40_000);
    }
}
