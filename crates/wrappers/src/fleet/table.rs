//! The per-key tables of a fleet store: keyed by rule and caller key, read without cloning
//! either (every leased or synced check reads one).

use std::hash::{Hash, Hasher};

use hashbrown::{Equivalent, HashMap};

use tollgate_core::{Key, RuleId};

/// Values by rule and key.
pub(crate) type ByKey<V> = HashMap<(RuleId, Key), V, foldhash::fast::RandomState>;

/// A borrowed rule and key, hashed as the owned pair is.
pub(crate) struct Lookup<'a>(pub(crate) &'a RuleId, pub(crate) &'a Key);

impl Hash for Lookup<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
        self.1.hash(state);
    }
}

impl Equivalent<(RuleId, Key)> for Lookup<'_> {
    fn equivalent(&self, key: &(RuleId, Key)) -> bool {
        *self.0 == key.0 && *self.1 == key.1
    }
}

impl From<&Lookup<'_>> for (RuleId, Key) {
    fn from(lookup: &Lookup<'_>) -> Self {
        (lookup.0.clone(), lookup.1.clone())
    }
}

/// The value for `rule` and `key`, made by `make` if there is none (cloning the two only then),
/// in one lookup.
pub(crate) fn entry<'t, V>(
    table: &'t mut ByKey<V>,
    rule: &RuleId,
    key: &Key,
    make: impl FnOnce() -> V,
) -> &'t mut V {
    table.entry_ref(&Lookup(rule, key)).or_insert_with(make)
}
