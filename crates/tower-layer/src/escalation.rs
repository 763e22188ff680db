//! Escalation: a caller that keeps sending after refusals is blocked for longer.
//!
//! Both the strikes and the block live in the store, under rule ids derived from the rule's
//! (`<id>.strikes`, `<id>.block`), so every gateway sharing the store enforces a block that any
//! one of them imposed:
//!
//! * each refusal by an escalating rule charges one strike (a fixed window of `within`);
//! * a refusal that finds the strikes used up (more than `after_refusals` refusals within the
//!   window) empties the block bucket, a token bucket of one token that comes back after
//!   `block_for`;
//! * while the block bucket is empty, the rule refuses the caller before anything is counted,
//!   with `Retry-After` saying when the block ends.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tollgate_core::{
    Decision, Item, Key, Quota, QuotaError, Rate, RuleId, RuleIdError, Store, StoreError,
};

use crate::Rule;
use crate::layer::Core;
use crate::plan::{Plan, is_enforcing};
use crate::route::RuleSet;
use crate::settings::KeyLogging;

/// How a rule escalates: after `after_refusals` refusals within `within`, the caller is blocked
/// for `block_for`.
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{Quota, Rate};
/// use tollgate_tower::key::PeerIp;
/// use tollgate_tower::{Escalation, Rule};
///
/// // More than 20 refusals in a minute: blocked for an hour.
/// let hammering = Escalation::new(20, Duration::from_secs(60), Duration::from_secs(3_600))?;
/// let reads = Rule::new("reads", Quota::token_bucket(50, Rate::per_second(10))?, PeerIp::new())?
///     .escalate(hammering)?;
/// # let _ = reads;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Escalation {
    strikes: Quota,
    block: Quota,
}

impl Escalation {
    /// Blocks a caller for `block_for` once it has been refused more than `after_refusals`
    /// times within `within`.
    pub fn new(
        after_refusals: u64,
        within: Duration,
        block_for: Duration,
    ) -> Result<Self, QuotaError> {
        Ok(Escalation {
            strikes: Quota::fixed_window(after_refusals, within)?,
            block: Quota::token_bucket(1, Rate::every(block_for))?,
        })
    }
}

/// An escalation attached to a rule, with the rule ids its state lives under.
#[derive(Debug, Clone)]
pub(crate) struct Escalated {
    escalation: Escalation,
    strikes_rule: RuleId,
    block_rule: RuleId,
}

impl Escalated {
    pub(crate) fn new(rule: &RuleId, escalation: Escalation) -> Result<Self, RuleIdError> {
        Ok(Escalated {
            escalation,
            strikes_rule: RuleId::new(&format!("{rule}.strikes"))?,
            block_rule: RuleId::new(&format!("{rule}.block"))?,
        })
    }

    fn block<'a>(&'a self, key: &'a Key) -> Item<'a> {
        Item::new(&self.block_rule, self.escalation.block, key)
    }

    fn strike<'a>(&'a self, key: &'a Key) -> Item<'a> {
        Item::new(&self.strikes_rule, self.escalation.strikes, key)
    }
}

/// The first enforcing rule of `plan` whose caller is blocked: its position in the plan and a
/// refusal lasting until the block ends.
pub(crate) async fn blocked<St: Store>(
    store: &St,
    rules: &RuleSet,
    plan: &Plan,
) -> Result<Option<(usize, Decision)>, StoreError> {
    for (position, (planned, rule)) in plan.rules(rules).enumerate() {
        let Some(escalated) = rule.escalation.as_ref() else {
            continue;
        };
        if !is_enforcing(rule) {
            continue;
        }
        let block = store.peek(&escalated.block(&planned.key)).await?;
        if !block.is_allowed() {
            let until = block.retry_after();
            let limit = planned.quota.limit();
            let refusal =
                Decision::refused(tollgate_core::Refusal::LimitReached, limit, 0, until, until);
            return Ok(Some((position, refusal)));
        }
    }
    Ok(None)
}

/// Records a refusal of `key` by `rule`: one strike, and a block once the strikes run out.
/// The same future is polled once here and, if the store cannot answer at once, finished in a
/// spawned task, so a strike is never sent twice.
pub(crate) fn record_refusal<St: Store>(
    core: &Arc<Core<St>>,
    rule: &Rule,
    key: &Key,
    logging: KeyLogging,
) {
    let Some(escalated) = rule.escalation.clone() else {
        return;
    };
    let (core, key) = (Arc::clone(core), key.clone());
    let mut recording = Box::pin(async move {
        if let Err(error) = strike(&core.store, &escalated, &key, logging).await {
            log_failure(&escalated, &error);
        }
    });
    let first_poll = recording
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
    if first_poll.is_pending() {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(recording)),
            Err(_) => tracing::warn!(
                target: "tollgate::store",
                "no tokio runtime to finish recording an escalation strike on"
            ),
        }
    }
}

async fn strike<St: Store>(
    store: &St,
    escalated: &Escalated,
    key: &Key,
    logging: KeyLogging,
) -> Result<(), StoreError> {
    let strike = store.check_one(&escalated.strike(key)).await?;
    if !strike.decision().is_allowed() {
        store.check_one(&escalated.block(key)).await?;
        tracing::warn!(
            target: "tollgate::refusal",
            rule = %escalated.block_rule,
            key = %logging.show(key),
            "caller kept sending after refusals and is blocked"
        );
    }
    Ok(())
}

fn log_failure(escalated: &Escalated, error: &StoreError) {
    tracing::warn!(
        target: "tollgate::store",
        rule = %escalated.strikes_rule,
        error = %error,
        "could not record a strike for escalation"
    );
}

/// Polls `future` once: its output if it is ready at once (the in-memory store's futures are).
pub(crate) fn poll_now<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}
