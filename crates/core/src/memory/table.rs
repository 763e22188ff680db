//! One rule's states of one algorithm family within one shard, with the quotas they were last
//! checked under.

use hashbrown::HashTable;

use super::compact_key::{CompactKey, KeyProbe};
use super::quota_slots::QuotaSlots;
use super::stored::StoredState;
use crate::{Quota, Timestamp};

/// A key and its state.
pub(crate) struct Entry<S> {
    pub(crate) key: CompactKey,
    pub(crate) state: S,
}

/// The states of one rule for one state type, and the quotas their slots name.
pub(crate) struct Table<S> {
    pub(crate) slots: QuotaSlots,
    pub(crate) entries: HashTable<Entry<S>>,
}

impl<S> Default for Table<S> {
    fn default() -> Self {
        Table {
            slots: QuotaSlots::default(),
            entries: HashTable::new(),
        }
    }
}

impl<S: StoredState> Table<S> {
    /// The key's state and the quota it was written under.
    #[inline]
    pub(crate) fn find_written(&mut self, hash: u64, key: &[u8]) -> Option<(&mut S, Quota)> {
        let probe = KeyProbe::new(key);
        let slots = &self.slots;
        let entry = self
            .entries
            .find_mut(hash, |entry| entry.key.matches(&probe))?;
        let quota = *slots.get(entry.state.meta().slot)?;
        Some((&mut entry.state, quota))
    }

    #[inline]
    pub(crate) fn find(&self, hash: u64, key: &[u8]) -> Option<&S> {
        let probe = KeyProbe::new(key);
        self.entries
            .find(hash, |entry| entry.key.matches(&probe))
            .map(|entry| &entry.state)
    }

    /// The quota a stored state was written under.
    pub(crate) fn quota_of(&self, state: &S) -> Option<Quota> {
        self.slots.get(state.meta().slot).copied()
    }

    /// The slot for `quota`, taking a free one if needed. When all are taken, slots no state
    /// names are freed first; if every slot is still in use, the states of the least used slot
    /// are dropped to make room (how many is the second value: lossy evictions).
    pub(crate) fn slot_for(&mut self, quota: Quota) -> (u16, usize) {
        if let Some(slot) = self.slots.find(&quota) {
            return (slot, 0);
        }
        if let Some(slot) = self.slots.insert(quota) {
            return (slot, 0);
        }
        // Per slot: whether any of its callers is refused, and how many states name it.
        let mut users = vec![(false, 0usize); self.slots.len()];
        for entry in &self.entries {
            let meta = entry.state.meta();
            if let Some((refused, count)) = users.get_mut(usize::from(meta.slot)) {
                *refused |= meta.refused;
                *count += 1;
            }
        }
        let in_use: Vec<bool> = users.iter().map(|&(_, count)| count > 0).collect();
        self.slots.release_unused(&in_use);
        let mut dropped = 0;
        if !in_use.contains(&false) {
            // Every slot is in use: drop the states of the one whose loss matters least (no
            // refused callers if possible, then the fewest states).
            let least = (0..users.len())
                .min_by_key(|&slot| users[slot])
                .and_then(|slot| u16::try_from(slot).ok())
                .unwrap_or_default();
            if S::SAME_UNDER_ANY_QUOTA {
                // Its states lose nothing under another quota: they share this one's slot.
                self.slots.replace(least, quota);
                return (least, 0);
            }
            dropped = self.retain(|state, _| state.meta().slot != least);
            let mut in_use = in_use;
            in_use[usize::from(least)] = false;
            self.slots.release_unused(&in_use);
        }
        let slot = self.slots.insert(quota).unwrap_or_default();
        (slot, dropped)
    }

    /// Inserts a key known to be absent.
    pub(crate) fn insert(
        &mut self,
        hash: u64,
        key: &[u8],
        state: S,
        rehash: impl Fn(&[u8]) -> u64,
    ) {
        let entry = Entry {
            key: CompactKey::new(key),
            state,
        };
        self.entries
            .insert_unique(hash, entry, |entry| rehash(entry.key.as_bytes()));
    }

    /// Removes the key; whether it was there.
    pub(crate) fn remove(&mut self, hash: u64, key: &[u8]) -> bool {
        let probe = KeyProbe::new(key);
        match self
            .entries
            .find_entry(hash, |entry| entry.key.matches(&probe))
        {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Keeps the entries `keep` says to keep, each judged with its own quota; how many were
    /// removed. A state whose quota is unknown (never: every slot named is held) is kept.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&S, &Quota) -> bool) -> usize {
        let before = self.entries.len();
        let slots = &self.slots;
        self.entries.retain(|entry| {
            slots
                .get(entry.state.meta().slot)
                .is_none_or(|quota| keep(&entry.state, quota))
        });
        before - self.entries.len()
    }

    /// Each entry's eviction rank (see [`StoredState::eviction_rank`]).
    pub(crate) fn ranks(&self, now: Timestamp, out: &mut Vec<(bool, u64, Timestamp)>) {
        for entry in &self.entries {
            if let Some(quota) = self.slots.get(entry.state.meta().slot) {
                out.push(entry.state.eviction_rank(quota, now));
            }
        }
    }
}
