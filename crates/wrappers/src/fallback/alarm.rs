//! Loud fall-back: which rules are answered by their failure policy right now.
//!
//! When a rule starts being answered by its [`OnStoreFailure`] instead of the primary, one
//! `warn` event on target `tollgate::fallback` names the rule and its policy; while that lasts
//! it is repeated at most once a minute per rule, and an `info` event says when the primary
//! answers again. A primary that flaps does not flood the log: a rule warned about less than a
//! minute ago goes back to its policy at `debug`, and its recovery is announced only after a
//! warning. With [`FallbackStoreBuilder::metrics`](super::FallbackStoreBuilder::metrics),
//! `tollgate_fallback_active{store, rule}` is 1 meanwhile and
//! `tollgate_fallback_decisions_total{store, rule, policy}` counts the answers. The path where
//! the primary answers costs one atomic load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use tollgate_core::{Item, OnStoreFailure, RuleId, Timestamp};

/// The log target of the fall-back alarm.
const TARGET: &str = "tollgate::fallback";

/// How often a rule answered by its policy is announced at `warn`.
const REPEAT_EVERY_MICROS: u64 = 60_000_000;

/// What the alarm knows of each rule that fell back (kept after recovery, so a flapping primary
/// is announced at most once a minute per rule, and handles are made once).
#[derive(Debug)]
pub(super) struct Alarm {
    /// Whether any rule is answered by its policy now (so recovery costs one load while none is).
    any: AtomicBool,
    rules: Mutex<HashMap<RuleId, RuleAlarm>>,
    /// The `store` label, when metrics are on.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    store: Option<&'static str>,
}

#[derive(Debug)]
struct RuleAlarm {
    /// Since when it is answered by its policy (`None`: by the primary).
    since: Option<Timestamp>,
    /// The last `warn` about it.
    warned_at: Option<Timestamp>,
    /// Whether this episode was announced (so its end is).
    announced: bool,
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
    /// An alarm; `store`: the label to record metrics under (feature `metrics`), if any.
    pub(super) fn new(store: Option<&'static str>) -> Alarm {
        Alarm {
            any: AtomicBool::new(false),
            rules: Mutex::new(HashMap::new()),
            store,
        }
    }

    /// `items` were answered by their policies at `now`.
    pub(super) fn fell_back<'a>(&self, items: impl Iterator<Item = &'a Item<'a>>, now: Timestamp) {
        let mut rules = self.rules.lock();
        for item in items {
            let policy = policy_name(item.on_store_failure());
            let rule = item.rule();
            let alarm = match rules.get_mut(rule) {
                Some(alarm) => alarm,
                None => rules.entry(rule.clone()).or_insert(RuleAlarm {
                    since: None,
                    warned_at: None,
                    announced: false,
                    #[cfg(feature = "metrics")]
                    handles: self
                        .store
                        .map(|store| RuleHandles::new(store, rule, policy)),
                }),
            };
            let due = alarm.warned_at.is_none_or(|warned| {
                now.as_micros() >= warned.as_micros().saturating_add(REPEAT_EVERY_MICROS)
            });
            match alarm.since {
                None => {
                    alarm.since = Some(now);
                    alarm.announced = due;
                    if due {
                        alarm.warned_at = Some(now);
                        tracing::warn!(target: TARGET, rule = %rule, policy, "the rate-limit store cannot answer: rule {rule} is answered by its failure policy ({policy})");
                    } else {
                        tracing::debug!(target: TARGET, rule = %rule, policy, "rule {rule} is answered by its failure policy again ({policy}); announced less than a minute ago");
                    }
                    #[cfg(feature = "metrics")]
                    if let Some(handles) = &alarm.handles {
                        handles.active.set(1.0);
                    }
                }
                Some(since) if due => {
                    alarm.warned_at = Some(now);
                    alarm.announced = true;
                    let for_secs = now.as_micros().saturating_sub(since.as_micros()) / 1_000_000;
                    tracing::warn!(target: TARGET, rule = %rule, policy, for_secs, "rule {rule} is still answered by its failure policy ({policy})");
                }
                Some(_) => {}
            }
            #[cfg(feature = "metrics")]
            if let Some(handles) = &alarm.handles {
                handles.decisions.increment(1);
            }
        }
        self.any.store(true, Ordering::Release);
    }

    /// The primary answered at `now`: every rule is on it again.
    pub(super) fn recovered(&self, now: Timestamp) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut rules = self.rules.lock();
        self.any.store(false, Ordering::Release);
        for (rule, alarm) in rules.iter_mut() {
            let Some(since) = alarm.since.take() else {
                continue;
            };
            if alarm.announced {
                let for_secs = now.as_micros().saturating_sub(since.as_micros()) / 1_000_000;
                tracing::info!(target: TARGET, rule = %rule, for_secs, "the rate-limit store answers again: rule {rule} is decided by it again");
            }
            #[cfg(feature = "metrics")]
            if let Some(handles) = &alarm.handles {
                handles.active.set(0.0);
            }
        }
    }

    /// The rules answered by their policies now.
    pub(super) fn rules(&self) -> Vec<RuleId> {
        let mut rules: Vec<RuleId> = self
            .rules
            .lock()
            .iter()
            .filter(|(_, alarm)| alarm.since.is_some())
            .map(|(rule, _)| rule.clone())
            .collect();
        rules.sort();
        rules
    }
}

#[cfg(feature = "metrics")]
impl RuleHandles {
    fn new(store: &'static str, rule: &RuleId, policy: &'static str) -> RuleHandles {
        RuleHandles {
            active: metrics::gauge!(
                tollgate_core::metrics::FALLBACK_ACTIVE,
                "store" => store,
                "rule" => rule.as_str().to_owned()
            ),
            decisions: metrics::counter!(
                tollgate_core::metrics::FALLBACK_DECISIONS,
                "store" => store,
                "rule" => rule.as_str().to_owned(),
                "policy" => policy
            ),
        }
    }
}
