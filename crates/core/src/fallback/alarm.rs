//! Loud fall-back: which rules are answered by their failure policy right now.
//!
//! When a rule starts being answered by its [`OnStoreFailure`] instead of the primary, one
//! `warn` event on target `tollgate::fallback` names the rule and its policy; it is repeated at
//! most once a minute per rule while that lasts, and an `info` event says when the primary
//! answers again. With [`FallbackStoreBuilder::metrics`](super::FallbackStoreBuilder::metrics),
//! `tollgate_fallback_active{rule}` is 1 meanwhile and `tollgate_fallback_decisions_total{rule,
//! policy}` counts the answers. The path where the primary answers costs one atomic load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::{Item, OnStoreFailure, RuleId, Timestamp};

/// The log target of the fall-back alarm.
const TARGET: &str = "tollgate::fallback";

/// How often a rule still answered by its policy is announced again.
const REPEAT_EVERY_MICROS: u64 = 60_000_000;

/// The rules answered by their policies now.
#[derive(Debug)]
pub(super) struct Alarm {
    /// Whether any rule is in the map (so recovery costs one load while none is).
    any: AtomicBool,
    active: Mutex<HashMap<RuleId, Active>>,
    #[cfg(feature = "metrics")]
    metrics: bool,
}

#[derive(Debug)]
struct Active {
    since: Timestamp,
    announced_at: Timestamp,
    #[cfg(feature = "metrics")]
    handles: Option<RuleHandles>,
}

#[cfg(feature = "metrics")]
#[derive(Debug)]
struct RuleHandles {
    active: metrics::Gauge,
    decisions: metrics::Counter,
}

/// The name of a policy in events and metric labels.
pub(crate) fn policy_name(policy: OnStoreFailure) -> &'static str {
    match policy {
        OnStoreFailure::Open => "open",
        OnStoreFailure::OpenWithin(_) => "open_within",
        OnStoreFailure::Local => "local",
        OnStoreFailure::Closed => "closed",
    }
}

impl Alarm {
    /// An alarm; `metrics`: record the fall-back metrics too (feature `metrics`).
    pub(super) fn new(metrics: bool) -> Alarm {
        #[cfg(not(feature = "metrics"))]
        let _ = metrics;
        Alarm {
            any: AtomicBool::new(false),
            active: Mutex::new(HashMap::new()),
            #[cfg(feature = "metrics")]
            metrics,
        }
    }

    /// `items` were answered by their policies at `now`.
    pub(super) fn fell_back(&self, items: &[Item<'_>], now: Timestamp) {
        let mut active = self.active.lock();
        for item in items {
            let policy = policy_name(item.on_store_failure());
            let entry = active.entry(item.rule().clone()).or_insert_with(|| {
                tracing::warn!(target: TARGET, rule = %item.rule(), policy, "the rate-limit store cannot answer: rule {} is answered by its failure policy ({policy})", item.rule());
                Active {
                    since: now,
                    announced_at: now,
                    #[cfg(feature = "metrics")]
                    handles: self.metrics.then(|| RuleHandles::new(item.rule(), policy)),
                }
            });
            if now.as_micros()
                >= entry
                    .announced_at
                    .as_micros()
                    .saturating_add(REPEAT_EVERY_MICROS)
            {
                entry.announced_at = now;
                let for_secs = now.as_micros().saturating_sub(entry.since.as_micros()) / 1_000_000;
                tracing::warn!(target: TARGET, rule = %item.rule(), policy, for_secs, "rule {} is still answered by its failure policy ({policy})", item.rule());
            }
            #[cfg(feature = "metrics")]
            if let Some(handles) = &entry.handles {
                handles.decisions.increment(1);
            }
        }
        self.any.store(!active.is_empty(), Ordering::Release);
    }

    /// The primary answered at `now`: every rule is on it again.
    pub(super) fn recovered(&self, now: Timestamp) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut active = self.active.lock();
        self.any.store(false, Ordering::Release);
        for (rule, entry) in active.drain() {
            let for_secs = now.as_micros().saturating_sub(entry.since.as_micros()) / 1_000_000;
            tracing::info!(target: TARGET, rule = %rule, for_secs, "the rate-limit store answers again: rule {rule} is decided by it again");
            #[cfg(feature = "metrics")]
            if let Some(handles) = entry.handles {
                handles.active.set(0.0);
            }
        }
    }

    /// The rules answered by their policies now.
    pub(super) fn rules(&self) -> Vec<RuleId> {
        let mut rules: Vec<RuleId> = self.active.lock().keys().cloned().collect();
        rules.sort();
        rules
    }
}

#[cfg(feature = "metrics")]
impl RuleHandles {
    fn new(rule: &RuleId, policy: &'static str) -> RuleHandles {
        let active =
            metrics::gauge!(crate::metrics::FALLBACK_ACTIVE, "rule" => rule.as_str().to_owned());
        active.set(1.0);
        RuleHandles {
            active,
            decisions: metrics::counter!(
                crate::metrics::FALLBACK_DECISIONS,
                "rule" => rule.as_str().to_owned(),
                "policy" => policy
            ),
        }
    }
}
