//! One rule's part of one request, as sent to a store.

use crate::{Key, Mode, OnStoreFailure, Quota, RuleId};

/// What a store needs to decide one rule for one request: the rule id, the **full quota and
/// algorithm** (so per-key and per-plan quotas — a partner's contract — need no new API), the
/// key, the cost, the mode and the store-failure policy.
///
/// Items borrow the rule id and key, so building one allocates nothing.
///
/// ```
/// use tollgate_core::{Item, Key, Mode, Quota, Rate, RuleId};
///
/// let rule = RuleId::new("search")?;
/// let key = Key::new("user77");
/// let quota = Quota::token_bucket(20, Rate::per_second(2))?;
/// let item = Item::new(&rule, quota, &key).with_cost(10).with_mode(Mode::Shadow);
/// assert_eq!(item.cost(), 10);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    rule: &'a RuleId,
    quota: Quota,
    key: &'a Key,
    cost: u64,
    mode: Mode,
    on_store_failure: OnStoreFailure,
}

impl<'a> Item<'a> {
    /// An enforcing item of cost 1 that fails open.
    pub fn new(rule: &'a RuleId, quota: Quota, key: &'a Key) -> Self {
        Item {
            rule,
            quota,
            key,
            cost: 1,
            mode: Mode::Enforce,
            on_store_failure: OnStoreFailure::Open,
        }
    }

    /// Sets the cost (how many units this request takes). A cost of zero charges nothing and
    /// always passes; a cost above the quota's limit is refused with
    /// [`Refusal::CostExceedsLimit`](crate::Refusal::CostExceedsLimit).
    #[must_use]
    pub fn with_cost(mut self, cost: u64) -> Self {
        self.cost = cost;
        self
    }

    /// Sets the mode.
    #[must_use]
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the store-failure policy.
    #[must_use]
    pub fn with_store_failure(mut self, policy: OnStoreFailure) -> Self {
        self.on_store_failure = policy;
        self
    }

    /// The rule id.
    pub fn rule(&self) -> &'a RuleId {
        self.rule
    }

    /// The quota.
    pub fn quota(&self) -> &Quota {
        &self.quota
    }

    /// The key.
    pub fn key(&self) -> &'a Key {
        self.key
    }

    /// The cost.
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether this item can refuse the request (an enforcing or a read-only item).
    pub fn is_enforcing(&self) -> bool {
        matches!(self.mode, Mode::Enforce | Mode::Gate)
    }

    /// Whether this item is only read, never charged ([`Mode::Gate`]).
    pub fn is_read_only(&self) -> bool {
        self.mode == Mode::Gate
    }

    /// Whether an allowed check charges this item at once (an enforcing item; a shadow item is
    /// charged only once the request goes ahead, a read-only one never).
    pub(crate) fn charges_at_once(&self) -> bool {
        self.mode == Mode::Enforce
    }

    /// The store-failure policy.
    pub fn on_store_failure(&self) -> OnStoreFailure {
        self.on_store_failure
    }
}
