//! The one handle code outside the layer holds: typed limits in handlers, the admin API, rule
//! files. Everything it gives is the layer's own, shared, not copied.

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{DynStore, RuleId, Unsupported};

use crate::headers::HeaderStyle;
use crate::headers::refused::Responder;
use crate::in_force::InForce;
use crate::observe::alerts::Alert;
use crate::observe::key_logging::KeyLogging;
use crate::observe::notices::RuleNotices;
use crate::observe::observers::{Observed, RuleObservers};
use crate::observe::stats::RuleStats;
use crate::observe::top_refused::TopRefusedReport;
use crate::rules::registry::QuotaRegistry;
use crate::rules::rule_set::RuleSet;
use crate::settings::Settings;

/// A running layer as code outside it sees it: its store, its rules in force (to read or
/// replace), its settings, and what it has observed. Made by
/// [`RateLimitLayer::handle`](crate::RateLimitLayer::handle); cheap to clone, and every clone
/// speaks for the same layer value. A later builder call that adds rules gives the layer a rule
/// set of its own, which an earlier handle does not replace; a later call that changes a setting
/// (headers, key logging, ...) changes that layer value's settings, not the handle's (refusal
/// events always show keys as the layer serving the request says).
///
/// It is the one way in for code that works beside the layer, and what each kind of such code
/// uses:
///
/// * a rule source (a rule file, a fleet document, rules kept in a database):
///   [`replace_rules`](Self::replace_rules), [`registry`](Self::registry) for live quotas, and
///   [`rules_loaded`](Self::rules_loaded) to tell the observers of each load;
/// * a decision made outside the layer (a typed limit in a handler): [`store`](Self::store) to
///   count in, [`rule_observers`](Self::rule_observers) to tell its decisions to, and what the
///   layer would answer with — [`header_style`](Self::header_style),
///   [`responder`](Self::responder), [`key_logging`](Self::key_logging),
///   [`unavailable_retry_after`](Self::unavailable_retry_after);
/// * a report (an admin page, a fleet-wide summary): [`rules`](Self::rules),
///   [`stats`](Self::stats), [`top_refused_rules`](Self::top_refused_rules) and
///   [`top_refused`](Self::top_refused), [`alerts`](Self::alerts), and an operator's
///   [`reset`](Self::reset).
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{MemoryStore, Quota};
/// use tollgate_tower::key::Global;
/// use tollgate_tower::{RateLimitLayer, Rule, RuleSet};
///
/// let layer = RateLimitLayer::new(MemoryStore::new());
/// let handle = layer.handle();
/// let quota = Quota::fixed_window(100, Duration::from_secs(1))?;
/// handle.replace_rules(RuleSet::new().rule(Rule::new("all", quota, Global)?));
/// assert_eq!(handle.rules().rules().count(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct LayerHandle {
    pub(crate) in_force: Arc<InForce>,
    pub(crate) settings: Arc<Settings>,
}

impl std::fmt::Debug for LayerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerHandle")
            .field("rules", &self.in_force.rules.load())
            .finish_non_exhaustive()
    }
}

impl LayerHandle {
    /// The layer's store, its type erased: count here to count together with the layer.
    pub fn store(&self) -> &DynStore {
        &self.in_force.store
    }

    /// The rules in force.
    pub fn rules(&self) -> Arc<RuleSet> {
        self.in_force.rules.load_full()
    }

