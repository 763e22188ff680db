//! From the store's answer to what the request gets: go ahead (with headers, maybe after a
//! delay), or a response instead.

use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http::request::Parts;
use smallvec::SmallVec;
use tollgate_core::{BatchDecision, Decision, Mode, OnStoreFailure, Receipt, Refusal, StoreError};

use crate::disclosure::Disclosure;
use crate::events;
use crate::flag::Flagged;
use crate::plan::{Plan, store_mode};
use crate::respond::{self, Refused};
use crate::route::RuleSet;
use crate::rule::CountWhen;
use crate::settings::Settings;
use crate::{RefusalAction, Rule};

/// Charges that count only for some responses, with the rule's test.
pub(crate) type Charges = SmallVec<[(Receipt, CountWhen); 1]>;

/// What a request gets.
// Lives for one call on the stack; boxing the larger variant would cost an allocation per
// allowed request instead.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Conclusion {
    /// Call the inner service (after `delay`, for pacing), then show `disclosure` in its
    /// response's headers; `charges` are refunded if the response says they do not count.
    Proceed {
        disclosure: Disclosure,
        delay: Duration,
        charges: Charges,
    },
    /// Answer with `response` instead; `refused_by` is the plan position of the rule whose quota
    /// ran out (for escalation), if one did.
    Respond {
        response: Response<Bytes>,
        refused_by: Option<usize>,
    },
}

/// Decides what the request gets from the store's `answer` to its `plan`.
pub(crate) fn conclude(
    settings: &Settings,
    rules: &RuleSet,
    plan: &Plan,
    answer: Result<BatchDecision, StoreError>,
    request: &mut Parts,
) -> Conclusion {
    let batch = match answer {
        Ok(batch) => batch,
        Err(error) => return store_failed(settings, rules, plan, &error),
    };
    let mut refusing: Option<(&Rule, &Decision)> = None;
    let mut refused_by = None;
    for (position, ((planned, rule), answer)) in plan.rules(rules).zip(batch.items()).enumerate() {
        let decision = answer.decision();
        if decision.is_allowed() {
            continue;
        }
        let is_flag = matches!(rule.on_refusal, RefusalAction::Flag);
        let enforcing = rule.mode == Mode::Enforce && !is_flag;
        events::refusal(settings, rule, &planned.key, decision, enforcing);
        if enforcing {
            if refusing.is_none() {
                refusing = Some((rule, decision));
                refused_by =
                    (decision.refusal() == Some(Refusal::LimitReached)).then_some(position);
            }
        } else if is_flag && batch.is_allowed() {
            Flagged::add(request, rule.id.clone(), *decision);
        }
    }
    // Disclosed policies, the refusing one first.
    let is_refuser = |rule: &Rule| refusing.is_some_and(|(refuser, _)| std::ptr::eq(refuser, rule));
    let others = plan
        .rules(rules)
        .zip(batch.items())
        .filter(|((_, rule), _)| rule.is_disclosed() && !is_refuser(rule))
        .map(|((_, rule), answer)| (rule, answer.decision()));
    let shown = refusing
        .filter(|(rule, _)| rule.is_disclosed())
        .into_iter()
        .chain(others);
    let disclosure = Disclosure::of(settings.header_style, shown);
    match refusing {
        None => Conclusion::Proceed {
            disclosure,
            delay: enforced_delay(rules, plan, &batch),
            charges: conditional_charges(rules, plan, &batch),
        },
        Some((rule, decision)) => {
            let refused = Refused::new(rule.id.clone(), *decision, disclosure.to_headers());
            Conclusion::Respond {
                response: respond::refusal(settings, rule, refused),
                refused_by,
            }
        }
    }
}

/// The caller is blocked by the escalating rule at `position` of `plan` until `decision` says.
pub(crate) fn blocked(
    settings: &Settings,
    rules: &RuleSet,
    plan: &Plan,
    position: usize,
    decision: Decision,
) -> Conclusion {
    let Some((planned, rule)) = plan.rules(rules).nth(position) else {
        return Conclusion::Respond {
            response: respond::limiter_unavailable(settings),
            refused_by: None,
        };
    };
    events::refusal(settings, rule, &planned.key, &decision, true);
    let shown = rule.is_disclosed().then_some((rule, &decision));
    let headers = Disclosure::of(settings.header_style, shown).to_headers();
    let refused = Refused::new(rule.id.clone(), decision, headers);
    Conclusion::Respond {
        response: respond::refusal(settings, rule, refused),
        refused_by: None,
    }
}

/// How long to wait before going ahead: the longest delay of an enforcing pacing rule (a shadow
/// or flag rule only reports, so its delay is not waited for).
fn enforced_delay(rules: &RuleSet, plan: &Plan, batch: &BatchDecision) -> Duration {
    plan.rules(rules)
        .zip(batch.items())
        .filter(|((_, rule), _)| store_mode(rule) == Mode::Enforce)
        .map(|(_, answer)| answer.decision().delay())
        .max()
        .unwrap_or(Duration::ZERO)
}

/// The charges of rules that count only some responses, as receipts to refund later.
fn conditional_charges(rules: &RuleSet, plan: &Plan, batch: &BatchDecision) -> Charges {
    plan.rules(rules)
        .zip(batch.items())
        .filter_map(|((planned, rule), answer)| {
            let counts = rule.count_when.as_ref()?;
            let receipt = Receipt::new(
                rule.id.clone(),
                planned.key.clone(),
                rule.quota,
                *answer.charge()?,
            );
            Some((receipt, std::sync::Arc::clone(counts)))
        })
        .collect()
}

/// The store could not answer: closed rules answer 503, open (and, until the store-failure
/// wrapper provides a local store, local) rules let the request through.
fn store_failed(
    settings: &Settings,
    rules: &RuleSet,
    plan: &Plan,
    error: &StoreError,
) -> Conclusion {
    let closed = plan.rules(rules).find(|(_, rule)| {
        rule.mode == Mode::Enforce && rule.on_store_failure == OnStoreFailure::Closed
    });
    match closed {
        Some((_, rule)) => {
            tracing::error!(
                target: "tollgate::store",
                rule = %rule.id,
                error = %error,
                "rate-limit store failed; the rule fails closed, answering 503"
            );
            Conclusion::Respond {
                response: respond::limiter_unavailable(settings),
                refused_by: None,
            }
        }
        None => {
            tracing::warn!(
                target: "tollgate::store",
                error = %error,
                "rate-limit store failed; the request's rules fail open"
            );
            Conclusion::Proceed {
                disclosure: Disclosure::nothing(),
                delay: Duration::ZERO,
                charges: Charges::new(),
            }
        }
    }
}
