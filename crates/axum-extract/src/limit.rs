//! A typed limit, declared once next to the handlers it protects.

use http::request::Parts;
use tollgate_core::{Key, Mode, OnStoreFailure, Quota, QuotaError};

/// A business limit as a type: its policy id, default quota, how a request names its key, its
/// cost, mode and store-failure policy. The **live** quota comes from the
/// [`QuotaRegistry`](tollgate_tower::QuotaRegistry) shared with the layer; `default_quota`
/// applies while the registry has no entry for [`ID`](Limit::ID).
///
/// ```
/// use std::time::Duration;
/// use http::request::Parts;
/// use tollgate_axum::Limit;
/// use tollgate_core::{Key, OnStoreFailure, Quota, QuotaError};
///
/// #[derive(Clone)]
/// struct AccountId(String);
///
/// /// 400 follows a day per account.
/// struct FollowsPerDay;
///
/// impl Limit for FollowsPerDay {
///     const ID: &'static str = "follows-per-day";
///     fn default_quota() -> Result<Quota, QuotaError> {
///         Quota::sliding_window_counter(400, Duration::from_secs(86_400))
///     }
///     fn key(request: &Parts) -> Option<Key> {
///         request.extensions.get::<AccountId>().map(|account| Key::new(&account.0))
///     }
/// }
///
/// /// 10 login attempts per target account per 15 minutes; fails closed.
/// struct LoginAttemptsPerAccount;
///
/// impl Limit for LoginAttemptsPerAccount {
///     const ID: &'static str = "login-attempts-per-account";
///     fn default_quota() -> Result<Quota, QuotaError> {
///         Quota::sliding_window_log(10, Duration::from_secs(15 * 60))
///     }
///     fn on_store_failure() -> OnStoreFailure {
///         OnStoreFailure::Closed
///     }
/// }
/// ```
pub trait Limit: Send + Sync + 'static {
    /// The policy id: in headers, logs and stored keys (`A-Z a-z 0-9 _ - .`, at most 64 bytes).
    const ID: &'static str;

    /// The quota used while the registry has no entry for [`ID`](Limit::ID).
    fn default_quota() -> Result<Quota, QuotaError>;

    /// The key a request is counted under, for the [`Limited`](crate::Limited) extractor:
    /// `None` when the request has none (an anonymous caller). Limits checked through the
    /// [`Limiter`](crate::Limiter) handle are given their key and need not override this.
    fn key(request: &Parts) -> Option<Key> {
        let _ = request;
        None
    }

    /// What one use costs (default 1).
    fn cost() -> u64 {
        1
    }

    /// Whether a use's cost is known only afterwards (default: no). A settled limit's
    /// [`cost`](Limit::cost) (or the cost given to the check) is an **estimate**, checked after
    /// whatever the caller owes from earlier uses is paid (refused while anything is owed);
    /// the handler then calls [`Charged::settle`](crate::Charged::settle) (or
    /// [`Limited::settle`](crate::Limited::settle)) with the actual cost: more is charged as
    /// debt, less is given back. Not for concurrency or pacing quotas, which settle nothing.
    fn settles() -> bool {
        false
    }

    /// Enforce (default) or shadow: a shadow limit never refuses and records would-be refusals.
    fn mode() -> Mode {
        Mode::Enforce
    }

    /// What happens when the store cannot answer (default: open, the limit is not applied).
    fn on_store_failure() -> OnStoreFailure {
        OnStoreFailure::Open
    }
}