    /// Replaces every rule at once, for every service made from this layer value (and its
    /// clones made since the last builder call), without rebuilding them: the next request sees
    /// the new set. An error, and the rules in force stay, when the layer's store cannot count
    /// a rule as it asks (a leased rule over a store without a
    /// `FleetStore` (`tollgate_wrappers`), say: see
    /// [`Capabilities`](tollgate_core::Capabilities)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::{MemoryStore, Quota};
    /// use tollgate_wrappers::FleetStore;
    /// use tollgate_tower::key::Global;
    /// use tollgate_tower::{RateLimitLayer, Rule, RuleSet};
    ///
    /// let quota = Quota::fixed_window(100, Duration::from_secs(1))?;
    /// let sharded = RuleSet::new().rule(Rule::new("search", quota, Global)?.sub_buckets(4));
    /// let plain = RateLimitLayer::new(MemoryStore::new());
    /// assert!(plain.handle().replace_rules(sharded.clone()).is_err());
    /// let fleet = RateLimitLayer::new(FleetStore::new(MemoryStore::new()));
    /// fleet.handle().replace_rules(sharded)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace_rules(&self, rules: RuleSet) -> Result<(), UnsupportedRule> {
        (self.in_force.install(rules)).map_err(|(rule, reason)| UnsupportedRule { rule, reason })
    }

    /// The live-quota registry, if the layer was given one.
    pub fn registry(&self) -> Option<&QuotaRegistry> {
        self.settings.registry.as_ref()
    }

    /// Which rate-limit headers responses carry: the rules in force's style
    /// ([`RuleSet::headers`], a rule file's `headers`), else the layer's.
    pub fn header_style(&self) -> HeaderStyle {
        self.in_force
            .rules
            .load()
            .header_style(self.settings.header_style)
    }

    /// How keys appear in events.
    pub fn key_logging(&self) -> KeyLogging {
        self.settings.key_logging
    }

    /// The `Retry-After` of a 503 when the store is down and a rule fails closed.
    pub fn unavailable_retry_after(&self) -> Duration {
        self.settings.unavailable_retry_after
    }

    /// The layer's responder hook, if it has one.
    pub fn responder(&self) -> Option<&Responder> {
        self.settings.responder.as_ref()
    }

    /// This gateway's number among the gateways a split rule shares its limit with, if set
    /// ([`RateLimitLayer::gateway`](crate::RateLimitLayer::gateway)).
    pub fn gateway(&self) -> Option<u32> {
        self.settings.gateway
    }

    /// `rule`'s counts ([`track_stats`](crate::RateLimitLayer::track_stats)); `None` when not
    /// tracked, or no rule with this id was installed since.
    pub fn stats(&self, rule: &RuleId) -> Option<RuleStats> {
        self.in_force.observers.stats.get()?.report(rule)
    }

    /// `rule`'s `n` most refused callers over the last hour, shown as the layer's
    /// [`KeyLogging`] says; `None` unless
    /// [`track_top_refused`](crate::RateLimitLayer::track_top_refused) was called. Samples still
    /// in the channel are not yet counted.
    pub fn top_refused(&self, rule: &RuleId, n: usize) -> Option<TopRefusedReport> {
        let top = self.in_force.observers.top_refused.get()?;
        Some(top.report(rule, n, self.settings.key_logging))
    }

    /// The rules whose refusals [`top_refused`](Self::top_refused) has counted (empty unless
    /// tracked).
    pub fn top_refused_rules(&self) -> Vec<RuleId> {
        self.in_force
            .observers
            .top_refused
            .get()
            .map(|top| top.rules())
            .unwrap_or_default()
    }

    /// The rules alerting now ([`Rule::with_alert_at`](crate::Rule::with_alert_at)), by id:
    /// since when (on the layer's [alert clock](crate::RateLimitLayer::alert_clock)) and the
    /// highest share of its limit a caller reached. Each rule's alert is looked at first, so one
    /// whose time has come is cleared (and announced) now. Empty when no rule states a share.
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_tower::RateLimitLayer;
    ///
    /// let layer = RateLimitLayer::new(MemoryStore::new());
    /// assert!(layer.handle().alerts().is_empty());
    /// ```
    pub fn alerts(&self) -> Vec<Alert> {
        self.in_force.observers.alerts.alerts()
    }

    /// What the layer's observers keep for `rule`, for decisions made outside the layer (a
    /// typed limit's in a handler): its refusals are logged, summed up, counted in metrics and
    /// among the top refused callers as the layer's are (not in the admin counters, which show
    /// the layer's rules, nor in alerts, which a typed limit does not state). Make it once per
    /// rule, not per request.
    pub fn rule_observers(&self, rule: &RuleId) -> RuleObservers {
        let notices = Arc::new(RuleNotices::default());
        (self.in_force.observers).of_rule(rule, notices, Observed::TypedLimit, None)
    }

    /// Tells the layer's observers that a rule file or fleet document was loaded (`ok`) or
    /// refused for its mistakes (counted as `tollgate_config_loads_total` when the layer
    /// records metrics).
    pub fn rules_loaded(&self, ok: bool) {
        self.in_force.observers.rules_loaded(ok);
    }
}

/// A rule set that [`LayerHandle::replace_rules`] refused: the layer's store cannot count one of
/// its rules as the rule asks.
#[derive(Debug, Clone, thiserror::Error)]
#[error("rule {rule:?} cannot be installed: {reason}")]
pub struct UnsupportedRule {
    rule: RuleId,
    #[source]
    reason: Unsupported,
}

impl UnsupportedRule {
    /// The rule.
    pub fn rule(&self) -> &RuleId {
        &self.rule
    }

    /// What the store lacks, and which wrapper would give it.
    pub fn reason(&self) -> &Unsupported {
        &self.reason
    }
}
