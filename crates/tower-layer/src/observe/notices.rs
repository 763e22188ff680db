//! What an operator must hear about a rule: a misconfiguration at `error` (at most once a minute),
//! the first request skipped for a missing key at `warn`, how many were skipped, and a summary of
//! its refusals at `info` (at most once a minute) — loud enough that a rule limiting nothing is
//! noticed, quiet enough that no caller can flood the log.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tollgate_core::RuleId;

/// How often a rule's misconfiguration is logged at most.
const MISCONFIGURATION_EVERY: Duration = Duration::from_secs(60);

/// How often a rule's refusal summary is logged at most.
const SUMMARY_EVERY: Duration = Duration::from_secs(60);

/// One rule's notices, shared by every clone of the rule.
#[derive(Debug, Default)]
pub(crate) struct RuleNotices {
    keyless_skips: AtomicU64,
    /// Responses that reported no actual cost for a settled rule.
    unsettled: AtomicU64,
    misconfigured: Throttle,
    /// Refusals since the last summary.
    refusals: AtomicU64,
    summary: Throttle,
}

impl RuleNotices {
    /// The request had no key for the rule, which is skipped: counted, and the first one logged.
    pub(crate) fn skipped_without_key(&self, rule: &RuleId) {
        if self.keyless_skips.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(
                target: "tollgate::rule",
                rule = %rule,
                "a request had no key for this rule, which was skipped for it; later skips are \
                 only counted (set the rule's on_missing_key to refuse such requests)"
            );
        }
    }

    /// A response reported no actual cost for the settled rule, whose estimate stands: the first
    /// one is logged.
    pub(crate) fn unsettled(&self, rule: &RuleId) {
        if self.unsettled.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(
                target: "tollgate::rule",
                rule = %rule,
                "a response reported no actual cost for this settled rule; its estimate stands \
                 (later ones are not logged)"
            );
        }
    }

    /// How many requests skipped the rule for want of a key.
    pub(crate) fn keyless_skips(&self) -> u64 {
        self.keyless_skips.load(Ordering::Relaxed)
    }

    /// The rule refused a request (or would have, in shadow): counted, and summed up at `info`
    /// at most once a minute — on a refusal, so a rule that stops refusing falls silent.
    pub(crate) fn refused(&self, rule: &RuleId) {
        self.refusals.fetch_add(1, Ordering::Relaxed);
        if self.summary.ready(SUMMARY_EVERY) {
            let refusals = self.refusals.swap(0, Ordering::Relaxed);
            tracing::info!(
                target: "tollgate::refusal",
                rule = %rule,
                refusals,
                "rate limit refusals since the last summary (each one is a debug event)"
            );
        }
    }

    /// The rule cannot find its key because of the deployment, for the reason `why`; an
    /// enforcing rule answers such requests 500, a shadow or flag rule lets them pass.
    pub(crate) fn misconfigured(
        &self,
        rule: &RuleId,
        why: &dyn std::fmt::Display,
        enforcing: bool,
    ) {
        if self.misconfigured.ready(MISCONFIGURATION_EVERY) {
            let outcome = if enforcing {
                "its requests are answered 500"
            } else {
                "it never stops a request (shadow or flag), so its requests pass uncounted"
            };
            tracing::error!(
                target: "tollgate::rule",
                rule = %rule,
                "rate limit rule misconfigured, {outcome}: {why}"
            );
        }
    }
}

/// Lets something happen at most once per period: the first call, then the first call a period
/// after the last one that was let through. Callers that find it busy are not let through, so
/// it never blocks.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    last: Mutex<Option<Instant>>,
}

impl Throttle {
    /// Whether to go ahead now.
    pub(crate) fn ready(&self, every: Duration) -> bool {
        let Ok(mut last) = self.last.try_lock() else {
            return false;
        };
        let now = Instant::now();
        match *last {
            Some(at) if now.saturating_duration_since(at) < every => false,
            _ => {
                *last = Some(now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_throttle_lets_one_through_per_period() {
        let throttle = Throttle::default();
        let minute = Duration::from_secs(60);
        assert!(throttle.ready(minute));
        assert!(!throttle.ready(minute));
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(!throttle.ready(minute));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(throttle.ready(minute));
        assert!(!throttle.ready(minute));
    }
}
