//! The limits checked inside handlers, where their keys are found. Their quotas come from the
//! rule file's `[[limit]]` tables (the gateway does not start without them). The quotas below
//! apply only if a later edit of the file drops a table: the tightest possible, so a missing
//! table can never open anything.

use axum::http::request::Parts;
use tollgate::axum::Limit;
use tollgate::{Key, OnStoreFailure, Quota, QuotaError};

use crate::identity::Account;

/// A day: the window of the stand-in quotas.
const DAY: std::time::Duration = std::time::Duration::from_secs(86_400);

/// `[[limit]] id = "following"`: follows per account.
pub(crate) struct Following;

impl Limit for Following {
    const ID: &'static str = "following";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(1, DAY)
    }
    fn key(request: &Parts) -> Option<Key> {
        request
            .extensions
            .get::<Account>()
            .map(|account| Key::new(&account.0))
    }
}

/// `[[limit]] id = "login-attempts-per-account"`: failed logins per target account, whoever
/// tries; fails closed.
pub(crate) struct LoginAttempts;

impl Limit for LoginAttempts {
    const ID: &'static str = "login-attempts-per-account";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(1, DAY)
    }
    fn on_store_failure() -> OnStoreFailure {
        OnStoreFailure::Closed
    }
}

/// `[[limit]] id = "sms-per-phone"`: one-time codes per phone number; fails closed.
pub(crate) struct SmsPerPhone;

impl Limit for SmsPerPhone {
    const ID: &'static str = "sms-per-phone";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(1, DAY)
    }
    fn on_store_failure() -> OnStoreFailure {
        OnStoreFailure::Closed
    }
}

/// The ids the rule file must set.
pub(crate) const IN_THE_FILE: [&str; 3] = [Following::ID, LoginAttempts::ID, SmsPerPhone::ID];
