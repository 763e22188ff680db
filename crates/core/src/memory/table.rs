//! One rule's states of one algorithm family within one shard.

use hashbrown::HashTable;

use super::compact_key::{CompactKey, KeyProbe};
use crate::Quota;
use crate::algorithm::AlgorithmState;

/// A key and its state.
pub(crate) struct Entry<S> {
    pub(crate) key: CompactKey,
    pub(crate) state: S,
}

/// The states of one rule for one state type, with the quota last used for them (the quota
/// decides when a state is idle, and how much of it eviction would lose).
pub(crate) struct Table<S> {
    pub(crate) quota: Option<Quota>,
    pub(crate) entries: HashTable<Entry<S>>,
}

impl<S> Default for Table<S> {
    fn default() -> Self {
        Table {
            quota: None,
            entries: HashTable::new(),
        }
    }
}

impl<S: AlgorithmState> Table<S> {
    #[inline]
    pub(crate) fn find_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut S> {
        let probe = KeyProbe::new(key);
        self.entries
            .find_mut(hash, |entry| entry.key.matches(&probe))
            .map(|entry| &mut entry.state)
    }

    pub(crate) fn find(&self, hash: u64, key: &[u8]) -> Option<&S> {
        let probe = KeyProbe::new(key);
        self.entries
            .find(hash, |entry| entry.key.matches(&probe))
            .map(|entry| &entry.state)
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

    /// Keeps the entries `keep` says to keep; how many were removed.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&S, &Quota) -> bool) -> usize {
        let Some(quota) = self.quota else {
            return 0;
        };
        let before = self.entries.len();
        self.entries.retain(|entry| keep(&entry.state, &quota));
        before - self.entries.len()
    }

    /// Each entry's usage in millionths of the limit.
    pub(crate) fn usages(&self, now: crate::Timestamp, out: &mut Vec<u64>) {
        if let Some(quota) = self.quota {
            out.extend(
                self.entries
                    .iter()
                    .map(|entry| entry.state.usage_ppm(&quota, now)),
            );
        }
    }
}
