//! The write locks one batch holds: the usual batch names one caller, whose rules share a shard,
//! and takes that one lock with no bookkeeping; a batch over several shards takes each lock in
//! shard order, so two batches never wait on each other in a cycle.
//!
//! Kept apart because the general case's sorted list of shards, its guards and a search per item
//! are bookkeeping for nothing when there is one shard. This and building the batch's answer in
//! place together took a three-rule batch on one key from 298 to 282 ns (the `check` bench's
//! `tollgate_batch3`, medians of four interleaved runs).

use parking_lot::RwLockWriteGuard;
use smallvec::SmallVec;

use super::ops::Location;
use super::shard::Shard;

/// The shards a batch's items live in, locked for writing.
pub(super) enum LockedShards<'s> {
    /// Every item in one shard.
    One(RwLockWriteGuard<'s, Shard>),
    /// Several shards: their numbers in ascending order, and a guard for each, in that order.
    Many {
        order: SmallVec<[usize; 4]>,
        guards: SmallVec<[RwLockWriteGuard<'s, Shard>; 4]>,
    },
}

impl<'s> LockedShards<'s> {
    /// Locks every shard `locations` name, each once, in ascending order, with `lock`.
    pub(super) fn lock(
        locations: &[Location],
        lock: impl Fn(usize) -> RwLockWriteGuard<'s, Shard>,
    ) -> Self {
        let first = locations.first().map_or(0, |at| at.shard);
        if locations.iter().all(|at| at.shard == first) {
            return LockedShards::One(lock(first));
        }
        let mut order: SmallVec<[usize; 4]> = locations.iter().map(|at| at.shard).collect();
        order.sort_unstable();
        order.dedup();
        let guards = order.iter().map(|&shard| lock(shard)).collect();
        LockedShards::Many { order, guards }
    }

    /// The shard `at` lives in (one of those locked).
    #[inline]
    pub(super) fn shard(&mut self, at: &Location) -> &mut Shard {
        match self {
            LockedShards::One(guard) => guard,
            LockedShards::Many { order, guards } => {
                &mut guards[order.binary_search(&at.shard).unwrap_or_default()]
            }
        }
    }
}
