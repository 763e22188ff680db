//! Each rule's decisions as metrics (feature `metrics`): `tollgate_checks_total{rule, outcome}`
//! and `tollgate_near_limit_total{rule}` (names and the rest in `tollgate_core::metrics`).
//! Handles are made when a rule set is installed, so a request only increments counters.

use tollgate_core::metrics::{CHECKS, NEAR_LIMIT, is_near_limit};
use tollgate_core::{Decision, RuleId};

/// One rule's counters (`tollgate_checks_total{rule, outcome}`, `tollgate_near_limit_total{rule}`),
/// for code that decides outside the layer — typed limits in handlers use it — so every
/// decision is counted alike.
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{Decision, RuleId};
/// use tollgate_tower::RuleMetrics;
///
/// let follows = RuleMetrics::new(&RuleId::new("follows-per-day")?);
/// follows.record(&Decision::allowed(400, 12, Duration::ZERO), true); // allowed, and near the limit
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RuleMetrics {
    allowed: metrics::Counter,
    refused: metrics::Counter,
    shadow_refused: metrics::Counter,
    refused_locally: metrics::Counter,
    near_limit: metrics::Counter,
}

impl RuleMetrics {
    /// Registers `rule`'s counters with the installed recorder.
    pub fn new(rule: &RuleId) -> RuleMetrics {
        let checks = |outcome: &'static str| metrics::counter!(CHECKS, "rule" => rule.as_str().to_owned(), "outcome" => outcome);
        RuleMetrics {
            allowed: checks("allowed"),
            refused: checks("refused"),
            shadow_refused: checks("shadow_refused"),
            refused_locally: checks("refused_locally"),
            near_limit: metrics::counter!(NEAR_LIMIT, "rule" => rule.as_str().to_owned()),
        }
    }

    /// Records the rule's own decision for one request (`enforcing`: a refusal stops it; else
    /// it is a shadow refusal).
    pub fn record(&self, decision: &Decision, enforcing: bool) {
        if decision.is_allowed() {
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

    /// Records a refusal made on this gateway without asking the store (a
    /// [`BlockedCache`](tollgate_core::BlockedCache)'s: the caller was refused by the store
    /// until a time not yet reached), as outcome `refused_locally`.
    ///
    /// ```
    /// use tollgate_core::RuleId;
    /// use tollgate_tower::RuleMetrics;
    /// RuleMetrics::new(&RuleId::new("login")?).record_refused_locally();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record_refused_locally(&self) {
        self.refused_locally.increment(1);
    }
}
