//! How often: a count over a period, written so it cannot be misread.

use std::fmt;
use std::time::Duration;

use crate::clock::micros_ceil;

const MICROS_PER_SECOND: u64 = 1_000_000;

/// `count` events per `period`: `Rate::per_second(10)` means ten a second.
///
/// A `Rate` is only a description; it is checked when it becomes part of a [`Quota`](crate::Quota),
/// which refuses a zero count, a zero or absurd period, and rates faster than one event per
/// microsecond, naming the bad value.
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::Rate;
///
/// assert_eq!(Rate::per_second(10).emission_interval(), Some(Duration::from_millis(100)));
/// assert_eq!(Rate::per_minute(10).emission_interval(), Some(Duration::from_secs(6)));
/// assert_eq!(Rate::every(Duration::from_secs(6)), Rate::per_minute(10).per_token());
/// assert_eq!(Rate::per_day(400).to_string(), "400 per 86400s");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    count: u64,
    period_micros: u64,
}

impl Rate {
    /// `count` per second.
    pub const fn per_second(count: u64) -> Rate {
        Rate::per_micros(count, MICROS_PER_SECOND)
    }

    /// `count` per minute.
    pub const fn per_minute(count: u64) -> Rate {
        Rate::per_micros(count, 60 * MICROS_PER_SECOND)
    }

    /// `count` per hour.
    pub const fn per_hour(count: u64) -> Rate {
        Rate::per_micros(count, 3_600 * MICROS_PER_SECOND)
    }

    /// `count` per day (86,400 seconds).
    pub const fn per_day(count: u64) -> Rate {
        Rate::per_micros(count, 86_400 * MICROS_PER_SECOND)
    }

    /// `count` per any `period` (rounded up to whole microseconds).
    pub fn per(count: u64, period: Duration) -> Rate {
        Rate::per_micros(count, micros_ceil(period))
    }

    /// One per `period`: "one token back every 6 s" is `Rate::every(Duration::from_secs(6))`.
    pub fn every(period: Duration) -> Rate {
        Rate::per(1, period)
    }

    const fn per_micros(count: u64, period_micros: u64) -> Rate {
        Rate {
            count,
            period_micros,
        }
    }

    /// How many events per period.
    pub const fn count(&self) -> u64 {
        self.count
    }

    /// The period the count is over.
    pub const fn period(&self) -> Duration {
        Duration::from_micros(self.period_micros)
    }

    pub(crate) const fn period_micros(&self) -> u64 {
        self.period_micros
    }

    /// The same rate as one event per emission interval (used to compare rates).
    pub fn per_token(&self) -> Rate {
        match self.emission_interval_micros() {
            Some(interval) => Rate::per_micros(1, interval),
            None => *self,
        }
    }

    /// The time one event "costs" at this rate, rounded **up** to a whole microsecond so the
    /// limiter is never more generous than the rate it was given (3 per second becomes one per
    /// 333,334 µs). `None` when the count is zero.
    pub fn emission_interval(&self) -> Option<Duration> {
        self.emission_interval_micros().map(Duration::from_micros)
    }

    pub(crate) const fn emission_interval_micros(&self) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        Some(self.period_micros.div_ceil(self.count))
    }
}

impl fmt::Debug for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let period = self.period_micros;
        if period.is_multiple_of(MICROS_PER_SECOND) {
            write!(f, "{} per {}s", self.count, period / MICROS_PER_SECOND)
        } else {
            write!(f, "{} per {}µs", self.count, period)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_constructors_mean_what_they_say() {
        assert_eq!(Rate::per_second(10).count(), 10);
        assert_eq!(Rate::per_second(10).period(), Duration::from_secs(1));
        assert_eq!(Rate::per_minute(2).period(), Duration::from_secs(60));
        assert_eq!(Rate::per_hour(30).period(), Duration::from_secs(3600));
        assert_eq!(Rate::per_day(400).period(), Duration::from_secs(86_400));
        assert_eq!(
            Rate::per(5, Duration::from_millis(1500)).period(),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn emission_interval_rounds_up() {
        assert_eq!(
            Rate::per_second(3).emission_interval(),
            Some(Duration::from_micros(333_334))
        );
        assert_eq!(Rate::per_second(0).emission_interval(), None);
    }
}
