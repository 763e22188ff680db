//! From the store's answer to what the request gets: go ahead (with headers, maybe after a
//! delay), or a response instead.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http::request::Parts;
use tollgate_core::{
    BatchDecision, Charge, Decision, Estimate, Item, ItemDecision, Key, OnStoreFailure,
    RefusalReason, StoreError,
};

use crate::headers::disclosure::Disclosure;
use crate::headers::refused::Refused;
use crate::pipeline::charges::Charges;
use crate::pipeline::flag::Flagged;
use crate::pipeline::plan::Plan;
use crate::pipeline::respond;
use crate::pipeline::settling::Settled;
use crate::rules::actual_cost::CostMeter;
use crate::rules::on_refusal::OnRefusal;
use crate::rules::rule::Rule;
use crate::rules::rule_set::{RuleRef, RuleSet};
use crate::settings::Settings;

/// What a request gets.
// Lives for one call on the stack; boxing the larger variant would cost an allocation per
// allowed request instead.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Conclusion {
    /// Call the inner service (after `delay`, for pacing), then show `disclosure` in its
    /// response's headers; `charges` are refunded if the response says they do not count, and
    /// slots given back when its body ends.
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

/// Decides what the request gets from the store's `answer` to its `plan`, whose store `items`
/// (`plan.items(rules)`, in plan order) were checked.
pub(crate) fn conclude(
    settings: &Settings,
    rules: &RuleSet,
    plan: &Plan,
    items: &[Item<'_>],
    answer: Result<BatchDecision, StoreError>,
    request: &mut Parts,
) -> Conclusion {
    let batch = match answer {
        Ok(batch) => batch,
        Err(error) => {
            return store_failed(settings, rules, plan, &error, respond::is_grpc(request));
        }
    };
    let gate = closed_gate(rules, plan, &batch);
    // Each rule's own decision, counted whatever the request gets (a blocked caller's blocking
    // rule is counted as refused by `blocked`). A request refused by a cache of blocked callers
    // counts only its refusing rule: the others were not asked.
    let refused_locally = batch.items().iter().any(ItemDecision::refused_locally);
    for (at, ((planned, rule), answer)) in plan.rules(rules).zip(batch.items()).enumerate() {
        if gate.is_some_and(|(blocking, _)| blocking == at) {
            continue;
        }
        if refused_locally && !answer.refused_locally() {
            continue;
        }
        tell_decided(rules, planned.rule, answer, rule.can_refuse());
    }
    if let Some((position, block)) = gate {
        return blocked(
            settings,
            rules,
            plan,
            position,
            block,
            respond::is_grpc(request),
        );
    }
    let answers = || plan.rules(rules).zip(batch.items()).enumerate();
    for (_, ((planned, rule), answer)) in answers() {
        let decision = answer.decision();
        if decision.is_allowed() {
            continue;
        }
        tell_refused(
            settings,
            rules,
            planned.rule,
            &planned.key,
            decision,
            rule.can_refuse(),
        );
        if matches!(rule.on_refusal, OnRefusal::Flag) && batch.is_allowed() {
            Flagged::add(request, rule.id.clone(), *decision);
        }
    }
    // The refusal to report: one that can never fit first, else the longest wait.
    let refusing = batch.worst_refusal(items).and_then(|(position, answer)| {
        let (planned, rule) = plan.rules(rules).nth(position)?;
        Some((position, planned, rule, answer.decision()))
    });

    // Disclosed policies, the refusing one first; only what was counted is shown.
    let is_refuser =
        |rule: &Rule| refusing.is_some_and(|(_, _, refuser, _)| std::ptr::eq(refuser, rule));
    let others = answers()
        .filter(|(_, ((_, rule), _))| rule.is_disclosed() && !is_refuser(rule))
        .filter_map(|(position, ((_, rule), answer))| {
            let quota = answer.counted_quota(items.get(position)?)?;
            Some((&rule.id, quota, answer.decision()))
        });
    let first = refusing
        .filter(|(_, _, rule, _)| rule.is_disclosed())
        .and_then(|(position, _, rule, decision)| {
            let quota = batch
                .items()
                .get(position)?
                .counted_quota(items.get(position)?)?;
            Some((&rule.id, quota, decision))
        });
    let disclosure = Disclosure::of(
        rules.header_style(settings.header_style),
        first.into_iter().chain(others),
    );

    let Some((position, planned, rule, decision)) = refusing else {
        return Conclusion::Proceed {
            disclosure,
            delay: batch.delay(items),
            charges: left_to_response(rules, plan, items, batch, request),
        };
    };
    let quota = (batch.items().get(position).zip(items.get(position)))
        .and_then(|(answer, item)| answer.counted_quota(item))
        .unwrap_or(planned.quota);
    // Read only when refusing: an allowed request never looks at its content-type.
    let grpc = respond::is_grpc(request);
    let refused = Refused::new(&rule.id, quota, *decision, disclosure.to_headers())
        .answered_with(rule.on_refusal.http_status())
        .of_grpc_call(grpc);
    Conclusion::Respond {
        response: respond::answer_refusal(settings, rule, refused, grpc),
        refused_by: (decision.refusal() == Some(RefusalReason::LimitReached)).then_some(position),
    }
}

/// Tells the rule's observers of its own decision (a refusal made without the store too).
fn tell_decided(rules: &RuleSet, at: RuleRef, answer: &ItemDecision, enforcing: bool) {
    if let Some(observers) = rules.observers(at) {
        observers.decided(answer.decision(), enforcing, answer.refused_locally());
    }
}

/// Tells the rule's observers it refused `key` (`enforced`: the request was refused).
fn tell_refused(
    settings: &Settings,
    rules: &RuleSet,
    at: RuleRef,
    key: &Key,
    decision: &Decision,
    enforced: bool,
) {
    if let Some(observers) = rules.observers(at) {
        observers.refused(key, decision, enforced, settings.key_logging);
    }
}

/// The first escalation block that refused the request: the plan position of its rule, and the
/// block's own decision (its wait is the rest of the block).
fn closed_gate(rules: &RuleSet, plan: &Plan, batch: &BatchDecision) -> Option<(usize, Decision)> {
    if batch.is_allowed() {
        return None;
    }
    batch.items().iter().enumerate().find_map(|(at, answer)| {
        let position = plan.gated_rule(rules, at)?;
        (!answer.decision().is_allowed()).then(|| (position, *answer.decision()))
    })
}

/// The caller is blocked by the escalating rule at `position` of `plan` until `block` (the
/// block's refused decision) says.
fn blocked(
    settings: &Settings,
    rules: &RuleSet,
    plan: &Plan,
    position: usize,
    block: Decision,
    grpc: bool,
) -> Conclusion {
    let Some((planned, rule)) = plan.rules(rules).nth(position) else {
        return Conclusion::Respond {
            response: respond::limiter_unavailable(settings, grpc),
            refused_by: None,
        };
    };
    // The rule's own policy refuses, for as long as the block lasts.
    let until = block.retry_after();
    let limit = planned.quota.limit();
    let decision = Decision::refused(RefusalReason::LimitReached, limit, 0, until, until);
    tell_refused(settings, rules, planned.rule, &planned.key, &decision, true);
    tell_decided(
        rules,
        planned.rule,
        &ItemDecision::uncharged(decision),
        true,
    );
    let shown = rule
        .is_disclosed()
        .then_some((&rule.id, planned.quota, &decision));
    let headers = Disclosure::of(rules.header_style(settings.header_style), shown).to_headers();
    let refused = Refused::new(&rule.id, planned.quota, decision, headers).of_grpc_call(grpc);
    Conclusion::Respond {
        response: respond::answer_refusal(settings, rule, refused, grpc),
        refused_by: None,
    }
}

/// The charges of rules that count only some responses, the slots of concurrency rules and the
/// estimates of settled rules, left to the response (the answer is consumed: each charge becomes at
/// most one receipt). A slot is given back whatever the response, so a concurrency rule's
/// `count_when` does not apply. A request with a rule settled from what the handler reports
/// gets a [`CostMeter`] in its extensions.
fn left_to_response(
    rules: &RuleSet,
    plan: &Plan,
    items: &[Item<'_>],
    batch: BatchDecision,
    request: &mut Parts,
) -> Charges {
    let mut charges = Charges {
        cut: plan.cut.clone(),
        ..Charges::default()
    };
    for ((planned, rule), (item, answer)) in
        plan.rules(rules).zip(items.iter().zip(batch.into_items()))
    {
        if let Some(from) = &rule.settle {
            if from.is_reported() && charges.meter.is_none() {
                // One meter a request: an outer layer's, if it put one there, so the handler's
                // report reaches every layer's settled rules.
                let meter = match request.extensions.get::<CostMeter>() {
                    Some(meter) => meter.clone(),
                    None => {
                        let meter = CostMeter::new();
                        request.extensions.insert(meter.clone());
                        meter
                    }
                };
                charges.meter = Some(meter);
            }
            let settled = Settled {
                estimate: Estimate::new(item, answer),
                from: from.clone(),
                notices: Arc::clone(&rule.notices),
                actual: None,
            };
            charges.settled.push((settled, rule.count_when.clone()));
            continue;
        }
        let held = matches!(answer.charge(), Some(Charge::Held { .. }));
        let counts = rule.count_when.as_ref();
        if !held && counts.is_none() {
            continue;
        }
        let Some(receipt) = answer.into_receipt(item) else {
            continue;
        };
        match counts {
            Some(counts) if !held => charges.conditional.push((receipt, Arc::clone(counts))),
            _ => charges
                .held
                .push((receipt, rules.observers(planned.rule).cloned())),
        }
    }
    charges
}

/// The store could not answer: closed rules answer 503; every other rule lets the request
/// through (so do shadow and flag rules, which never stop a request). `Local` and `OpenWithin`
/// rules reach this point only with a plain store: a
/// `FallbackStore` (`tollgate_wrappers`) counts them in local memory and errs only for
/// closed rules.
fn store_failed(
    settings: &Settings,
    rules: &RuleSet,
    plan: &Plan,
    error: &StoreError,
    grpc: bool,
) -> Conclusion {
    // Each rule counted as its failure policy answers the request.
    for (planned, rule) in plan.rules(rules) {
        if let Some(observers) = rules.observers(planned.rule) {
            let closed = rule.on_store_failure == OnStoreFailure::Closed;
            observers.store_failed(!closed, rule.can_refuse());
        }
    }
    let closed = plan
        .rules(rules)
        .find(|(_, rule)| rule.can_refuse() && rule.on_store_failure == OnStoreFailure::Closed);
    match closed {
        Some((_, rule)) => {
            tracing::error!(
                target: "tollgate::store",
                rule = %rule.id,
                error = %error,
                "rate-limit store failed; the rule fails closed, answering 503"
            );
            Conclusion::Respond {
                response: respond::limiter_unavailable(settings, grpc),
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
                charges: Charges {
                    cut: plan.cut.clone(),
                    ..Charges::default()
                },
            }
        }
    }
}
