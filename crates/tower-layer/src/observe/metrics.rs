//! Each rule's decisions as metrics (feature `metrics`): `tollgate_checks_total{rule, outcome}`
//! and `tollgate_near_limit_total{rule}`, and rule loads as `tollgate_config_loads_total{result}`
//! (names and the rest in `tollgate_core::metrics`). Handles are made when a rule set is
//! installed, so a request only increments counters.

use tollgate_core::metrics::{CHECKS, CONFIG_LOADS, NEAR_LIMIT, is_near_limit};
use tollgate_core::{Decision, RuleId};

use super::RuleObserver;

/// One rule's counters (`tollgate_checks_total{rule, outcome}`, `tollgate_near_limit_total{rule}`).
pub(crate) struct RuleMetrics {
    allowed: metrics::Counter,
    refused: metrics::Counter,
    shadow_refused: metrics::Counter,
    refused_locally: metrics::Counter,
    near_limit: metrics::Counter,
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
        }
    }
}

impl RuleObserver for RuleMetrics {
    /// A refusal made on this gateway without asking the store (a
    /// [`BlockedCache`](tollgate_core::BlockedCache)'s) counts as outcome `refused_locally`.
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
}

/// Counts one load of a rule file or fleet document, `success` or `error`.
pub(crate) fn count_load(ok: bool) {
    let result = if ok { "success" } else { "error" };
    metrics::counter!(CONFIG_LOADS, "result" => result).increment(1);
}
