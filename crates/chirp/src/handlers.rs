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

pub(crate) async fn post(_: SignedIn) -> &'static str {
    "posted\n"
}

pub(crate) async fn follow(_: SignedIn, _following: Limited<Following>) -> &'static str {
    "followed\n"
}

pub(crate) async fn signup() -> &'static str {
    "welcome to Chirp\n"
}

pub(crate) async fn partner() -> &'static str {
    "partner API\n"
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
    let attempt = limiter
        .check::<LoginAttempts>(&Key::new(&login.account))
        .await?;
    // Stand-in credentials: the password "correct horse" opens every account.
    if login.password == "correct horse" {
        if let Err(error) = attempt.refund().await {
            tracing_free_log(&format!(
                "could not give back a successful login's attempt: {error}"
            ));
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
) -> Result<&'static str, LimitRejection> {
    limiter.check::<SmsPerPhone>(&Key::new(&otp.phone)).await?;
    Ok("code sent\n")
}

/// Where an example without a logger says something went wrong.
fn tracing_free_log(message: &str) {
    eprintln!("chirp: {message}");
}
