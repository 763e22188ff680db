//! How long to wait before a retry: the server's value plus a bounded jitter, or, with no hint
//! from the server, capped exponential backoff with full jitter.

use std::time::Duration;

/// The jitter added to a server's wait: `server + U(0, min(ratio × server, max))`, so a crowd of
/// clients told the same instant does not come back in the same millisecond, and no client ever
/// comes back before the server said.
///
/// Defaults: 10 % of the server's wait, at most 1 s. A `Retry-After: 30` becomes a wait between
/// 30 and 31 s; a `Retry-After: 2` one between 2 and 2.2 s.
///
/// ```
/// use std::time::Duration;
/// use tollgate_client::Jitter;
///
/// let jitter = Jitter::default();
/// let wait = jitter.apply(Duration::from_secs(30), 0.5);
/// assert_eq!(wait, Duration::from_millis(30_500));
/// assert_eq!(jitter.bound(Duration::from_secs(2)), Duration::from_millis(200));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Jitter {
    ratio: f64,
    max: Duration,
}

impl Default for Jitter {
    fn default() -> Self {
        Jitter {
            ratio: 0.1,
            max: Duration::from_secs(1),
        }
    }
}

impl Jitter {
    /// No jitter: exactly the server's wait.
    pub const NONE: Jitter = Jitter {
        ratio: 0.0,
        max: Duration::ZERO,
    };

    /// Up to `ratio` of the server's wait (clamped to 0..=1), and never more than `max`.
    pub fn new(ratio: f64, max: Duration) -> Self {
        let ratio = if ratio.is_finite() {
            ratio.clamp(0.0, 1.0)
        } else {
            0.0
        };
        Jitter { ratio, max }
    }

    /// The most jitter added to a wait of `server`: `min(ratio × server, max)`.
    pub fn bound(&self, server: Duration) -> Duration {
        scaled(server, self.ratio).min(self.max)
    }

    /// `server` plus the share `unit` (in `0..1`, clamped) of the jitter's bound: never less
    /// than `server`, never more than `server + bound(server)`.
    pub fn apply(&self, server: Duration, unit: f64) -> Duration {
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 1.0)
        } else {
            0.0
        };
        server.saturating_add(scaled(self.bound(server), unit))
    }
}

/// `duration × factor` (factor in `0..=1`), never above `duration`: `Duration::mul_f64` can
/// round a product past what a `Duration` holds and panic.
fn scaled(duration: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(duration.as_secs_f64() * factor)
        .map_or(duration, |product| product.min(duration))
}

/// The wait when the server gave no hint: capped exponential backoff with full jitter,
/// `U(0, min(max, base × 2^retry))` for the `retry`-th retry (0 for the first).
///
/// Defaults: a base of 100 ms, at most 10 s.
///
/// ```
/// use std::time::Duration;
/// use tollgate_client::Backoff;
///
/// let backoff = Backoff::default();
/// assert_eq!(backoff.ceiling(0), Duration::from_millis(100));
/// assert_eq!(backoff.ceiling(3), Duration::from_millis(800));
/// assert_eq!(backoff.ceiling(40), Duration::from_secs(10));
/// assert_eq!(backoff.wait(3, 0.5), Duration::from_millis(400));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// Starting at `base`, doubling, never above `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff { base, max }
    }

    /// The ceiling for the `retry`-th retry: `min(max, base × 2^retry)`.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let factor = 1_u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The share `unit` (in `0..1`, clamped) of the ceiling: full jitter.
    pub fn wait(&self, retry: u32, unit: f64) -> Duration {
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 1.0)
        } else {
            0.0
        };
        scaled(self.ceiling(retry), unit)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The jitter never shortens the server's wait and never passes its bound.
        #[test]
        fn jitter_stays_between_the_server_and_its_bound(
            server_ms in 0_u64..u64::MAX,
            ratio in -1.0_f64..3.0,
            max_ms in 0_u64..u64::MAX,
            unit in -1.0_f64..2.0,
        ) {
            let jitter = Jitter::new(ratio, Duration::from_millis(max_ms));
            let server = Duration::from_millis(server_ms);
            let wait = jitter.apply(server, unit);
            prop_assert!(wait >= server);
            prop_assert!(wait - server <= jitter.bound(server));
            prop_assert!(jitter.bound(server) <= Duration::from_millis(max_ms));
            prop_assert!(jitter.bound(server) <= server);
        }

        /// Backoff never passes its cap, and never its retry's ceiling.
        #[test]
        fn backoff_stays_under_its_ceiling(
            retry in 0_u32..100,
            unit in -1.0_f64..2.0,
            base_s in 0_u64..u64::MAX,
            max_s in 0_u64..u64::MAX,
        ) {
            let backoff = Backoff::new(Duration::from_secs(base_s), Duration::from_secs(max_s));
            let wait = backoff.wait(retry, unit);
            prop_assert!(wait <= backoff.ceiling(retry));
            prop_assert!(wait <= Duration::from_secs(max_s));
        }
    }

    #[test]
    fn non_finite_shares_add_nothing() {
        let jitter = Jitter::default();
        let server = Duration::from_secs(3);
        assert_eq!(jitter.apply(server, f64::NAN), server);
        assert_eq!(
            Jitter::new(f64::NAN, Duration::from_secs(1)).bound(server),
            Duration::ZERO
        );
        assert_eq!(Backoff::default().wait(2, f64::INFINITY), Duration::ZERO);
    }
}
