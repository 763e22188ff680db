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
//! * while the block bucket is empty, the rule refuses the caller and nothing is counted, with
//!   `Retry-After` saying when the block ends. The block is read in the request's own store
//!   call, as a read-only item ([`Mode::ReadOnly`](tollgate_core::Mode::ReadOnly)) beside the rules' items,
//!   so escalation costs no extra round trip for a request that is not refused; recording a
//!   strike after a refusal is one more call, for refused requests only.

use std::time::Duration;

use tollgate_core::{
    DerivedSuffix, Item, Key, Mode, OnStoreFailure, Quota, QuotaError, Rate, RuleId, RuleIdError,
};

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
    pub(crate) strikes_rule: RuleId,
    pub(crate) block_rule: RuleId,
}

impl Escalated {
    pub(crate) fn new(rule: &RuleId, escalation: Escalation) -> Result<Self, RuleIdError> {
        Ok(Escalated {
            escalation,
            strikes_rule: rule.derived(DerivedSuffix::Strikes)?,
            block_rule: rule.derived(DerivedSuffix::Block)?,
        })
    }

    /// The ids its strikes and block are counted under.
    pub(crate) fn rule_ids(&self) -> [&RuleId; 2] {
        [&self.strikes_rule, &self.block_rule]
    }

    pub(crate) fn block<'a>(&'a self, key: &'a Key) -> Item<'a> {
        Item::new(&self.block_rule, self.escalation.block, key)
    }

    /// The read of the block that goes with the request's own store call: a read-only item
    /// that refuses the request while the block bucket is empty, and charges nothing.
    pub(crate) fn block_gate<'a>(&'a self, key: &'a Key, policy: OnStoreFailure) -> Item<'a> {
        self.block(key)
            .with_mode(Mode::ReadOnly)
            .with_store_failure(policy)
    }

    pub(crate) fn strike<'a>(&'a self, key: &'a Key) -> Item<'a> {
        Item::new(&self.strikes_rule, self.escalation.strikes, key)
    }
}
