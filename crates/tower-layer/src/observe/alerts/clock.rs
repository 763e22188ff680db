//! The clock alerts are timed on: the system's, unless the layer is given another
//! ([`RateLimitLayer::alert_clock`](crate::RateLimitLayer::alert_clock)) — the store's manual
//! clock in a test or a simulation, so alerts clear on the time the store decides on.

use std::sync::{Arc, PoisonError, RwLock};

use tollgate_core::{Clock, SystemClock, Timestamp};

/// The clock every alert of a layer reads: replaceable, and read off the request path only
/// (when an alert is raised, and at each look).
pub(crate) struct AlertClock(RwLock<Arc<dyn Clock>>);

impl AlertClock {
    pub(crate) fn new(clock: impl Clock) -> AlertClock {
        AlertClock(RwLock::new(Arc::new(clock)))
    }

    /// The time now.
    pub(crate) fn now(&self) -> Timestamp {
        let clock = self.0.read().unwrap_or_else(PoisonError::into_inner);
        clock.now()
    }

    /// Alerts are timed on `clock` from now on.
    pub(crate) fn set(&self, clock: Arc<dyn Clock>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = clock;
    }
}

impl Default for AlertClock {
    fn default() -> Self {
        AlertClock::new(SystemClock::new())
    }
}
