//! Quotas that can change at runtime: one registry for the layer's rules and typed limits.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use tollgate_core::{Quota, RuleId};

/// The live quotas of rules, by rule id, shared by a layer and the typed limits in handlers.
///
/// A rule (or typed limit) whose id has an entry uses that quota; without one it uses the quota
/// it was declared with. Changing an entry takes effect on the next request, everywhere the
/// registry is shared, without rebuilding anything — so a plan's or a customer's limit can be
/// raised at runtime. Cloning is cheap and clones share entries. Reads are one atomic load and a
/// hash lookup; writes copy the (small) map.
///
/// ```
/// use tollgate_core::{Quota, Rate, RuleId};
/// use tollgate_tower::QuotaRegistry;
///
/// let registry = QuotaRegistry::new();
/// let follows = RuleId::new("follows-per-day")?;
/// assert_eq!(registry.get(&follows), None);
/// registry.set(follows.clone(), Quota::token_bucket(800, Rate::per_day(800))?);
/// assert_eq!(registry.get(&follows).map(|quota| quota.limit()), Some(800));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct QuotaRegistry {
    quotas: Arc<ArcSwap<HashMap<RuleId, Quota>>>,
}

impl QuotaRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        QuotaRegistry::default()
    }

    /// The live quota of `rule`, if the registry has one.
    pub fn get(&self, rule: &RuleId) -> Option<Quota> {
        self.quotas.load().get(rule).copied()
    }

    /// Sets `rule`'s live quota.
    pub fn set(&self, rule: RuleId, quota: Quota) {
        self.quotas.rcu(|quotas| {
            let mut quotas = HashMap::clone(quotas);
            quotas.insert(rule.clone(), quota);
            quotas
        });
    }

    /// Removes `rule`'s entry: it goes back to its declared quota.
    pub fn remove(&self, rule: &RuleId) {
        self.quotas.rcu(|quotas| {
            let mut quotas = HashMap::clone(quotas);
            quotas.remove(rule);
            quotas
        });
    }
}

impl std::fmt::Debug for QuotaRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.quotas.load().iter()).finish()
    }
}
