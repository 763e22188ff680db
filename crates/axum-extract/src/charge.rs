//! Checking typed limits against the store, all or nothing, and what a charge leaves behind.

use http::HeaderMap;
use tollgate_core::{
    Decision, Item, Key, Mode, OnStoreFailure, Quota, Receipt, RuleId, StoreError,
};
use tollgate_tower::Refused;
use tollgate_tower::events::record_refusal;
use tollgate_tower::headers::PolicyReport;

use crate::{Limit, LimitRejection, Tollgate};

/// One typed limit, resolved for one key.
pub(crate) struct Check {
    rule: RuleId,
    quota: Quota,
    key: Key,
    cost: u64,
    mode: Mode,
    on_store_failure: OnStoreFailure,
}

impl Check {
    /// `L` for `key` at `cost`, with its live quota.
    pub(crate) fn new<L: Limit>(
        tollgate: &Tollgate,
        key: Key,
        cost: u64,
    ) -> Result<Check, LimitRejection> {
        let (rule, quota) = tollgate.resolve::<L>()?;
        Ok(Check {
            rule,
            quota,
            key,
            cost,
            mode: L::mode(),
            on_store_failure: L::on_store_failure(),
        })
    }

    fn item(&self) -> Item<'_> {
        Item::new(&self.rule, self.quota, &self.key)
            .with_cost(self.cost)
            .with_mode(self.mode)
            .with_store_failure(self.on_store_failure)
    }
}

/// Checks every limit in **one** all-or-nothing store call: all are charged, or none.
pub(crate) async fn charge(
    tollgate: &Tollgate,
    checks: Vec<Check>,
) -> Result<Charged, LimitRejection> {
    let items: Vec<Item<'_>> = checks.iter().map(Check::item).collect();
    let store = tollgate.store();
    let answer = match store.check_now(&items) {
        Some(answer) => answer,
        None => store.check(&items).await,
    };
    let batch = match answer {
        Ok(batch) => batch,
        Err(error) => return store_failed(tollgate, &checks, &error),
    };
    for (check, answer) in checks.iter().zip(batch.items()) {
        if !answer.decision().is_allowed() {
            let enforced = check.mode == Mode::Enforce;
            record_refusal(
                &check.rule,
                &check.key,
                answer.decision(),
                enforced,
                tollgate.logging(),
            );
        }
    }
    if let Some((position, answer)) = batch.worst_refusal(&items) {
        let check = &checks[position];
        let style = tollgate.header_style();
        let refused = Refused::for_policy(&check.rule, check.quota, *answer.decision(), style);
        return Err(LimitRejection::refused(refused));
    }
    let receipts = batch.receipts(&items);
    let decisions = checks
        .iter()
        .zip(batch.items())
        .map(|(check, answer)| (check.rule.clone(), check.quota, *answer.decision()))
        .collect();
    drop(items);
    Ok(Charged {
        tollgate: tollgate.clone(),
        receipts,
        decisions,
    })
}

/// The store could not answer: a limit that fails closed refuses with `503`; otherwise the
/// request goes ahead, uncharged.
fn store_failed(
    tollgate: &Tollgate,
    checks: &[Check],
    error: &StoreError,
) -> Result<Charged, LimitRejection> {
    let closed = checks.iter().find(|check| {
        check.mode == Mode::Enforce && check.on_store_failure == OnStoreFailure::Closed
    });
    if let Some(check) = closed {
        tracing::error!(target: "tollgate::store", rule = %check.rule, %error, "store failed; the limit fails closed");
        return Err(LimitRejection::store_unavailable(
            check.rule.as_str(),
            tollgate.retry_after_unavailable(),
        ));
    }
    tracing::warn!(target: "tollgate::store", %error, "store failed; the limits fail open");
    Ok(Charged {
        tollgate: tollgate.clone(),
        receipts: Vec::new(),
        decisions: Vec::new(),
    })
}

/// What an allowed check charged: each limit's decision, and receipts to take the charge back
/// ("count only failed logins": take up front, [`refund`](Charged::refund) on success).
#[derive(Clone)]
pub struct Charged {
    tollgate: Tollgate,
    receipts: Vec<Receipt>,
    decisions: Vec<(RuleId, Quota, Decision)>,
}

impl Charged {
    /// Each limit's policy, live quota and decision, in the order checked (empty when the store
    /// failed and the limits failed open).
    pub fn decisions(&self) -> impl Iterator<Item = (&RuleId, &Quota, &Decision)> {
        self.decisions
            .iter()
            .map(|(rule, quota, decision)| (rule, quota, decision))
    }

    /// The `RateLimit` / `RateLimit-Policy` fields for these limits, to put on the handler's
    /// response if it wants to disclose them.
    pub fn headers(&self) -> HeaderMap {
        let reports: Vec<PolicyReport<'_>> = self
            .decisions
            .iter()
            .map(|(rule, quota, decision)| PolicyReport::new(rule.as_str(), quota, decision))
            .collect();
        let mut headers = HeaderMap::new();
        self.tollgate.header_style().insert(&mut headers, &reports);
        headers
    }

    /// Takes back exactly what was charged.
    pub async fn refund(self) -> Result<(), StoreError> {
        let store = self.tollgate.store();
        for receipt in &self.receipts {
            match store.refund_now(receipt) {
                Some(result) => result?,
                None => store.refund(receipt).await?,
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for Charged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Charged")
            .field("decisions", &self.decisions)
            .field("receipts", &self.receipts.len())
            .finish()
    }
}
