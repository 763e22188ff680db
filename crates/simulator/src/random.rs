//! All randomness, from one seed: the same seed gives the same traffic, visit for visit.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A seeded random source (ChaCha8: the same stream on every platform and version).
pub(crate) struct Random(ChaCha8Rng);

impl Random {
    /// The stream for `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Random(ChaCha8Rng::seed_from_u64(seed))
    }

    /// A number in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0.random_range(0..n.max(1))
    }

    /// A number in `low..=high`.
    pub(crate) fn between(&mut self, low: u64, high: u64) -> u64 {
        self.0.random_range(low..=high.max(low))
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.0.random::<f64>() < p
    }

    /// The gap, in microseconds, to the next arrival of a Poisson stream of `per_second`
    /// arrivals a second (exponentially distributed; at least 1 µs).
    pub(crate) fn gap_micros(&mut self, per_second: f64) -> u64 {
        let uniform: f64 = self.0.random::<f64>();
        // 1 - u is in (0, 1]: its logarithm is finite.
        let seconds = -(1.0 - uniform).ln() / per_second;
        ((seconds * 1e6) as u64).max(1)
    }
}
