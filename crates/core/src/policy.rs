//! What a rule does with its decision, and what it does when the store is gone.

/// Whether a rule refuses or only reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Refusals are real.
    #[default]
    Enforce,
    /// The rule never refuses: it is evaluated as if enforced on its own, charged only when the
    /// request goes ahead and it would have allowed it, and its would-be refusals are reported.
    /// Roll new or tighter limits out this way first.
    Shadow,
    /// Read only: the item is checked at its cost and **never charged**, but a refusal stops
    /// the request like an enforcing item's, so nothing else in the batch is charged either.
    /// For a condition that must hold before anything is counted, read in the same store call:
    /// a block set by escalation (a token bucket of one token that a block empties).
    ReadOnly,
}

/// What a rule does when its store cannot answer (down, slow, unreachable). Chosen per rule, in
/// advance, and carried by every [`Item`](crate::Item).
///
/// A store on its own only reports the failure (a [`StoreError`](crate::StoreError), never a
/// refusal). `FallbackStore` carries these choices out: it wraps any
/// primary store, gives every call a timeout and a circuit breaker, and answers each item by its
/// own choice when the primary cannot. Middleware given a plain store that fails can only tell
/// open from closed; `Local` and `OpenWithin` need the wrapper's local memory.
///
/// ```
/// use tollgate_core::{OnStoreFailure, Quota, Rate};
///
/// // Reads: stay open, but never more than 50 a second per caller from any one gateway.
/// let reads = OnStoreFailure::OpenWithin(Quota::token_bucket(50, Rate::per_second(50))?);
/// assert_ne!(reads, OnStoreFailure::Open);
/// assert_eq!(OnStoreFailure::default(), OnStoreFailure::Open);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Exhaustive on purpose: every store wrapper decides each policy, so a new one must be a
/// compile error in each, never a silent default arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OnStoreFailure {
    /// Allow the request, uncharged (reads and browsing: users are not affected, protection is
    /// reduced).
    #[default]
    Open,
    /// Allow the request unless this gateway's own count under the given quota refuses: open, but
    /// with a local per-gateway limit (counted in local memory under the same rule id and key),
    /// so one gateway cannot be flooded while the shared store is away. Set it looser than the
    /// rule's own quota, or a little tighter than the rule's quota divided by the number of
    /// gateways, as the rule needs.
    OpenWithin(crate::Quota),
    /// Enforce the same rule (same quota, cost and mode) in this gateway's own memory. With `n`
    /// gateways, a caller spread over all of them gets up to `n` times the quota during an outage.
    Local,
    /// Fail: the store error is returned and the HTTP layer answers 503 with `Retry-After`
    /// (logins, SMS codes, payments). Only enforcing rules fail closed; a shadow rule never
    /// stops a request.
    Closed,
}
