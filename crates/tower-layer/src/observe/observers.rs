//! The layer's observers, and what they keep for one rule.

#[cfg(feature = "metrics")]
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use smallvec::SmallVec;
use tollgate_core::{Decision, Key, RuleId};

use super::alerts::{AlertBook, AlertShare};
use super::key_logging::KeyLogging;
use super::log::RuleLog;
use super::notices::RuleNotices;
use super::stats::StatsBook;
use super::top_refused::{RuleTop, TopRefused};
use super::{Observer, RuleObserver};

/// Every observer of one layer (shared by the layer values built from one `new`, so a clone
/// that turns one on turns it on for the rest): the built-in ones, each on when asked for, and
/// the service's own.
#[derive(Default)]
pub(crate) struct Observers {
    /// Metrics: whether installed rules get metric handles.
    #[cfg(feature = "metrics")]
    pub(crate) metrics: AtomicBool,
    /// The admin counters, once tracked.
    pub(crate) stats: OnceLock<StatsBook>,
    /// The top refused callers, once tracked.
    pub(crate) top_refused: OnceLock<Arc<TopRefused>>,
    /// The alerts of the rules that state a share.
    pub(crate) alerts: AlertBook,
    /// The service's own ([`RateLimitLayer::observe`](crate::RateLimitLayer::observe)).
    pub(crate) custom: Mutex<Vec<Arc<dyn Observer>>>,
    /// Every rule set in force that these observers hear from (one per layer value with rules of
    /// its own), so an observer turned on from any of them reaches them all.
    observed: Mutex<Vec<Weak<dyn Reobserve>>>,
}

/// Rules in force that can be installed again with what the observers keep now.
pub(crate) trait Reobserve: Send + Sync {
    /// Installs the rules in force again, in place, observed by `observers` as they are now.
    fn reobserve(&self, observers: &Observers);
}

/// Whose decisions a rule's observers hear: a layer's rule's, or a typed limit's in a handler
/// (which the admin counters do not count: they show the layer's rules).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Observed {
    LayerRule,
    TypedLimit,
}

impl Observers {
    /// Whether installed rules record metrics.
    #[cfg(feature = "metrics")]
    pub(crate) fn metered(&self) -> bool {
        self.metrics.load(Ordering::Acquire)
    }

    /// What every observer keeps for `rule`, which alerts at `alert_at` (a layer's rule that
    /// states a share).
    pub(crate) fn of_rule(
        &self,
        rule: &RuleId,
        notices: Arc<RuleNotices>,
        observed: Observed,
        alert_at: Option<AlertShare>,
    ) -> RuleObservers {
        let mut observers: SmallVec<[Arc<dyn RuleObserver>; 4]> = SmallVec::new();
        observers.push(Arc::new(RuleLog {
            rule: rule.clone(),
            notices,
        }));
        #[cfg(feature = "metrics")]
        if self.metered() {
            observers.push(Arc::new(super::metrics::RuleMetrics::new(rule)));
        }
        if let (Some(book), Observed::LayerRule) = (self.stats.get(), observed) {
            observers.push(book.counters(rule));
        }
        if let (Some(share), Observed::LayerRule) = (alert_at, observed) {
            #[cfg(feature = "metrics")]
            let metered = self.metered();
            #[cfg(not(feature = "metrics"))]
            let metered = false;
            observers.push(self.alerts.rule(rule, share, metered));
        }
        if let Some(top) = self.top_refused.get() {
            observers.push(Arc::new(RuleTop {
                rule: rule.clone(),
                top: Arc::clone(top),
            }));
        }
        let custom = self.custom.lock().unwrap_or_else(PoisonError::into_inner);
        observers.extend(custom.iter().map(|observer| observer.rule(rule)));
        RuleObservers { observers }
    }

    /// Remembers `rules` (weakly) as observed by these observers.
    pub(crate) fn observing(&self, rules: Weak<dyn Reobserve>) {
        let mut observed = self.observed.lock().unwrap_or_else(PoisonError::into_inner);
        observed.retain(|rules| rules.strong_count() > 0);
        observed.push(rules);
    }

    /// After an observer was turned on: every rule set these observers hear from gets what each
    /// observer keeps for its rules.
    pub(crate) fn changed(&self) {
        let observed: Vec<Arc<dyn Reobserve>> = {
            let observed = self.observed.lock().unwrap_or_else(PoisonError::into_inner);
            observed.iter().filter_map(Weak::upgrade).collect()
        };
        for rules in observed {
            rules.reobserve(self);
        }
    }

    /// A rule file or fleet document was loaded (`ok`) or refused.
    pub(crate) fn rules_loaded(&self, ok: bool) {
        #[cfg(feature = "metrics")]
        if self.metered() {
            super::metrics::count_load(ok);
        }
        let custom = self.custom.lock().unwrap_or_else(PoisonError::into_inner);
        for observer in custom.iter() {
            observer.rules_loaded(ok);
        }
    }
}

/// What every observer of a layer keeps for one rule: the request path tells it each decision.
/// Code that decides outside the layer (a typed limit in a handler) takes one from
/// [`LayerHandle::rule_observers`](crate::LayerHandle::rule_observers) and tells it its own
/// decisions, so they are observed as the layer's are.
#[derive(Clone)]
pub struct RuleObservers {
    observers: SmallVec<[Arc<dyn RuleObserver>; 4]>,
}

impl std::fmt::Debug for RuleObservers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleObservers")
            .field("observers", &self.observers.len())
            .finish()
    }
}

impl RuleObservers {
    /// The store decided for the rule (see [`RuleObserver::decided`]).
    pub fn decided(&self, decision: &Decision, enforcing: bool, refused_locally: bool) {
        for observer in &self.observers {
            observer.decided(decision, enforcing, refused_locally);
        }
    }

    /// The rule refused `key` (see [`RuleObserver::refused`]); `logging`: how the caller shows
    /// keys in logs.
    pub fn refused(&self, key: &Key, decision: &Decision, enforced: bool, logging: KeyLogging) {
        for observer in &self.observers {
            observer.refused(key, decision, enforced, logging);
        }
    }

    /// The store could not answer (see [`RuleObserver::store_failed`]).
    pub(crate) fn store_failed(&self, let_through: bool, enforcing: bool) {
        for observer in &self.observers {
            observer.store_failed(let_through, enforcing);
        }
    }

    /// Concurrency slots taken or given back (see [`RuleObserver::slots_held`]).
    pub(crate) fn slots_held(&self, slots: u64, taken: bool) {
        for observer in &self.observers {
            observer.slots_held(slots, taken);
        }
    }
}
