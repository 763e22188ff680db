//! Checking typed limits against the store, all or nothing, and what a charge leaves behind.

use http::HeaderMap;
use tollgate_core::{
    Decision, Estimate, Item, Key, Mode, OnStoreFailure, Quota, Receipt, RefundNow, RuleId, Store,
    StoreError, Take,
};
use tollgate_tower::Refused;
use tollgate_tower::observe::RuleObservers;

use crate::{Limit, LimitRejection, Tollgate};

/// One typed limit, resolved for one key.
pub(crate) struct Check {
    rule: RuleId,
    quota: Quota,
    key: Key,
    cost: u64,
    mode: Mode,
    on_store_failure: OnStoreFailure,
    take: Take,
    observers: RuleObservers,
}

impl Check {
    /// `L` for `key` at `cost`, with its live quota.
    pub(crate) fn new<L: Limit>(
        tollgate: &Tollgate,
        key: Key,
        cost: u64,
    ) -> Result<Check, LimitRejection> {
        let resolved = tollgate.resolve::<L>()?;
        // A settled limit's estimate is at least 1: each use in flight holds a unit.
        let cost = if L::settles() { cost.max(1) } else { cost };
        Ok(Check {
            rule: resolved.rule,
            quota: resolved.quota,
            key,
            cost,
            mode: L::mode(),
            on_store_failure: L::on_store_failure(),
            take: if L::settles() {
                Take::AfterDebt
            } else {
                Take::Exact
            },
            observers: resolved.observers,
        })
    }

    fn item(&self) -> Item<'_> {
        Item::new(&self.rule, self.quota, &self.key)
            .with_cost(self.cost)
            .with_mode(self.mode)
            .with_store_failure(self.on_store_failure)
            .with_take(self.take)
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
        let (decision, enforcing) = (answer.decision(), check.item().is_enforcing());
        check
            .observers
            .decided(decision, enforcing, answer.refused_locally());
        if !decision.is_allowed() {
            check
                .observers
                .refused(&check.key, decision, enforcing, tollgate.logging());
        }
    }
    if let Some((position, answer)) = batch.worst_refusal(&items) {
        let check = &checks[position];
        let style = tollgate.header_style();
        // A refusal was counted somewhere: under the local quota when a fallback counted it.
        let quota = answer
            .counted_quota(&items[position])
            .unwrap_or(check.quota);
        let refused = Refused::for_policy(&check.rule, quota, *answer.decision(), style);
        return Err(LimitRejection::refused(refused, tollgate.responder()));
    }
    // Only what was counted is shown: a limit let through uncounted has no numbers to tell.
    let decisions = checks
        .iter()
        .zip(items.iter().zip(batch.items()))
        .filter_map(|(check, (item, answer))| {
            Some((
                check.rule.clone(),
                answer.counted_quota(item)?,
                *answer.decision(),
            ))
        })
        .collect();
    // A settled limit keeps its estimate to settle; the others their receipts to refund.
    let (mut receipts, mut estimates) = (Vec::new(), Vec::new());
    for (item, answer) in items.iter().zip(batch.into_items()) {
        if item.take() == Take::AfterDebt {
            estimates.push(Estimate::new(item, answer));
        } else {
            receipts.extend(answer.into_receipt(item));
        }
    }
    drop(items);
    Ok(Charged {
        tollgate: tollgate.clone(),
        receipts,
        estimates,
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
        check.item().is_enforcing() && check.on_store_failure == OnStoreFailure::Closed
    });
    if let Some(check) = closed {
        tracing::error!(target: "tollgate::store", rule = %check.rule, %error, "store failed; the limit fails closed");
        return Err(LimitRejection::store_unavailable(
            check.rule.as_str(),
            tollgate.retry_after_unavailable(),
            error.clone(),
        ));
    }
    tracing::warn!(target: "tollgate::store", %error, "store failed; the limits fail open");
    // Nothing was counted, so nothing settles: the limits were not applied to this use.
    Ok(Charged {
        tollgate: tollgate.clone(),
        receipts: Vec::new(),
        estimates: Vec::new(),
        decisions: Vec::new(),
    })
}

/// What an allowed check charged: each limit's decision, receipts to take the charge back
/// ("count only failed logins": take up front, [`refund`](Charged::refund) on success), and the
/// estimates of settled limits ([`Limit::settles`]) to [`settle`](Charged::settle) with the
/// actual cost.
///
/// Not `Clone`: a charge is refunded or settled at most once.
pub struct Charged {
    tollgate: Tollgate,
    receipts: Vec<Receipt>,
    estimates: Vec<Estimate>,
    decisions: Vec<(RuleId, Quota, Decision)>,
}

