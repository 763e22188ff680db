//! One lock's worth of the in-memory store: every rule's states for the keys hashed here, kept
//! within a bound.

use super::atomic_tat::AtomicTat;
use super::ledger::Ledger;
use super::stored::{StoredInFlight, StoredLog, StoredSliding, StoredState, StoredWindow};
use super::table::Table;
use crate::algorithm::AlgorithmState;
use crate::{Algorithm, Timestamp};

/// Sweep idle state at least this often (store time), whatever the traffic.
const SWEEP_INTERVAL_MICROS: u64 = 60 * 1_000_000;

/// Do not bother sweeping shards smaller than this on growth.
const MIN_SWEEP_LEN: usize = 256;

/// All of one rule's tables, one per state type.
#[derive(Default)]
pub(crate) struct RuleTables {
    gcra: Table<AtomicTat>,
    fixed: Table<StoredWindow>,
    sliding: Table<StoredSliding>,
    log: Table<StoredLog>,
    /// Concurrency slots: swept once none is held, never evicted (each entry is held by
    /// running requests, so their number is bounded by the requests in flight, not by the
    /// store's key bound).
    inflight: Table<StoredInFlight>,
}

/// A state type the in-memory store keeps, and which of a rule's tables holds it.
pub(crate) trait Tabled: StoredState + Sized {
    fn table(tables: &mut RuleTables) -> &mut Table<Self>;
    fn table_ref(tables: &RuleTables) -> &Table<Self>;
}

macro_rules! stored_state {
    ($state:ty, $field:ident) => {
        impl Tabled for $state {
            fn table(tables: &mut RuleTables) -> &mut Table<Self> {
                &mut tables.$field
            }
            fn table_ref(tables: &RuleTables) -> &Table<Self> {
                &tables.$field
            }
        }
    };
}

stored_state!(AtomicTat, gcra);
stored_state!(StoredWindow, fixed);
stored_state!(StoredSliding, sliding);
stored_state!(StoredLog, log);
stored_state!(StoredInFlight, inflight);

/// Something to do with the state type an algorithm uses.
pub(crate) trait StateVisitor {
    type Output;
    fn visit<S: Tabled>(self) -> Self::Output;
}

/// Runs `visitor` with the state type `algorithm` keeps.
pub(crate) fn visit_state<V: StateVisitor>(algorithm: Algorithm, visitor: V) -> V::Output {
    match algorithm {
        Algorithm::FixedWindow => visitor.visit::<StoredWindow>(),
        Algorithm::SlidingWindowCounter => visitor.visit::<StoredSliding>(),
        Algorithm::SlidingWindowLog => visitor.visit::<StoredLog>(),
        Algorithm::Concurrency => visitor.visit::<StoredInFlight>(),
        // Token bucket, GCRA and pacing all keep one timestamp.
        _ => visitor.visit::<AtomicTat>(),
    }
}

/// What a sweep or eviction removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Removed {
    pub(crate) lossless: usize,
    pub(crate) lossy: usize,
}

/// The states of every rule for the keys that hash to this shard.
pub(crate) struct Shard {
    /// Indexed by rule number; boxed so rules this store never sees cost one pointer.
    tables: Vec<Option<Box<RuleTables>>>,
    len: usize,
    next_sweep_len: usize,
    last_sweep: Timestamp,
    /// What this shard's callers owe past their limits.
    pub(crate) ledger: Ledger,
}

impl Shard {
    pub(crate) fn new() -> Self {
        Shard {
            tables: Vec::new(),
            len: 0,
            next_sweep_len: MIN_SWEEP_LEN,
            last_sweep: Timestamp::EPOCH,
            ledger: Ledger::default(),
        }
    }

    /// The number of keys held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The table of `S` for rule number `rule`, if the rule has any state here.
    pub(crate) fn table<S: Tabled>(&self, rule: u32) -> Option<&Table<S>> {
        self.tables
            .get(rule as usize)
            .and_then(Option::as_deref)
            .map(S::table_ref)
    }

    /// The table of `S` for rule number `rule`, created if missing.
    pub(crate) fn table_mut<S: Tabled>(&mut self, rule: u32) -> &mut Table<S> {
        let index = rule as usize;
        if self.tables.len() <= index {
            self.tables.resize_with(index + 1, || None);
        }
        S::table(self.tables[index].get_or_insert_with(Box::default))
    }

