//! Chirp's endpoints: stand-ins that answer a line of text, with the limits that live next to
//! their handlers.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tollgate::Key;
use tollgate::axum::{LimitRejection, Limited, Limiter};

use crate::identity::SignedIn;
use crate::limits::{Following, LoginAttempts, SmsPerPhone};

pub(crate) async fn feed(_: SignedIn) -> &'static str {
    "your feed\n"
}

pub(crate) async fn profile(_: SignedIn) -> &'static str {
    "a profile\n"
}

/// A report export: slow and expensive in production (tens of seconds of database work), which
/// is why `exports-in-flight` caps how many one account runs at once.
pub(crate) async fn export(_: SignedIn) -> &'static str {
    "your export\n"
}

pub(crate) async fn post(_: SignedIn) -> &'static str {
    "posted\n"
}

pub(crate) async fn follow(_: SignedIn, _following: Limited<Following>) -> &'static str {
    "followed\n"
}

pub(crate) async fn signup() -> &'static str {
    "welcome to Chirp\n"
}

/// Partners name themselves with `X-Api-Key`; without one there is no one to count.
pub(crate) async fn partner(headers: axum::http::HeaderMap) -> Response {
    if headers
        .get("x-api-key")
        .is_none_or(|key| key.as_bytes().trim_ascii().is_empty())
    {
        return (
            StatusCode::UNAUTHORIZED,
            "send your partner key in X-Api-Key\n",
        )
            .into_response();
    }
    "partner API\n".into_response()
}

/// A login attempt.
#[derive(Deserialize)]
pub(crate) struct Login {
    account: String,
    password: String,
}

/// Counts failed attempts per target account: a success gives its attempt back.
pub(crate) async fn login(
    limiter: Limiter,
    Json(login): Json<Login>,
) -> Result<Response, LimitRejection> {
    // One account, however it is written: attempts on `Ada@X.com ` count against `ada@x.com`.
    let account = login.account.trim().to_lowercase();
    if account.is_empty() {
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, "name the account\n").into_response());
    }
    let attempt = limiter.check::<LoginAttempts>(&Key::new(&account)).await?;
    // Stand-in credentials: the password "correct horse" opens every account.
    if login.password == "correct horse" {
        if let Err(error) = attempt.refund().await {
            eprintln!("chirp: could not give back a successful login's attempt: {error}");
        }
        return Ok("welcome back\n".into_response());
    }
    Ok((StatusCode::UNAUTHORIZED, "wrong password\n").into_response())
}

/// A request for a one-time code by SMS.
#[derive(Deserialize)]
pub(crate) struct Otp {
    phone: String,
}

/// Codes per phone number (the global cap is the layer's `otp-global` rule).
pub(crate) async fn otp(
    limiter: Limiter,
    Json(otp): Json<Otp>,
) -> Result<Response, LimitRejection> {
    let Some(phone) = phone_number(&otp.phone) else {
        let problem =
            "a phone number is 7 to 15 digits, optionally with +, spaces, dashes or brackets\n";
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, problem).into_response());
    };
    limiter.check::<SmsPerPhone>(&Key::new(&phone)).await?;
    Ok("code sent\n".into_response())
}

/// A phone number as one key however it is written: `+1 (555) 0199`, `+1-555-0199` and
/// `15550199` are all `+15550199` (E.164's digits; separators dropped).
fn phone_number(written: &str) -> Option<String> {
    let digits: String = written.chars().filter(char::is_ascii_digit).collect();
    let allowed = written
        .chars()
        .all(|c| c.is_ascii_digit() || " +-().".contains(c));
    (allowed && (7..=15).contains(&digits.len())).then(|| format!("+{digits}"))
}
