//! The circuit breaker: stop waiting on a primary store that keeps failing.
//!
//! Closed, it lets every call through and costs one atomic load. After `threshold` failures in a
//! row it opens: calls skip the primary (they go straight to the fallback, without waiting) until
//! the cool-down has passed on the store's clock. Then exactly one call is let through as a probe
//! (half-open); if it succeeds the breaker closes, if it fails the cool-down starts again.
//!
//! The whole state is two atomics. `open_until` is zero while closed, otherwise the store time
//! from which the next probe may go; claiming the probe moves `open_until` one cool-down later
//! with a compare-and-swap, so only one caller probes per cool-down, and a probe that is dropped
//! half-way (its request was cancelled) is simply followed by another one a cool-down later.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tollgate_core::store_kit::micros_ceil;
use tollgate_core::{Clock, Timestamp};

/// `open_until` while the breaker is closed.
const CLOSED: u64 = 0;

/// Whether a call may go to the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// Closed: call the primary.
    Call,
    /// Half-open: this call is the one probe of this cool-down.
    Probe,
    /// Open: do not call the primary.
    Skip,
}

/// The breaker's state as seen by a call that must not claim the probe (`*_now` calls, which
/// cannot wait for a probe's answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gate {
    /// Call the primary.
    Closed,
    /// Do not call the primary.
    Open,
    /// A probe is due: leave it to an awaited call.
    ProbeDue,
}

/// What an outcome changed, for logs and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Transition {
    /// Nothing worth telling.
    None,
    /// The first failure after a success.
    FirstFailure,
    /// A success after failures that did not open the breaker.
    Recovered,
    /// This failure opened the breaker.
    Opened,
    /// The probe failed; the breaker stays open for another cool-down.
    ProbeFailed,
    /// The probe succeeded; the breaker closed.
    Closed,
}

/// A circuit breaker over one primary store.
#[derive(Debug)]
pub(super) struct Breaker {
    threshold: u32,
    cool_down_micros: u64,
    /// Failures in a row; any success sets it back to zero.
    failures: AtomicU32,
    /// [`CLOSED`], or the store time (µs) from which the next probe may go.
    open_until: AtomicU64,
}

impl Breaker {
    /// A closed breaker that opens after `threshold` failures in a row (at least 1) and waits
    /// `cool_down` before each probe.
    pub(super) fn new(threshold: u32, cool_down: Duration) -> Self {
        Breaker {
            threshold: threshold.max(1),
            cool_down_micros: micros_ceil(cool_down),
            failures: AtomicU32::new(0),
            open_until: AtomicU64::new(CLOSED),
        }
    }

    /// Whether the breaker is open now (a probe in flight counts as open).
    pub(super) fn is_open(&self) -> bool {
        self.open_until.load(Ordering::Acquire) != CLOSED
    }

    /// Whether a call may go to the primary, claiming the probe when one is due. Reads the clock
    /// only while open.
    pub(super) fn admit(&self, clock: &impl Clock) -> Admission {
        let open_until = self.open_until.load(Ordering::Acquire);
        if open_until == CLOSED {
            return Admission::Call;
        }
        let now = clock.now();
        if self.waiting(open_until, now) {
            return Admission::Skip;
        }
        match self.open_until.compare_exchange(
            open_until,
            self.rearmed(now),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => Admission::Probe,
            // A probe succeeded meanwhile.
            Err(CLOSED) => Admission::Call,
            // Another caller claimed this probe.
            Err(_) => Admission::Skip,
        }
    }

    /// [`admit`](Self::admit) without claiming a probe.
    pub(super) fn gate(&self, clock: &impl Clock) -> Gate {
        let open_until = self.open_until.load(Ordering::Acquire);
        if open_until == CLOSED {
            Gate::Closed
        } else if self.waiting(open_until, clock.now()) {
            Gate::Open
        } else {
            Gate::ProbeDue
        }
    }

