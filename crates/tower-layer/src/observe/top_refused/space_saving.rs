//! The Space-Saving heavy-hitters sketch (Metwally, Agrawal, El Abbadi, 2005): at most `k`
//! counters, whatever the number of distinct keys.
//!
//! A key already counted is incremented. A new key takes a free counter, or — when all `k` are
//! taken — the counter with the smallest count, starting from that count plus one and
//! remembering it as its possible overestimate. After `n` samples, every estimate is at least the
//! key's true count and at most `n / k` above it, and every key whose true count exceeds `n / k`
//! holds a counter. Updates cost O(log k): counts are kept ordered.

use std::collections::{BTreeSet, HashMap};

use tollgate_core::Key;

/// One key's estimate: `count` is at most `error` above its true count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Estimate {
    pub(crate) count: u64,
    pub(crate) error: u64,
}

/// A Space-Saving summary of at most `k` keys.
#[derive(Debug, Clone)]
pub(crate) struct SpaceSaving {
    k: usize,
    /// Each counted key's estimate and its position in `order`.
    counts: HashMap<Key, (Estimate, u64)>,
    /// (count, tie-breaker): the smallest first, so eviction takes the first.
    order: BTreeSet<(u64, u64, Key)>,
    next_tie: u64,
    samples: u64,
}

impl SpaceSaving {
    pub(crate) fn new(k: usize) -> SpaceSaving {
        SpaceSaving {
            k: k.max(1),
            // Grown as keys arrive: a quiet slice of a large k costs little.
            counts: HashMap::new(),
            order: BTreeSet::new(),
            next_tie: 0,
            samples: 0,
        }
    }

    /// Counts one sample of `key`.
    pub(crate) fn add(&mut self, key: &Key) {
        self.samples += 1;
        let tie = self.next_tie;
        self.next_tie += 1;
        if let Some((estimate, old_tie)) = self.counts.get_mut(key) {
            self.order.remove(&(estimate.count, *old_tie, key.clone()));
            estimate.count += 1;
            *old_tie = tie;
            self.order.insert((estimate.count, tie, key.clone()));
            return;
        }
        let estimate = if self.counts.len() < self.k {
            Estimate { count: 1, error: 0 }
        } else {
            let Some((smallest, _, evicted)) = self.order.pop_first() else {
                return;
            };
            self.counts.remove(&evicted);
            Estimate {
                count: smallest + 1,
                error: smallest,
            }
        };
        self.counts.insert(key.clone(), (estimate, tie));
        self.order.insert((estimate.count, tie, key.clone()));
    }

    /// The samples counted.
    pub(crate) fn samples(&self) -> u64 {
        self.samples
    }

    /// The smallest count held when all `k` counters are taken (what a key without one may
    /// have), else 0.
    pub(crate) fn floor(&self) -> u64 {
        if self.counts.len() < self.k {
            return 0;
        }
        self.order.first().map_or(0, |(count, _, _)| *count)
    }

    /// Every counted key and its estimate.
    pub(crate) fn estimates(&self) -> impl Iterator<Item = (&Key, Estimate)> {
        self.counts
            .iter()
            .map(|(key, (estimate, _))| (key, *estimate))
    }

    /// Whether `key` holds a counter.
    pub(crate) fn holds(&self, key: &Key) -> bool {
        self.counts.contains_key(key)
    }

    /// How many keys hold a counter (at most `k`).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.counts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_below_k_are_counted_exactly_and_a_new_key_takes_the_smallest_counter() {
        let mut sketch = SpaceSaving::new(2);
        for key in ["a", "a", "a", "b"] {
            sketch.add(&Key::new(key));
        }
        assert_eq!(sketch.floor(), 1);
        sketch.add(&Key::new("c"));
        let estimates: HashMap<Key, Estimate> = sketch
            .estimates()
            .map(|(key, estimate)| (key.clone(), estimate))
            .collect();
        assert_eq!(estimates.len(), 2);
        assert_eq!(estimates[&Key::new("a")], Estimate { count: 3, error: 0 });
        assert_eq!(estimates[&Key::new("c")], Estimate { count: 2, error: 1 });
        assert_eq!(sketch.samples(), 5);
    }
}
