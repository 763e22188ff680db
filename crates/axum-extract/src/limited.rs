//! A typed limit enforced while extracting.

use std::marker::PhantomData;

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use http::request::Parts;

use crate::charge::{Check, charge};
use crate::{Charged, Limit, LimitRejection, Tollgate, TollgateSource};

/// Enforces limit `L` on the request's key (from [`Limit::key`]) before the handler runs; a
/// refusal answers `429` exactly as the layer would. Use `Option<Limited<L>>` for routes that
/// anonymous callers may use too: it is `None` only when the request has no key, never when the
/// caller is refused.
///
/// ```
/// # use std::time::Duration;
/// # use http::request::Parts;
/// # use tollgate_core::{Key, Quota, QuotaError};
/// use axum::{Extension, Router, routing::post};
/// use tollgate_axum::{Limit, Limited, Tollgate};
/// use tollgate_core::MemoryStore;
/// # #[derive(Clone)]
/// # struct AccountId(String);
/// # struct FollowsPerDay;
/// # impl Limit for FollowsPerDay {
/// #     const ID: &'static str = "follows-per-day";
/// #     fn default_quota() -> Result<Quota, QuotaError> {
/// #         Quota::sliding_window_counter(400, Duration::from_secs(86_400))
/// #     }
/// #     fn key(request: &Parts) -> Option<Key> {
/// #         request.extensions.get::<AccountId>().map(|account| Key::new(&account.0))
/// #     }
/// # }
///
/// async fn follow(_limit: Limited<FollowsPerDay>) -> &'static str {
///     "followed"
/// }
///
/// let app: Router = Router::new()
///     .route("/users/{id}/follow", post(follow))
///     .layer(Extension(Tollgate::new(MemoryStore::new())));
/// ```
pub struct Limited<L> {
    charged: Charged,
    limit: PhantomData<fn() -> L>,
}

impl<L> Limited<L> {
    /// What the check charged: the decision, headers to disclose, and the receipt to refund.
    pub fn charged(&self) -> &Charged {
        &self.charged
    }

    /// Settles a settled limit ([`Limit::settles`]) with the use's `actual` cost; see
    /// [`Charged::settle`].
    pub async fn settle(self, actual: u64) -> Result<(), tollgate_core::StoreError> {
        self.charged.settle(actual).await
    }

    /// Takes the charge back (for example when the operation turned out not to count); see
    /// [`Charged::refund`].
    pub async fn refund(self) -> Result<(), crate::RefundFailed> {
        self.charged.refund().await
    }
}

impl<L> std::fmt::Debug for Limited<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limited")
            .field("charged", &self.charged)
            .finish()
    }
}

/// Checks `L` for the request: `Ok(None)` when it has no key.
async fn extract<L: Limit>(
    parts: &Parts,
    tollgate: Tollgate,
) -> Result<Option<Limited<L>>, LimitRejection> {
    let Some(key) = L::key(parts) else {
        return Ok(None);
    };
    let check = Check::new::<L>(&tollgate, key, L::cost())?;
    let charged = charge(&tollgate, vec![check]).await?;
    Ok(Some(Limited {
        charged,
        limit: PhantomData,
    }))
}

impl<L: Limit, S: TollgateSource> FromRequestParts<S> for Limited<L> {
    type Rejection = LimitRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        extract::<L>(parts, state.tollgate(parts)?)
            .await?
            .ok_or_else(|| LimitRejection::missing_key(L::ID))
    }
}

impl<L: Limit, S: TollgateSource> OptionalFromRequestParts<S> for Limited<L> {
    type Rejection = LimitRejection;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &S,
    ) -> Result<Option<Self>, Self::Rejection> {
        extract::<L>(parts, state.tollgate(parts)?).await
    }
}
