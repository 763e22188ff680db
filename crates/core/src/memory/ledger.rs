//! The debts one shard's callers owe past their limits ([`Take::AsDebt`](crate::Take)).
//!
//! Kept apart from the counts: only rules counted in a fleet mode ever owe anything, so the
//! tables that every check reads stay as small as they were, and a check finds an empty ledger
//! with one length test.

use std::hash::{Hash, Hasher};

use hashbrown::{Equivalent, HashMap};

use crate::Timestamp;

/// Units owed, and when the debt lapses (see `algorithm::taking`).
#[derive(Debug, Clone, Copy)]
struct Owed {
    units: u64,
    lapses_at: Timestamp,
}

/// Debts by rule number and key.
#[derive(Default)]
pub(crate) struct Ledger {
    debts: HashMap<(u32, Box<[u8]>), Owed, foldhash::fast::RandomState>,
}

/// A rule number and a borrowed key, looked up without copying the key (hashed as the owned
/// pair is).
struct Lookup<'a>(u32, &'a [u8]);

impl Hash for Lookup<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.0, self.1).hash(state);
    }
}

impl Equivalent<(u32, Box<[u8]>)> for Lookup<'_> {
    fn equivalent(&self, key: &(u32, Box<[u8]>)) -> bool {
        self.0 == key.0 && *self.1 == *key.1
    }
}

impl Ledger {
    /// What `key` of rule number `rule` owes at `now` (0 once lapsed).
    pub(crate) fn owed(&self, rule: u32, key: &[u8], now: Timestamp) -> u64 {
        if self.debts.is_empty() {
            return 0;
        }
        match self.debts.get(&Lookup(rule, key)) {
            Some(owed) if owed.lapses_at > now => owed.units,
            _ => 0,
        }
    }

    /// Records that `key` owes `units` until `lapses_at` (nothing when `units` is 0). Holds at
    /// most `capacity` debts: when full, lapsed ones go first, then the one lapsing soonest.
    pub(crate) fn set(
        &mut self,
        rule: u32,
        key: &[u8],
        units: u64,
        lapses_at: Timestamp,
        now: Timestamp,
        capacity: usize,
    ) {
        if units == 0 {
            if !self.debts.is_empty() {
                self.debts.remove(&Lookup(rule, key));
            }
            return;
        }
        if let Some(owed) = self.debts.get_mut(&Lookup(rule, key)) {
            *owed = Owed { units, lapses_at };
            return;
        }
        if self.debts.len() >= capacity.max(1) {
            self.debts.retain(|_, owed| owed.lapses_at > now);
            if self.debts.len() >= capacity.max(1) {
                let soonest = self
                    .debts
                    .iter()
                    .min_by_key(|(_, owed)| owed.lapses_at)
                    .map(|(id, _)| id.clone());
                if let Some(soonest) = soonest {
                    self.debts.remove(&soonest);
                }
            }
        }
        self.debts
            .insert((rule, Box::from(key)), Owed { units, lapses_at });
    }

    /// Forgets what `key` of rule number `rule` owes.
    pub(crate) fn forget(&mut self, rule: u32, key: &[u8]) {
        if !self.debts.is_empty() {
            self.debts.remove(&Lookup(rule, key));
        }
    }

    /// Drops every lapsed debt.
    pub(crate) fn sweep(&mut self, now: Timestamp) {
        self.debts.retain(|_, owed| owed.lapses_at > now);
    }
}
