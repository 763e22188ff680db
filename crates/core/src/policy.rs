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
}

/// What a rule does when its store cannot answer (down, slow, unreachable). Chosen per rule, in
/// advance. The store-failure wrapper that carries these out arrives with the Redis store; the
/// choice is part of every rule from the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum OnStoreFailure {
    /// Allow the request (reads and browsing: users are not affected, protection is reduced).
    #[default]
    Open,
    /// Enforce the same rule in this gateway's own memory.
    Local,
    /// Refuse (the HTTP layer answers 503 with `Retry-After`): logins, SMS codes, payments.
    Closed,
}
