//! What a [`FallbackStore`](super::FallbackStore) counts about its primary, for dashboards and
//! alerts.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts a [`FallbackStore`](crate::FallbackStore) keeps, read with
/// [`FallbackStore::stats`](crate::FallbackStore::stats). Every count only grows; all are zero
/// while the primary answers every call.
///
/// ```
/// use tollgate_core::MemoryStore;
/// use tollgate_wrappers::FallbackStore;
///
/// let store = FallbackStore::builder(MemoryStore::new()).build();
/// let stats = store.stats();
/// assert_eq!(stats.primary_failures, 0);
/// assert!(!stats.breaker_open);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct FallbackStats {
    /// Calls to the primary that failed, timeouts included.
    pub primary_failures: u64,
    /// Of [`primary_failures`](Self::primary_failures), the calls the primary did not answer
    /// within the timeout.
    pub timeouts: u64,
    /// Calls not sent to the primary because the circuit breaker was open.
    pub short_circuited: u64,
    /// Checks and peeks answered by the rules' store-failure policies instead of the primary
    /// (failed, timed out or skipped).
    pub fallback_checks: u64,
    /// Of [`fallback_checks`](Self::fallback_checks), those answered with the store error
    /// because an enforcing rule fails closed.
    pub failed_closed: u64,
    /// Refunds made in local memory because the primary could not take them.
    pub local_refunds: u64,
    /// Times the circuit breaker opened after too many failures in a row.
    pub breaker_opened: u64,
    /// Probes that failed, keeping the breaker open for another cool-down.
    pub failed_probes: u64,
    /// Times a probe succeeded and closed the breaker.
    pub breaker_closed: u64,
    /// Whether the breaker is open now (a probe in flight counts as open).
    pub breaker_open: bool,
}

/// The live counters behind [`FallbackStats`]. Touched only when something fails.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) primary_failures: Counter,
    pub(super) timeouts: Counter,
    pub(super) short_circuited: Counter,
    pub(super) fallback_checks: Counter,
    pub(super) failed_closed: Counter,
    pub(super) local_refunds: Counter,
    pub(super) breaker_opened: Counter,
    pub(super) failed_probes: Counter,
    pub(super) breaker_closed: Counter,
}

impl Counters {
    /// A snapshot, with the breaker's current state.
    pub(super) fn snapshot(&self, breaker_open: bool) -> FallbackStats {
        FallbackStats {
            primary_failures: self.primary_failures.get(),
            timeouts: self.timeouts.get(),
            short_circuited: self.short_circuited.get(),
            fallback_checks: self.fallback_checks.get(),
            failed_closed: self.failed_closed.get(),
            local_refunds: self.local_refunds.get(),
            breaker_opened: self.breaker_opened.get(),
            failed_probes: self.failed_probes.get(),
            breaker_closed: self.breaker_closed.get(),
            breaker_open,
        }
    }
}

/// One monotonic count.
#[derive(Debug, Default)]
pub(super) struct Counter(AtomicU64);

impl Counter {
    pub(super) fn add_one(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
