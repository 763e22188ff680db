//! Each rule's decisions at the edge, under the names the HTTP layer uses
//! (`tollgate_checks_total{rule, outcome}`, `tollgate_near_limit_total{rule}`), so one
//! dashboard shows a rule whether Envoy or an axum service asked; one counter of answers,
//! `tollgate_envoy_answers_total{code}`; and one of the quota service's bucket actions,
//! `tollgate_envoy_quota_actions_total{action}`.

use tollgate_core::metrics::{CHECKS, NEAR_LIMIT, is_near_limit};
use tollgate_core::{Decision, RuleId};

/// Answers of the rate limit service by what they said: `ok`, `over_limit`, `unavailable`
/// (the store could not answer and a rule fails closed), `invalid_argument`.
/// (`tollgate_core::metrics::ENVOY_ANSWERS`, where every tollgate metric is named.)
pub const ANSWERS: &str = tollgate_core::metrics::ENVOY_ANSWERS;

/// Bucket actions the quota service sent, by what they said: `token_bucket` (a lease),
/// `allow_all`, `deny_all`, `abandon`.
/// (`tollgate_core::metrics::ENVOY_QUOTA_ACTIONS`.)
pub const QUOTA_ACTIONS: &str = tollgate_core::metrics::ENVOY_QUOTA_ACTIONS;

/// One rule's counters, registered when its rule file is installed.
pub(crate) struct RuleCounters {
    allowed: metrics::Counter,
    refused: metrics::Counter,
    shadow_refused: metrics::Counter,
    near_limit: metrics::Counter,
}

impl RuleCounters {
    pub(crate) fn new(rule: &RuleId) -> RuleCounters {
        let checks = |outcome: &'static str| metrics::counter!(CHECKS, "rule" => rule.as_str().to_owned(), "outcome" => outcome);
        RuleCounters {
            allowed: checks("allowed"),
            refused: checks("refused"),
            shadow_refused: checks("shadow_refused"),
            near_limit: metrics::counter!(NEAR_LIMIT, "rule" => rule.as_str().to_owned()),
        }
    }

    /// Counts one decision of an `enforcing` rule (else a shadow one).
    pub(crate) fn decided(&self, decision: &Decision, enforcing: bool) {
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
}

/// The rate limit service's counters of answers, registered when a rule file is installed
/// (as the rules' are), so an answer counts without looking its counter up.
pub(crate) struct AnswerCounters {
    ok: metrics::Counter,
    over_limit: metrics::Counter,
    unavailable: metrics::Counter,
    invalid_argument: metrics::Counter,
}

/// What an answer said, as [`ANSWERS`] counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answered {
    Ok,
    OverLimit,
    /// The store could not answer and a rule fails closed.
    Unavailable,
    InvalidArgument,
}

impl AnswerCounters {
    pub(crate) fn new() -> AnswerCounters {
        let answers = |code: &'static str| metrics::counter!(ANSWERS, "code" => code);
        AnswerCounters {
            ok: answers("ok"),
            over_limit: answers("over_limit"),
            unavailable: answers("unavailable"),
            invalid_argument: answers("invalid_argument"),
        }
    }

    /// Counts one answer.
    pub(crate) fn answered(&self, answered: Answered) {
        match answered {
            Answered::Ok => &self.ok,
            Answered::OverLimit => &self.over_limit,
            Answered::Unavailable => &self.unavailable,
            Answered::InvalidArgument => &self.invalid_argument,
        }
        .increment(1);
    }
}

/// Counts one bucket action.
pub(crate) fn acted(action: &'static str) {
    metrics::counter!(QUOTA_ACTIONS, "action" => action).increment(1);
}