    /// Records a call that the primary answered.
    pub(super) fn succeeded(&self, admission: Admission) -> Transition {
        let failures = self.failures.load(Ordering::Relaxed);
        // Written only after failures, so the healthy path never dirties a shared cache line.
        if failures != 0 {
            self.failures.store(0, Ordering::Relaxed);
        }
        if admission == Admission::Probe && self.open_until.swap(CLOSED, Ordering::AcqRel) != CLOSED
        {
            return Transition::Closed;
        }
        if failures != 0 && !self.is_open() {
            Transition::Recovered
        } else {
            Transition::None
        }
    }

    /// Records a call that failed or timed out.
    pub(super) fn failed(&self, admission: Admission, clock: &impl Clock) -> Transition {
        match admission {
            Admission::Probe => {
                // The cool-down counts from the probe's failure, not from its start. A later
                // probe may have closed the breaker meanwhile (when the timeout is longer than
                // the cool-down): the primary answers again, so this stale failure opens nothing.
                let rearmed = self.rearmed(clock.now());
                let reopened = self.open_until.fetch_update(
                    Ordering::AcqRel,
                    Ordering::Acquire,
                    |open_until| (open_until != CLOSED).then_some(rearmed),
                );
                if reopened.is_ok() {
                    Transition::ProbeFailed
                } else {
                    Transition::None
                }
            }
            Admission::Call => {
                let failures = self
                    .failures
                    .fetch_add(1, Ordering::Relaxed)
                    .saturating_add(1);
                if failures >= self.threshold
                    && self
                        .open_until
                        .compare_exchange(
                            CLOSED,
                            self.rearmed(clock.now()),
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        )
                        .is_ok()
                {
                    Transition::Opened
                } else if failures == 1 {
                    Transition::FirstFailure
                } else {
                    Transition::None
                }
            }
            Admission::Skip => Transition::None,
        }
    }

    /// Failures in a row so far.
    pub(super) fn failures(&self) -> u32 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Whether an open breaker is still cooling down at `now`. A clock that stepped back more
    /// than a cool-down does not keep the breaker open for longer.
    fn waiting(&self, open_until: u64, now: Timestamp) -> bool {
        let now = now.as_micros();
        now < open_until && open_until - now <= self.cool_down_micros
    }

    /// `open_until` for a cool-down starting at `now` (never [`CLOSED`]).
    fn rearmed(&self, now: Timestamp) -> u64 {
        now.saturating_add_micros(self.cool_down_micros)
            .as_micros()
            .max(CLOSED + 1)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    #[derive(Default)]
    struct Fake(AtomicU64);

    impl Fake {
        fn advance(&self, by: Duration) {
            self.0.fetch_add(micros_ceil(by), Ordering::SeqCst);
        }
    }

    impl Clock for Fake {
        fn now(&self) -> Timestamp {
            Timestamp::from_micros(self.0.load(Ordering::SeqCst))
        }
    }

    fn breaker() -> Breaker {
        Breaker::new(3, Duration::from_secs(1))
    }

    #[test]
    fn opens_after_threshold_failures_in_a_row() {
        let (breaker, clock) = (breaker(), Fake::default());
        assert_eq!(
            breaker.failed(Admission::Call, &clock),
            Transition::FirstFailure
        );
        assert_eq!(breaker.failed(Admission::Call, &clock), Transition::None);
        assert!(!breaker.is_open());
        assert_eq!(breaker.failed(Admission::Call, &clock), Transition::Opened);
        assert!(breaker.is_open());
        assert_eq!(breaker.admit(&clock), Admission::Skip);
        assert_eq!(breaker.gate(&clock), Gate::Open);
        // A late failure of a call admitted before it opened opens nothing twice.
        assert_eq!(breaker.failed(Admission::Call, &clock), Transition::None);
    }

    #[test]
    fn a_success_resets_the_count() {
        let (breaker, clock) = (breaker(), Fake::default());
        breaker.failed(Admission::Call, &clock);
        breaker.failed(Admission::Call, &clock);
        assert_eq!(breaker.succeeded(Admission::Call), Transition::Recovered);
        assert_eq!(breaker.failures(), 0);
        breaker.failed(Admission::Call, &clock);
        breaker.failed(Admission::Call, &clock);
        assert!(!breaker.is_open(), "two in a row again, not four");
        assert_eq!(breaker.succeeded(Admission::Call), Transition::Recovered);
        assert_eq!(breaker.succeeded(Admission::Call), Transition::None);
    }

    #[test]
    fn a_stale_probe_failing_after_a_newer_probe_succeeded_leaves_the_breaker_closed() {
        let (breaker, clock) = (breaker(), Fake::default());
        for _ in 0..3 {
            breaker.failed(Admission::Call, &clock);
        }
        clock.advance(Duration::from_secs(1));
        assert_eq!(breaker.admit(&clock), Admission::Probe, "the first probe");
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            breaker.admit(&clock),
            Admission::Probe,
            "a second, a cool-down later"
        );
        assert_eq!(breaker.succeeded(Admission::Probe), Transition::Closed);
        assert_eq!(breaker.failed(Admission::Probe, &clock), Transition::None);
        assert!(!breaker.is_open());
    }

