//! What a fleet store has done: its counters, read as [`FleetStats`] and published as metrics.

use std::sync::atomic::Ordering;

use super::store::FleetStore;
use tollgate_core::{Clock, Store};

/// What a [`FleetStore`] has done since it was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct FleetStats {
    /// Leased or synced checks decided on this gateway without a store call.
    pub decided_locally: u64,
    /// Calls to the shared store for leased or synced rules: leases taken, top-ups, pushes and
    /// give-backs.
    pub store_calls: u64,
    /// Leases whose unspent units went back to the shared store.
    pub receipts_given_back: u64,
    /// Pushes the shared store did not take (their spend stays, to push again).
    pub failed_pushes: u64,
    /// Units spent here and not yet pushed to the shared count.
    pub unsynced_units: u64,
    /// Keys this gateway holds a lease entry for (at most 65,536: past that, leases not in use
    /// end and their units go back).
    pub leased_keys: usize,
    /// Keys this gateway keeps a local copy for (past 65,536, keys with nothing unsynced are
    /// forgotten).
    pub synced_keys: usize,
    /// Synced rules counted exactly now, their fleet too large for their limit
    /// ([`FleetStore::counted_exactly`]).
    pub rules_counted_exactly: usize,
}

impl<S: Store, C: Clock + Clone> FleetStore<S, C> {
    /// What this store has done.
    pub fn stats(&self) -> FleetStats {
        let counters = &self.inner.counters;
        FleetStats {
            decided_locally: counters
                .decided_locally
                .load(Ordering::Relaxed)
                .saturating_add(self.inner.leases.decided_here()),
            store_calls: counters.store_calls.load(Ordering::Relaxed),
            receipts_given_back: counters.receipts_given_back.load(Ordering::Relaxed),
            failed_pushes: counters.failed_pushes.load(Ordering::Relaxed),
            unsynced_units: self.inner.syncs.unsynced(),
            leased_keys: self.inner.leases.len(),
            synced_keys: self.inner.syncs.len(),
            rules_counted_exactly: self
                .inner
                .syncs
                .counted_exactly(self.inner.clock.now())
                .len(),
        }
    }

    /// Records [`stats`](Self::stats) through the `metrics` facade (names in
    /// [`tollgate_core::metrics`]); the ticker does it every tick.
    ///
    /// ```
    /// let store = tollgate_wrappers::FleetStore::new(tollgate_core::MemoryStore::new());
    /// store.publish_metrics(); // with no recorder installed, a no-op
    /// ```
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        use tollgate_core::metrics::{
            FLEET_DECIDED_LOCALLY, FLEET_FAILED_PUSHES, FLEET_LEASES_RETURNED,
            FLEET_RULES_COUNTED_EXACTLY, FLEET_STORE_CALLS, FLEET_UNSYNCED_UNITS,
        };
        let stats = self.stats();
        metrics::counter!(FLEET_DECIDED_LOCALLY).absolute(stats.decided_locally);
        metrics::counter!(FLEET_STORE_CALLS).absolute(stats.store_calls);
        metrics::counter!(FLEET_LEASES_RETURNED).absolute(stats.receipts_given_back);
        metrics::counter!(FLEET_FAILED_PUSHES).absolute(stats.failed_pushes);
        metrics::gauge!(FLEET_UNSYNCED_UNITS).set(stats.unsynced_units as f64);
        metrics::gauge!(FLEET_RULES_COUNTED_EXACTLY).set(stats.rules_counted_exactly as f64);
    }
}
