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

/// `[[limit]] id = "sms-per-phone"`: one-time codes per phone number (E.164); refused past
/// it. Counts in the gateway's memory while the store is down.
pub(crate) struct SmsPerPhone;

impl Limit for SmsPerPhone {
    const ID: &'static str = "sms-per-phone";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(1, DAY)
    }
    fn on_store_failure() -> OnStoreFailure {
        OnStoreFailure::Local
    }
}

/// `[[limit]] id = "sms-per-range"`: one-time codes per number range (the number but its last
/// four digits, where premium-rate numbers cluster); challenged past it. Counts in the
/// gateway's memory while the store is down.
pub(crate) struct SmsPerRange;

impl Limit for SmsPerRange {
    const ID: &'static str = "sms-per-range";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(1, DAY)
    }
    fn on_store_failure() -> OnStoreFailure {
        OnStoreFailure::Local
    }
}

/// `[[limit]] id = "sms-per-requester"`: one-time codes per signed-in account, or per device
/// when no one is signed in; challenged past it. Counts in the gateway's memory while the
/// store is down.
pub(crate) struct SmsPerRequester;

impl Limit for SmsPerRequester {
    const ID: &'static str = "sms-per-requester";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(1, DAY)
    }
    fn on_store_failure() -> OnStoreFailure {
        OnStoreFailure::Local
    }
}

/// The limits Chirp's handlers check, by `[[limit]]` id, with what each does while the store is
/// down (set in code, beside the handler): the rule file must set a quota for each.
///
/// ```
/// use tollgate::OnStoreFailure;
/// assert!(chirp::typed_limits().contains(&("sms-per-phone", OnStoreFailure::Local)));
/// ```
pub fn typed_limits() -> [(&'static str, OnStoreFailure); 5] {
    [
        (Following::ID, Following::on_store_failure()),
        (LoginAttempts::ID, LoginAttempts::on_store_failure()),
        (SmsPerPhone::ID, SmsPerPhone::on_store_failure()),
        (SmsPerRange::ID, SmsPerRange::on_store_failure()),
        (SmsPerRequester::ID, SmsPerRequester::on_store_failure()),
    ]
}