    /// Records a key added or removed by a caller of `table_mut`.
    pub(crate) fn note_added(&mut self) {
        self.len += 1;
    }

    pub(crate) fn note_removed(&mut self) {
        self.note_removed_many(1);
    }

    pub(crate) fn note_removed_many(&mut self, count: usize) {
        self.len = self.len.saturating_sub(count);
    }

    /// Makes room for one more key if the shard is at `capacity`, and sweeps idle state when the
    /// shard has grown a lot or not been swept for a while.
    pub(crate) fn before_insert(&mut self, capacity: usize, now: Timestamp) -> Removed {
        let mut removed = Removed::default();
        let overdue = now.micros_since(self.last_sweep) >= SWEEP_INTERVAL_MICROS;
        if self.len >= capacity || self.len >= self.next_sweep_len || overdue {
            removed.lossless = self.sweep(now);
        }
        if self.len >= capacity {
            // Every key holds live state: forget those whose loss matters least, a sixteenth of
            // the shard at a time so the scan is paid rarely.
            let target = (capacity / 16).max(1).min(self.len);
            removed.lossy = self.evict_least_used(target, now);
        }
        removed
    }

    /// Removes every state that loses nothing when dropped (expired, or full again), each
    /// judged by its own quota.
    pub(crate) fn sweep(&mut self, now: Timestamp) -> usize {
        let mut removed = 0;
        for tables in self.tables.iter_mut().flatten() {
            removed += sweep_table(&mut tables.gcra, now);
            removed += sweep_table(&mut tables.fixed, now);
            removed += sweep_table(&mut tables.sliding, now);
            removed += sweep_table(&mut tables.log, now);
            removed += sweep_table(&mut tables.inflight, now);
        }
        self.len -= removed;
        self.ledger.sweep(now);
        self.last_sweep = now;
        self.next_sweep_len = (self.len * 2).max(MIN_SWEEP_LEN);
        removed
    }

    /// Removes the `count` states whose loss matters least: callers not refused since they were
    /// last allowed before those who were (a flood cannot reset a refused caller while the
    /// refused fit in the shard), then the smallest share of their own limit, then the states
    /// that would be idle soonest.
    fn evict_least_used(&mut self, count: usize, now: Timestamp) -> usize {
        let mut ranks = Vec::with_capacity(self.len);
        for tables in self.tables.iter().flatten() {
            tables.gcra.ranks(now, &mut ranks);
            tables.fixed.ranks(now, &mut ranks);
            tables.sliding.ranks(now, &mut ranks);
            tables.log.ranks(now, &mut ranks);
        }
        if ranks.is_empty() || count == 0 {
            return 0;
        }
        // Refused callers go only when nobody else is left, and then one at a time: a flood
        // never takes more of them than the room it needs.
        let not_refused = ranks.iter().filter(|(refused, _, _)| !refused).count();
        let count = if not_refused > 0 {
            count.min(not_refused)
        } else {
            1
        };
        let nth = count.min(ranks.len()) - 1;
        let (_, threshold, _) = ranks.select_nth_unstable(nth);
        let threshold = *threshold;
        // Remove everything ranked strictly below the threshold, then ties until `count` are gone.
        let mut budget = count;
        let mut removed = 0;
        for pass_ties in [false, true] {
            for tables in self.tables.iter_mut().flatten() {
                let mut evict = |rank: (bool, u64, Timestamp)| {
                    let take = if pass_ties {
                        rank == threshold
                    } else {
                        rank < threshold
                    };
                    if take && budget > 0 {
                        budget -= 1;
                        return true;
                    }
                    false
                };
                removed += evict_table(&mut tables.gcra, now, &mut evict);
                removed += evict_table(&mut tables.fixed, now, &mut evict);
                removed += evict_table(&mut tables.sliding, now, &mut evict);
                removed += evict_table(&mut tables.log, now, &mut evict);
            }
        }
        self.len -= removed;
        removed
    }
}

fn sweep_table<S: StoredState>(table: &mut Table<S>, now: Timestamp) -> usize {
    table.retain(|state, quota| !state.view(quota, |state| state.is_idle(quota, now)))
}

fn evict_table<S: StoredState>(
    table: &mut Table<S>,
    now: Timestamp,
    evict: &mut impl FnMut((bool, u64, Timestamp)) -> bool,
) -> usize {
    table.retain(|state, quota| !evict(state.eviction_rank(quota, now)))
}
