//! Proof of a charge, enough to undo exactly that charge.

use crate::{Key, Quota, RuleId, Timestamp};

/// What one charge did to one caller's state, in the algorithm's own terms.
///
/// Refunding "by rule, key and cost" is wrong once a window has rolled over: the charge must be
/// taken back from the window it went into, or the log entry it created. A `Charge` says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Charge {
    /// Token bucket, GCRA or pacing: the theoretical arrival time moved this many µs later.
    Scheduled {
        /// µs added (cost × emission interval).
        micros: u64,
    },
    /// Fixed window or sliding window counter: `cost` went into window number `window`
    /// (windows are numbered from the Unix epoch).
    Window {
        /// The window's number: its start divided by its length.
        window: u64,
        /// The cost charged.
        cost: u64,
    },
    /// Sliding window log: an entry of `cost` logged at `at`.
    Logged {
        /// When the entry was logged (store time).
        at: Timestamp,
        /// The cost charged.
        cost: u64,
    },
}

/// A charge and whose it was: give it to [`Store::refund`](crate::Store::refund) to undo it
/// (for example, "count only failed logins": take up front, refund on success).
///
/// Receipts are built on demand from a [`BatchDecision`](crate::BatchDecision), so a check that
/// needs no refund allocates none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Receipt {
    rule: RuleId,
    key: Key,
    quota: Quota,
    charge: Charge,
}

impl Receipt {
    /// A receipt for `charge` on `rule` and `key` under `quota`.
    pub fn new(rule: RuleId, key: Key, quota: Quota, charge: Charge) -> Self {
        Receipt {
            rule,
            key,
            quota,
            charge,
        }
    }

    /// The rule charged.
    pub fn rule(&self) -> &RuleId {
        &self.rule
    }

    /// The key charged.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The quota in force when charged.
    pub fn quota(&self) -> &Quota {
        &self.quota
    }

    /// What the charge did.
    pub fn charge(&self) -> &Charge {
        &self.charge
    }
}
