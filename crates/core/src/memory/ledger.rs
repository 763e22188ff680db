//! The debts one shard's callers owe past their limits ([`Take::AsDebt`](crate::Take)).
//!
//! Kept apart from the counts: only rules counted in a fleet mode ever owe anything, so the
//! tables that every check reads stay as small as they were, and a check finds an empty ledger
//! with one length test.

use std::collections::HashMap;

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
    debts: HashMap<(u32, Box<[u8]>), Owed>,
}

impl Ledger {
    /// What `key` of rule number `rule` owes at `now` (0 once lapsed).
    pub(crate) fn owed(&self, rule: u32, key: &[u8], now: Timestamp) -> u64 {
        if self.debts.is_empty() {
            return 0;
        }
        match self.debts.get(&(rule, Box::from(key))) {
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
        let id = (rule, Box::from(key));
        if units == 0 {
            self.debts.remove(&id);
            return;
        }
        if !self.debts.contains_key(&id) && self.debts.len() >= capacity.max(1) {
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
        self.debts.insert(id, Owed { units, lapses_at });
    }

    /// Forgets what `key` of rule number `rule` owes.
    pub(crate) fn forget(&mut self, rule: u32, key: &[u8]) {
        if !self.debts.is_empty() {
            self.debts.remove(&(rule, Box::from(key)));
        }
    }

    /// Drops every lapsed debt.
    pub(crate) fn sweep(&mut self, now: Timestamp) {
        self.debts.retain(|_, owed| owed.lapses_at > now);
    }
}