impl Charged {
    /// Each limit's policy, the quota it was counted under and its decision, in the order
    /// checked; limits that were not counted (the store failed and they fail open) are left
    /// out, so nothing here claims a count that was not made.
    pub fn decisions(&self) -> impl Iterator<Item = (&RuleId, &Quota, &Decision)> {
        self.decisions
            .iter()
            .map(|(rule, quota, decision)| (rule, quota, decision))
    }

    /// The `RateLimit` / `RateLimit-Policy` fields for these limits, to put on the handler's
    /// response if it wants to disclose them.
    pub fn headers(&self) -> HeaderMap {
        self.tollgate.header_style().fields(
            self.decisions
                .iter()
                .map(|(rule, quota, decision)| (rule.as_str(), quota, decision)),
        )
    }

    /// Settles the settled limits ([`Limit::settles`]) with the use's `actual` cost: what it
    /// was above the estimate is charged as debt (the caller's next uses pay it before they are
    /// admitted), what it was below is given back (see `tollgate_core::Estimate`). The other
    /// limits' charges stand. An error is the store's: the estimates not yet settled stand.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use tollgate_axum::{Limit, LimitRejection, Limiter};
    /// use tollgate_core::{Key, Quota, QuotaError, Rate};
    ///
    /// /// 100,000 model tokens a minute per account, settled with what each answer used.
    /// struct TokensPerMinute;
    /// impl Limit for TokensPerMinute {
    ///     const ID: &'static str = "tokens-per-minute";
    ///     fn default_quota() -> Result<Quota, QuotaError> {
    ///         Quota::token_bucket(100_000, Rate::per_minute(100_000))
    ///     }
    ///     fn settles() -> bool {
    ///         true
    ///     }
    /// }
    ///
    /// async fn complete(limiter: Limiter, account: String) -> Result<String, LimitRejection> {
    ///     let charged = limiter.check_cost::<TokensPerMinute>(&Key::new(&account), 500).await?;
    ///     let (answer, used) = ("...".to_owned(), 912);
    ///     if let Err(error) = charged.settle(used).await {
    ///         tracing::warn!(%error, "the estimate stands");
    ///     }
    ///     Ok(answer)
    /// }
    /// # let _ = complete;
    /// ```
    pub async fn settle(mut self, actual: u64) -> Result<(), StoreError> {
        let store = self.tollgate.store();
        for estimate in std::mem::take(&mut self.estimates) {
            estimate.settle(store, actual).await?;
        }
        Ok(())
    }

    /// Takes back what was charged (as much as the limits' state still holds: see
    /// `tollgate_core::Store::refund`); a settled limit's estimate is given back too (settled
    /// at 0, after the other charges: if that fails, the estimate stands). When the store fails, the error carries the charges not
    /// yet refunded: refunding them again is safe, a charge is never given back twice.
    pub async fn refund(mut self) -> Result<(), RefundFailed> {
        let store = self.tollgate.store();
        let receipts = std::mem::take(&mut self.receipts);
        let mut receipts = receipts.into_iter();
        while let Some(receipt) = receipts.next() {
            let done = match store.refund_now(receipt) {
                RefundNow::Done(done) => done,
                RefundNow::Later(receipt) => store.refund(receipt).await,
            };
            if let Err(failed) = done {
                let (error, receipt) = failed.into_parts();
                self.receipts = std::iter::once(receipt).chain(receipts).collect();
                return Err(RefundFailed {
                    error,
                    unrefunded: self,
                });
            }
        }
        let estimates = std::mem::take(&mut self.estimates);
        for estimate in estimates {
            if let Err(error) = estimate.settle(store, 0).await {
                return Err(RefundFailed {
                    error,
                    unrefunded: self,
                });
            }
        }
        Ok(())
    }
}

/// A [`Charged::refund`] the store could not complete, with what is left to refund.
///
/// ```
/// use tollgate_axum::{Charged, RefundFailed};
///
/// // Try once more, then give up (the caller keeps the charge: stricter, never more generous).
/// async fn refund_or_retry(charged: Charged) {
///     if let Err(failed) = charged.refund().await {
///         tracing::warn!(error = %failed, "refund failed; retrying once");
///         let _ = failed.into_unrefunded().refund().await;
///     }
/// }
/// # let _ = refund_or_retry;
/// ```
#[derive(Debug, thiserror::Error)]
#[error("could not refund a typed limit's charge: {error}")]
pub struct RefundFailed {
    #[source]
    error: StoreError,
    unrefunded: Charged,
}

impl RefundFailed {
    /// What the store said.
    pub fn error(&self) -> &StoreError {
        &self.error
    }

    /// The charges not yet refunded, to [`refund`](Charged::refund) again.
    pub fn into_unrefunded(self) -> Charged {
        self.unrefunded
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