    #[test]
    fn one_probe_per_cool_down_and_success_closes() {
        let (breaker, clock) = (breaker(), Fake::default());
        for _ in 0..3 {
            breaker.failed(Admission::Call, &clock);
        }
        clock.advance(Duration::from_millis(999));
        assert_eq!(breaker.admit(&clock), Admission::Skip);
        clock.advance(Duration::from_millis(1));
        assert_eq!(breaker.gate(&clock), Gate::ProbeDue);
        assert_eq!(breaker.admit(&clock), Admission::Probe);
        assert_eq!(
            breaker.admit(&clock),
            Admission::Skip,
            "one probe at a time"
        );
        assert_eq!(breaker.succeeded(Admission::Probe), Transition::Closed);
        assert!(!breaker.is_open());
        assert_eq!(breaker.admit(&clock), Admission::Call);
        assert_eq!(breaker.failures(), 0);
    }

    #[test]
    fn a_failed_probe_reopens_for_a_full_cool_down() {
        let (breaker, clock) = (breaker(), Fake::default());
        for _ in 0..3 {
            breaker.failed(Admission::Call, &clock);
        }
        clock.advance(Duration::from_secs(1));
        assert_eq!(breaker.admit(&clock), Admission::Probe);
        clock.advance(Duration::from_millis(5));
        assert_eq!(
            breaker.failed(Admission::Probe, &clock),
            Transition::ProbeFailed
        );
        clock.advance(Duration::from_millis(999));
        assert_eq!(breaker.admit(&clock), Admission::Skip);
        clock.advance(Duration::from_millis(1));
        assert_eq!(breaker.admit(&clock), Admission::Probe);
    }

    #[test]
    fn a_dropped_probe_is_retried_a_cool_down_later() {
        let (breaker, clock) = (breaker(), Fake::default());
        for _ in 0..3 {
            breaker.failed(Admission::Call, &clock);
        }
        clock.advance(Duration::from_secs(1));
        assert_eq!(breaker.admit(&clock), Admission::Probe);
        // The probe's request is cancelled: no outcome is ever recorded.
        clock.advance(Duration::from_secs(1));
        assert_eq!(breaker.admit(&clock), Admission::Probe);
    }

    #[test]
    fn a_clock_stepping_far_back_does_not_hold_it_open() {
        let (breaker, clock) = (breaker(), Fake::default());
        clock.advance(Duration::from_secs(100));
        for _ in 0..3 {
            breaker.failed(Admission::Call, &clock);
        }
        clock.0.store(0, Ordering::SeqCst);
        assert_eq!(breaker.admit(&clock), Admission::Probe);
    }

    #[test]
    fn opens_at_the_epoch_too() {
        let breaker = Breaker::new(1, Duration::ZERO);
        let clock = Fake::default();
        assert_eq!(breaker.failed(Admission::Call, &clock), Transition::Opened);
        assert!(breaker.is_open());
    }
}
