//! A store wrapper's metric handles (feature `metrics`), made when it is built: the names are
//! `tollgate_core::metrics`'s.

use tollgate_core::StoreErrorKind;
use tollgate_core::metrics::{BREAKER_OPEN, NODE_BREAKER_OPEN, STORE_ERRORS, STORE_SECONDS};

/// The label of a store error's kind.
fn kind_label(kind: StoreErrorKind) -> &'static str {
    match kind {
        StoreErrorKind::Timeout => "timeout",
        StoreErrorKind::Unavailable => "unavailable",
        StoreErrorKind::Protocol => "protocol",
        StoreErrorKind::Capacity => "capacity",
        StoreErrorKind::TimeOutOfRange => "time_out_of_range",
        _ => "other",
    }
}

/// A store wrapper's handles, made when it is built.
#[derive(Debug)]
pub(crate) struct StoreMetrics {
    store: &'static str,
    pub(crate) seconds: metrics::Histogram,
    pub(crate) breaker_open: metrics::Gauge,
    errors: [metrics::Counter; 5],
}

impl StoreMetrics {
    pub(crate) fn new(store: &'static str) -> StoreMetrics {
        let error = |kind: StoreErrorKind| metrics::counter!(STORE_ERRORS, "store" => store, "kind" => kind_label(kind));
        let breaker_open = metrics::gauge!(BREAKER_OPEN, "store" => store);
        breaker_open.set(0.0);
        StoreMetrics {
            store,
            seconds: metrics::histogram!(STORE_SECONDS, "store" => store),
            breaker_open,
            errors: [
                error(StoreErrorKind::Timeout),
                error(StoreErrorKind::Unavailable),
                error(StoreErrorKind::Protocol),
                error(StoreErrorKind::Capacity),
                error(StoreErrorKind::TimeOutOfRange),
            ],
        }
    }

    pub(crate) fn error(&self, kind: StoreErrorKind) {
        let index = match kind {
            StoreErrorKind::Timeout => 0,
            StoreErrorKind::Unavailable => 1,
            StoreErrorKind::Protocol => 2,
            StoreErrorKind::Capacity => 3,
            StoreErrorKind::TimeOutOfRange => 4,
            // A kind added to core later: counted under its own label, its handle made here.
            _ => {
                metrics::counter!(STORE_ERRORS, "store" => self.store, "kind" => kind_label(kind))
                    .increment(1);
                return;
            }
        };
        self.errors[index].increment(1);
    }

    /// Records whether `node`'s breaker is open (`None`: the store-wide one).
    pub(crate) fn breaker(&self, node: Option<&str>, open: bool) {
        let value = if open { 1.0 } else { 0.0 };
        match node {
            None => self.breaker_open.set(value),
            Some(node) => {
                metrics::gauge!(NODE_BREAKER_OPEN, "store" => self.store, "node" => node.to_owned())
                    .set(value);
            }
        }
    }
}
