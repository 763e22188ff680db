//! The rules in force and what they are counted in: what every service of one layer value
//! shares with its [`LayerHandle`](crate::LayerHandle), and how a rule set is installed.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tollgate_core::{DynStore, RuleId, Store, Unsupported};

use crate::observe::observers::{Observers, Reobserve};
use crate::rules::rule_set::RuleSet;

/// What every service made by one layer value shares: the store, the rules in force and how
/// they are installed. It has no store type, so a [`LayerHandle`](crate::LayerHandle) holds it
/// too.
pub(crate) struct InForce {
    /// The layer's store, its type erased: every check, refund, slot renewal and per-message
    /// charge goes through it (shared with every layer value built from the same
    /// `RateLimitLayer::new`).
    pub(crate) store: DynStore,
    pub(crate) rules: ArcSwap<RuleSet>,
    /// Who observes the decisions: kept with the rules, so whoever replaces them (a rule file's
    /// watcher, a clone made earlier) installs them alike; shared by every layer value built from the same
    /// `new`, so a rule keeps its admin counts across reloads.
    pub(crate) observers: Arc<Observers>,
}

impl InForce {
    /// `in_force`, shared, and known to its observers (so an observer turned on from any layer
    /// value reaches these rules too).
    pub(crate) fn observed(in_force: InForce) -> Arc<InForce> {
        let in_force = Arc::new(in_force);
        let weak: std::sync::Weak<dyn Reobserve> = Arc::downgrade(&in_force) as _;
        in_force.observers.observing(weak);
        in_force
    }

    /// `rules` as this layer installs them: with what each observer keeps for each rule.
    pub(crate) fn prepared(&self, rules: RuleSet) -> RuleSet {
        rules
            .observed_by(&self.observers)
            .checked_against(&self.store.capabilities())
    }

    /// Installs `rules` for every request from the next one on, unless the store cannot count
    /// one of them as it asks (that rule, and why not).
    pub(crate) fn install(&self, rules: RuleSet) -> Result<(), (RuleId, Unsupported)> {
        let prepared = self.prepared(rules);
        if let Some(unsupported) = prepared.first_unsupported() {
            return Err(unsupported);
        }
        self.rules.store(Arc::new(prepared));
        Ok(())
    }
}

impl Reobserve for InForce {
    fn reobserve(&self, observers: &Observers) {
        self.rules
            .rcu(|rules| RuleSet::clone(rules).observed_by(observers));
    }
}
