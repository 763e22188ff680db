//! What a fleet store counts about itself as it runs.

use std::sync::atomic::AtomicU64;

/// The counters behind [`FleetStats`](crate::FleetStats), bumped on the check path and in the background.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) decided_locally: AtomicU64,
    pub(super) store_calls: AtomicU64,
    pub(super) receipts_given_back: AtomicU64,
    pub(super) failed_pushes: AtomicU64,
}
