//! Fleet modes: a store combinator that counts some rules on this gateway and settles with the
//! shared store in batches ([`Counting::Lease`], [`Counting::Sync`]), counts split rules on this
//! gateway alone ([`Counting::Split`]), and every other rule in the shared store on each check
//! (spread over sub-buckets when the rule asks).
//!
//! The files, by idea: [`FleetStore`] itself, what it holds and how it is built (`store.rs`);
//! what it has done (`stats.rs`); the check path, one request over local and shared counts
//! (`check.rs`); a leased item's check (`leasing.rs`) over this gateway's leases (`lease.rs`);
//! a synced item's check and its pushes (`syncing.rs`) over the local copies (`sync.rs`); work
//! off the request path, the ticker and settling (`background.rs`); and the per-key tables
//! (`table.rs`).

mod background;
mod check;
mod counters;
mod lease;
mod leasing;
mod on_drop;
mod stats;
mod store;
mod sync;
mod syncing;
mod table;

pub use self::stats::FleetStats;
pub use self::store::FleetStore;

#[cfg(doc)] // Named in the docs only.
use tollgate_core::Counting;
use tollgate_core::Decision;

/// The refusal of a cost `quota` can never allow.
pub(crate) fn never_fits(quota: &tollgate_core::Quota) -> Decision {
    Decision::refused(
        tollgate_core::RefusalReason::CostExceedsLimit,
        quota.limit(),
        0,
        std::time::Duration::ZERO,
        std::time::Duration::ZERO,
    )
}
