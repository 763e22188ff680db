//! Where "now" comes from.
//!
//! Only the store's clock decides: a rule says *what* (algorithm and quota), the store says *when*.
//! Time is a [`Timestamp`], whole microseconds since the Unix epoch, so window boundaries are the
//! same in every store and all state stays in integers (Redis Lua numbers are doubles, exact up to
//! 2^53). Stores support times below 2^52 µs (the year 2112), so that a time plus the longest span
//! a quota allows (below 2^52 µs) stays below 2^53.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch.
///
/// Stores support times up to [`Timestamp::MAX_SUPPORTED`] (2^52 − 1 µs, in the year 2112): a
/// stored time is a time plus at most a quota's longest span (below 2^52 µs), which must stay
/// below 2^53, where Redis's doubles stop being exact and the in-memory store's 53 bits end.
/// Later times are not supported: a store whose clock reads one answers every check, peek and
/// refund with a [`StoreError`](crate::StoreError) that
/// [`is_time_out_of_range`](crate::StoreError::is_time_out_of_range) (the range named) and
/// changes nothing, and answers as before once its clock is back in range.
///
/// ```
/// use tollgate_core::Timestamp;
/// let t = Timestamp::from_micros(1_500_000);
/// assert_eq!(t.as_micros(), 1_500_000);
/// assert_eq!(t.saturating_add_micros(500_000), Timestamp::from_secs(2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The Unix epoch itself.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// The last time stores support: 2^52 − 1 µs, in the year 2112.
    pub const MAX_SUPPORTED: Timestamp = Timestamp((1 << 52) - 1);

    /// A timestamp `micros` microseconds after the Unix epoch.
    pub const fn from_micros(micros: u64) -> Self {
        Timestamp(micros)
    }

    /// A timestamp `secs` whole seconds after the Unix epoch (saturating).
    pub const fn from_secs(secs: u64) -> Self {
        Timestamp(secs.saturating_mul(1_000_000))
    }

    /// Microseconds since the Unix epoch.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// This timestamp moved `micros` later, saturating at the far future.
    pub const fn saturating_add_micros(self, micros: u64) -> Self {
        Timestamp(self.0.saturating_add(micros))
    }

    /// The time from `earlier` to `self`, or zero when `earlier` is not earlier.
    pub const fn micros_since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// A source of the current time for a store.
///
/// Implementations must be cheap: the in-memory store reads the clock once per check.
///
/// ```
/// use tollgate_core::{Clock, SystemClock};
/// let clock = SystemClock::new();
/// assert!(clock.now().as_micros() > 0);
/// ```
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }
}

/// The real clock: wall-clock time, read through a fast monotonic counter.
///
/// It takes the wall clock once when created and then advances with a monotonic counter (the
/// CPU's timestamp counter where available), so reading it costs a few nanoseconds and it never
/// steps backwards when the system clock is adjusted. Over very long runs it can drift from the
/// wall clock by as much as the system clock is corrected; windows stay epoch-aligned.
#[derive(Debug, Clone)]
pub struct SystemClock {
    counter: quanta::Clock,
    started_raw: u64,
    started_micros: u64,
}

impl SystemClock {
    /// A clock anchored at the current wall-clock time.
    pub fn new() -> Self {
        let counter = quanta::Clock::new();
        let started_raw = counter.raw();
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let started_micros = u64::try_from(since_epoch.as_micros()).unwrap_or(u64::MAX);
        SystemClock {
            counter,
            started_raw,
            started_micros,
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Timestamp {
        // Raw counter ticks scaled to nanoseconds: no `Instant` or `Duration` arithmetic here.
        let elapsed_nanos = self
            .counter
            .delta_as_nanos(self.started_raw, self.counter.raw());
        Timestamp(self.started_micros.saturating_add(elapsed_nanos / 1_000))
    }
}

/// Converts a duration to whole microseconds, rounding up and saturating.
pub(crate) fn micros_ceil(duration: Duration) -> u64 {
    let micros = duration.as_micros() + u128::from(!duration.subsec_nanos().is_multiple_of(1_000));
    u64::try_from(micros).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_near_the_wall_clock_and_never_steps_back() {
        let clock = SystemClock::new();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        let a = clock.now();
        let b = clock.now();
        assert!(b >= a);
        assert!(a.as_micros().abs_diff(wall) < 5_000_000);
    }

    #[test]
    fn micros_round_up() {
        assert_eq!(micros_ceil(Duration::from_nanos(1)), 1);
        assert_eq!(micros_ceil(Duration::from_nanos(1_000)), 1);
        assert_eq!(micros_ceil(Duration::from_nanos(1_001)), 2);
        assert_eq!(micros_ceil(Duration::MAX), u64::MAX);
    }
}
