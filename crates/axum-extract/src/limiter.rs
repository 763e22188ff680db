//! A limiter handle for keys known only inside the handler.

use axum::extract::FromRequestParts;
use http::request::Parts;
use tollgate_core::Key;

use crate::charge::{Check, charge};
use crate::{Charged, Limit, LimitRejection, Tollgate, TollgateSource};

/// Checks typed limits on keys the handler finds itself — the target account of a login from
/// the parsed body, the phone number an SMS code goes to. A refusal converts into the layer's
/// `429` response with `?`.
///
/// ```
/// # use std::time::Duration;
/// # use tollgate_core::{Key, OnStoreFailure, Quota, QuotaError};
/// use axum::Json;
/// use axum::response::{IntoResponse, Response};
/// use tollgate_axum::{Limit, LimitRejection, Limiter};
/// # struct LoginAttemptsPerAccount;
/// # impl Limit for LoginAttemptsPerAccount {
/// #     const ID: &'static str = "login-attempts-per-account";
/// #     fn default_quota() -> Result<Quota, QuotaError> {
/// #         Quota::sliding_window_log(10, Duration::from_secs(900))
/// #     }
/// #     fn on_store_failure() -> OnStoreFailure { OnStoreFailure::Closed }
/// # }
/// # fn password_is_right(_: &str, _: &str) -> bool { true }
///
/// #[derive(serde::Deserialize)]
/// struct Login { account: String, password: String }
///
/// async fn login(limiter: Limiter, Json(login): Json<Login>) -> Result<Response, LimitRejection> {
///     // Count attempts per target account, whoever is trying...
///     let attempt = limiter.check::<LoginAttemptsPerAccount>(&Key::new(&login.account)).await?;
///     if password_is_right(&login.account, &login.password) {
///         // ...but only failed ones.
///         let _ = attempt.refund().await;
///         return Ok("welcome".into_response());
///     }
///     Ok(http::StatusCode::UNAUTHORIZED.into_response())
/// }
/// ```
#[derive(Clone, Debug)]
pub struct Limiter {
    tollgate: Tollgate,
}

impl Limiter {
    /// Charges limit `L` once for `key`.
    pub async fn check<L: Limit>(&self, key: &Key) -> Result<Charged, LimitRejection> {
        self.check_cost::<L>(key, L::cost()).await
    }

    /// Charges limit `L` `cost` units for `key`.
    pub async fn check_cost<L: Limit>(
        &self,
        key: &Key,
        cost: u64,
    ) -> Result<Charged, LimitRejection> {
        let check = Check::new::<L>(&self.tollgate, key.clone(), cost)?;
        charge(&self.tollgate, vec![check]).await
    }

    /// Starts an all-or-nothing check of several limits: if any refuses, none is charged.
    pub fn all(&self) -> Checks<'_> {
        Checks {
            limiter: self,
            checks: Ok(Vec::new()),
        }
    }
}

/// Several limits checked in one all-or-nothing store call; see [`Limiter::all`].
///
/// ```
/// # use std::time::Duration;
/// # use tollgate_core::{Key, Quota, QuotaError};
/// use tollgate_axum::{Limit, LimitRejection, Limiter};
/// # struct SmsPerPhone;
/// # impl Limit for SmsPerPhone {
/// #     const ID: &'static str = "sms-per-phone";
/// #     fn default_quota() -> Result<Quota, QuotaError> { Quota::fixed_window(3, Duration::from_secs(3600)) }
/// # }
/// # struct SmsGlobal;
/// # impl Limit for SmsGlobal {
/// #     const ID: &'static str = "sms-global";
/// #     fn default_quota() -> Result<Quota, QuotaError> { Quota::fixed_window(2000, Duration::from_secs(1)) }
/// # }
///
/// async fn send_code(limiter: Limiter, phone: String) -> Result<&'static str, LimitRejection> {
///     limiter
///         .all()
///         .check::<SmsPerPhone>(&Key::new(&phone))
///         .check::<SmsGlobal>(&Key::global())
///         .run()
///         .await?;
///     Ok("code sent")
/// }
/// ```
pub struct Checks<'l> {
    limiter: &'l Limiter,
    checks: Result<Vec<Check>, LimitRejection>,
}

impl Checks<'_> {
    /// Adds limit `L` for `key` at its usual cost.
    #[must_use]
    pub fn check<L: Limit>(self, key: &Key) -> Self {
        self.check_cost::<L>(key, L::cost())
    }

    /// Adds limit `L` for `key` at `cost`.
    #[must_use]
    pub fn check_cost<L: Limit>(mut self, key: &Key, cost: u64) -> Self {
        let tollgate = &self.limiter.tollgate;
        self.checks = self.checks.and_then(|mut checks| {
            checks.push(Check::new::<L>(tollgate, key.clone(), cost)?);
            Ok(checks)
        });
        self
    }

    /// Checks every limit added, all or nothing.
    pub async fn run(self) -> Result<Charged, LimitRejection> {
        charge(&self.limiter.tollgate, self.checks?).await
    }
}

impl<S: TollgateSource> FromRequestParts<S> for Limiter {
    type Rejection = LimitRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Limiter {
            tollgate: state.tollgate(parts)?,
        })
    }
}
