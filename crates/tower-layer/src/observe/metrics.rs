//! Each rule's decisions as metrics (feature `metrics`): `tollgate_checks_total{rule, outcome}`,
//! `tollgate_near_limit_total{rule}` and, for concurrency rules, `tollgate_in_flight{rule}`, and rule loads as `tollgate_config_loads_total{result}`;
//! for a rule that alerts, `tollgate_rule_alerting{rule}` and `tollgate_alerts_total{rule}`
//! (names and the rest in `tollgate_core::metrics`). Handles are made when a rule set is
//! installed, so a request only increments counters.

use tollgate_core::metrics::{
    ALERTS, CHECKS, CONFIG_LOADS, IN_FLIGHT, NEAR_LIMIT, RULE_ALERTING, is_near_limit,
};
use tollgate_core::{Decision, RuleId};

use super::RuleObserver;

/// One rule's counters (`tollgate_checks_total{rule, outcome}`, `tollgate_near_limit_total{rule}`).
pub(crate) struct RuleMetrics {
    allowed: metrics::Counter,
    refused: metrics::Counter,
    shadow_refused: metrics::Counter,
    refused_locally: metrics::Counter,
    near_limit: metrics::Counter,
    /// Made on the rule's first held slot, so rate rules export no gauge.
    in_flight: std::sync::OnceLock<metrics::Gauge>,
    rule: RuleId,
}

impl RuleMetrics {
    /// Registers `rule`'s counters with the installed recorder.
    pub(crate) fn new(rule: &RuleId) -> RuleMetrics {
        let checks = |outcome: &'static str| metrics::counter!(CHECKS, "rule" => rule.as_str().to_owned(), "outcome" => outcome);
        RuleMetrics {
            allowed: checks("allowed"),
            refused: checks("refused"),
            shadow_refused: checks("shadow_refused"),
            refused_locally: checks("refused_locally"),
            near_limit: metrics::counter!(NEAR_LIMIT, "rule" => rule.as_str().to_owned()),
            in_flight: std::sync::OnceLock::new(),
            rule: rule.clone(),
        }
    }
}

impl RuleObserver for RuleMetrics {
    /// A refusal made on this gateway without asking the store (a
    /// `BlockedCache` (`tollgate_wrappers`)'s) counts as outcome `refused_locally`.
    fn decided(&self, decision: &Decision, enforcing: bool, refused_locally: bool) {
        if refused_locally {
            self.refused_locally.increment(1);
        } else if decision.is_allowed() {
            self.allowed.increment(1);
            if is_near_limit(decision.remaining(), decision.limit()) {
                self.near_limit.increment(1);
            }
        } else if enforcing {
            self.refused.increment(1);
        } else {
            self.shadow_refused.increment(1);
        }
    }

    fn slots_held(&self, slots: u64, taken: bool) {
        // A gauge holds an f64: exact for any slot count below 2^53.
        let slots = slots as f64;
        let in_flight = self
            .in_flight
            .get_or_init(|| metrics::gauge!(IN_FLIGHT, "rule" => self.rule.as_str().to_owned()));
        if taken {
            in_flight.increment(slots);
        } else {
            in_flight.decrement(slots);
        }
    }
}

/// Counts one load of a rule file or fleet document, `success` or `error`.
pub(crate) fn count_load(ok: bool) {
    let result = if ok { "success" } else { "error" };
    metrics::counter!(CONFIG_LOADS, "result" => result).increment(1);
}

/// One alerting rule's gauge (`tollgate_rule_alerting{rule}`: 1 while raised) and counter
/// (`tollgate_alerts_total{rule}`: alerts raised), set when its alert changes, never per
/// request.
pub(crate) struct AlertMetrics {
    alerting: metrics::Gauge,
    raised: metrics::Counter,
}

impl AlertMetrics {
    /// Registers `rule`'s gauge, showing whether its alert is `raised` now, and its counter.
    pub(crate) fn new(rule: &RuleId, raised: bool) -> AlertMetrics {
        let alerting = metrics::gauge!(RULE_ALERTING, "rule" => rule.as_str().to_owned());
        alerting.set(if raised { 1.0 } else { 0.0 });
        AlertMetrics {
            alerting,
            raised: metrics::counter!(ALERTS, "rule" => rule.as_str().to_owned()),
        }
    }

    /// The alert was raised.
    pub(crate) fn raised(&self) {
        self.alerting.set(1.0);
        self.raised.increment(1);
    }

    /// The alert was cleared.
    pub(crate) fn cleared(&self) {
        self.alerting.set(0.0);
    }
}
