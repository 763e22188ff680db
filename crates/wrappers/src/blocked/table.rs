//! The blocked callers a [`BlockedCache`](super::BlockedCache) remembers: by rule and key,
//! bounded, each until the time the store gave.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use hashbrown::{Equivalent, HashMap};

use tollgate_core::{Decision, Item, Key, Quota, RefusalReason, RuleId, Timestamp};

/// A rule and a caller, hashed by the rule's id and the key's encoding, so that a reset
/// announced by name (text and bytes from another gateway) finds the entry without building
/// either.
#[derive(Debug)]
struct Caller {
    rule: RuleId,
    key: Key,
}

impl Hash for Caller {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Lookup(self.rule.as_str(), self.key.as_bytes()).hash(state);
    }
}

impl PartialEq for Caller {
    fn eq(&self, other: &Self) -> bool {
        self.rule == other.rule && self.key == other.key
    }
}

impl Eq for Caller {}

/// A borrowed rule id and key encoding, hashed as a [`Caller`] is.
struct Lookup<'a>(&'a str, &'a [u8]);

impl Hash for Lookup<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
        self.1.hash(state);
    }
}

impl Equivalent<Caller> for Lookup<'_> {
    fn equivalent(&self, caller: &Caller) -> bool {
        self.0 == caller.rule.as_str() && self.1 == caller.key.as_bytes()
    }
}

/// What the store said when it refused a caller: under which quota and for which cost, until
/// when, and the numbers to answer with meanwhile.
#[derive(Debug, Clone, Copy)]
struct Blocked {
    quota: Quota,
    cost: u64,
    until: Timestamp,
    reset_at: Timestamp,
    limit: u64,
    remaining: u64,
}

/// What a lookup found.
pub(super) enum Found {
    /// Nothing to answer with: ask the store.
    Nothing,
    /// Refused until a time still ahead: the decision to answer with.
    Refused(Decision),
}

/// The table, at most `max` entries.
#[derive(Debug)]
pub(super) struct Table {
    entries: HashMap<Caller, Blocked, foldhash::fast::RandomState>,
    max: usize,
}

impl Table {
    pub(super) fn new(max: usize) -> Self {
        Table {
            entries: HashMap::default(),
            max: max.max(1),
        }
    }

    pub(super) fn set_max(&mut self, max: usize) {
        self.max = max.max(1);
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The refusal to answer `item` with at `now`, if its caller is blocked under the same
    /// quota for the same cost. An entry that has ended, or was made under another quota (the
    /// rule's quota changed, or an override gives this caller another), is dropped.
    pub(super) fn find(&mut self, item: &Item<'_>, now: Timestamp) -> Found {
        let lookup = Lookup(item.rule().as_str(), item.key().as_bytes());
        let Some(blocked) = self.entries.get(&lookup) else {
            return Found::Nothing;
        };
        if blocked.until <= now || blocked.quota != *item.quota() {
            self.entries.remove(&lookup);
            return Found::Nothing;
        }
        if blocked.cost != item.cost() {
            // Another cost fits at another time: the store says when.
            return Found::Nothing;
        }
        Found::Refused(Decision::refused(
            RefusalReason::LimitReached,
            blocked.limit,
            blocked.remaining,
            Duration::from_micros(blocked.reset_at.micros_since(now)),
            Duration::from_micros(blocked.until.micros_since(now)),
        ))
    }

    /// Remembers that the store refused `item` at `now` with `decision` (a refusal for lack of
    /// quota, with a wait).
    pub(super) fn insert(&mut self, item: &Item<'_>, decision: &Decision, now: Timestamp) {
        let wait = tollgate_core::store_kit::micros_ceil(decision.retry_after());
        let reset = tollgate_core::store_kit::micros_ceil(decision.reset_after());
        let blocked = Blocked {
            quota: *item.quota(),
            cost: item.cost(),
            until: now.saturating_add_micros(wait),
            reset_at: now.saturating_add_micros(reset),
            limit: decision.limit(),
            remaining: decision.remaining(),
        };
        let lookup = Lookup(item.rule().as_str(), item.key().as_bytes());
        if let Some(entry) = self.entries.get_mut(&lookup) {
            *entry = blocked;
            return;
        }
        if self.entries.len() >= self.max {
            self.make_room(now);
        }
        let caller = Caller {
            rule: item.rule().clone(),
            key: item.key().clone(),
        };
        self.entries.insert(caller, blocked);
    }

    /// Full: drops every entry that has ended, then as many of those that end soonest as it
    /// takes to free a sixteenth of the table (so the scan is paid once per `max / 16` new
    /// entries, not per entry). Dropping a live entry only costs a store call: that caller is
    /// asked about again.
    fn make_room(&mut self, now: Timestamp) {
        self.entries.retain(|_, blocked| blocked.until > now);
        // Every scan frees a sixteenth of the table, so the next inserts find room without one
        // (a steady flood where one entry ends per insert would otherwise scan every time).
        let wanted = (self.max / 16).max(1);
        let free = self.max.saturating_sub(self.entries.len());
        if free >= wanted {
            return;
        }
        let drop_count = wanted - free;
        let mut ends: Vec<Timestamp> = self.entries.values().map(|blocked| blocked.until).collect();
        let at = drop_count.min(ends.len()).saturating_sub(1);
        let (_, cutoff, _) = ends.select_nth_unstable(at);
        let cutoff = *cutoff;
        let mut dropped = 0;
        self.entries.retain(|_, blocked| {
            if blocked.until <= cutoff && dropped < drop_count {
                dropped += 1;
                return false;
            }
            true
        });
    }

    /// Forgets `rule`'s entry for `key`; whether there was one.
    pub(super) fn forget(&mut self, rule: &str, key: &[u8]) -> bool {
        self.entries.remove(&Lookup(rule, key)).is_some()
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use tollgate_core::{Key, Quota, RefusalReason, RuleId};

    /// A full table makes room for a sixteenth of itself at once, even when only one entry has
    /// ended: the next inserts find room without scanning again.
    #[test]
    fn making_room_frees_a_sixteenth_even_when_one_entry_ended() {
        let mut table = Table::new(64);
        let rule = RuleId::new("login").expect("valid");
        let quota = Quota::fixed_window(1, Duration::from_secs(60)).expect("valid");
        let start = Timestamp::from_secs(1_000);
        let refused = |seconds: u64| {
            let wait = Duration::from_secs(seconds);
            Decision::refused(RefusalReason::LimitReached, 1, 0, wait, wait)
        };
        for n in 0..64_u64 {
            let key = Key::new(n.to_be_bytes());
            table.insert(&Item::new(&rule, quota, &key), &refused(n + 1), start);
        }
        assert_eq!(table.len(), 64);
        // One second later the first entry has ended: one more insert drops it and three more.
        let key = Key::new(b"new");
        table.insert(
            &Item::new(&rule, quota, &key),
            &refused(30),
            start.saturating_add_micros(1_000_000),
        );
        assert_eq!(table.len(), 64 - 4 + 1, "four slots freed, one taken");
    }
}
