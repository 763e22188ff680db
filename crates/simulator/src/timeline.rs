//! Traffic as a merge of sources, each producing its visits in time order, generated as the
//! simulation reaches them (an hour of a 5,000-a-second loop is never held in memory).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::random::Random;
use crate::visit::Visit;

/// A stream of visits in non-decreasing time order.
pub(crate) trait Source {
    /// The next visit, or `None` when this source is done.
    fn next(&mut self, random: &mut Random) -> Option<Visit>;
}

/// Every source's visits, merged in time order (ties in the order the sources were added), all
/// randomness from one seeded stream.
pub struct Timeline {
    sources: Vec<Box<dyn Source>>,
    pending: Vec<Option<Visit>>,
    /// (time, source index) of each source's pending visit.
    queue: BinaryHeap<Reverse<(u64, usize)>>,
    random: Random,
}

impl Timeline {
    /// The merge of `sources`, drawing on the stream of `seed`.
    pub(crate) fn new(sources: Vec<Box<dyn Source>>, seed: u64) -> Self {
        let mut timeline = Timeline {
            pending: sources.iter().map(|_| None).collect(),
            sources,
            queue: BinaryHeap::new(),
            random: Random::new(seed),
        };
        for index in 0..timeline.sources.len() {
            timeline.refill(index);
        }
        timeline
    }

    fn refill(&mut self, index: usize) {
        if let Some(visit) = self.sources[index].next(&mut self.random) {
            self.queue.push(Reverse((visit.at, index)));
            self.pending[index] = Some(visit);
        }
    }
}

impl Iterator for Timeline {
    type Item = Visit;

    fn next(&mut self) -> Option<Visit> {
        let Reverse((_, index)) = self.queue.pop()?;
        let visit = self.pending[index].take();
        self.refill(index);
        visit
    }
}

/// Arrivals at a steady average rate (a Poisson stream) from `start` to `end` (µs), each visit
/// made by `make` from the random stream and its time. Time is in whole microseconds, so no
/// stream is faster than a million a second; a rate that is not a positive finite number sends
/// nothing.
pub(crate) struct Poisson<F> {
    per_second: f64,
    at: u64,
    end: u64,
    make: F,
}

impl<F: FnMut(&mut Random, u64) -> Visit> Poisson<F> {
    /// `per_second` arrivals a second on average between `start` and `end`.
    pub(crate) fn new(per_second: f64, start: u64, end: u64, make: F) -> Self {
        Poisson {
            per_second,
            at: start,
            end,
            make,
        }
    }
}

impl<F: FnMut(&mut Random, u64) -> Visit> Source for Poisson<F> {
    fn next(&mut self, random: &mut Random) -> Option<Visit> {
        if !(self.per_second.is_finite() && self.per_second > 0.0) {
            return None;
        }
        self.at = self.at.saturating_add(random.gap_micros(self.per_second));
        (self.at < self.end).then(|| (self.make)(random, self.at))
    }
}
