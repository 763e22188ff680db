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
    /// most `capacity` debts: when full, lapsed ones go first, then the eighth lapsing soonest
    /// (forgiven: memory is bounded), in one pass that makes room for many new debtors — one
    /// debt at a time would scan the whole ledger for every new debtor.
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
        let capacity = capacity.max(1);
        if self.debts.len() >= capacity {
            self.debts.retain(|_, owed| owed.lapses_at > now);
            if self.debts.len() >= capacity {
                let mut lapses: Vec<Timestamp> =
                    self.debts.values().map(|owed| owed.lapses_at).collect();
                let cut = (capacity / 8).max(1).min(lapses.len());
                let (_, threshold, _) = lapses.select_nth_unstable(cut - 1);
                let threshold = *threshold;
                self.debts.retain(|_, owed| owed.lapses_at > threshold);
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

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp::from_secs(1_000);

    /// A full ledger makes room for a new debtor by forgiving the eighth lapsing soonest in one
    /// pass (so the next seven new debtors need no pass), never the new one, never more than it
    /// holds.
    #[test]
    fn a_full_ledger_forgives_the_soonest_eighth_at_once() {
        let mut ledger = Ledger::default();
        let key = |n: u32| n.to_be_bytes();
        for n in 0..16u32 {
            let lapses = NOW.saturating_add_micros(1_000 + u64::from(n));
            ledger.set(1, &key(n), 5, lapses, NOW, 16);
        }
        assert_eq!(ledger.debts.len(), 16);
        ledger.set(1, &key(100), 5, NOW.saturating_add_micros(9_999), NOW, 16);
        // 16 / 8 = 2 forgiven (the two lapsing soonest), the new one recorded.
        assert_eq!(ledger.debts.len(), 15);
        assert_eq!(ledger.owed(1, &key(0), NOW), 0);
        assert_eq!(ledger.owed(1, &key(1), NOW), 0);
        assert_eq!(ledger.owed(1, &key(2), NOW), 5);
        assert_eq!(ledger.owed(1, &key(100), NOW), 5);
        // A ledger of one forgives its one debt for the next.
        let mut tiny = Ledger::default();
        tiny.set(1, &key(0), 5, NOW.saturating_add_micros(10), NOW, 1);
        tiny.set(1, &key(1), 5, NOW.saturating_add_micros(10), NOW, 1);
        assert_eq!(
            (tiny.owed(1, &key(0), NOW), tiny.owed(1, &key(1), NOW)),
            (0, 5)
        );
    }
}
