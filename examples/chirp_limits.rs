//! Business limits next to their handlers: Chirp's follow, login and SMS-code endpoints.
//!
//! `cargo run --features axum --example chirp_limits` builds the router and sends it a short
//! scripted session (in process, no network), printing what each caller is told:
//!
//! * `POST /users/{id}/follow`: 400 follows a day per account (`Limited<FollowsPerDay>`);
//! * `POST /login`: 10 failed attempts per **target** account per 15 minutes, whoever is
//!   trying; successful logins are refunded; fails closed when the store is down;
//! * `POST /sms-code`: 3 codes per phone number per hour, and at most 2,000 a second for
//!   everyone, checked together (all or nothing); fails closed.

#![allow(clippy::print_stdout)] // An example talks to its reader.

use std::time::Duration;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use tollgate::axum::{Limit, LimitRejection, Limited, Limiter, Tollgate};
use tollgate::core::{Key, MemoryStore, OnStoreFailure, Quota, QuotaError};
use tower::ServiceExt;

/// The signed-in account, as authentication middleware would insert it.
#[derive(Clone)]
struct AccountId(String);

/// 400 follows a day per account.
struct FollowsPerDay;

impl Limit for FollowsPerDay {
    const ID: &'static str = "follows-per-day";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::sliding_window_counter(400, Duration::from_secs(86_400))
    }
    fn key(request: &Parts) -> Option<Key> {
        request
            .extensions
            .get::<AccountId>()
            .map(|account| Key::new(&account.0))
    }
}

/// 10 failed login attempts per target account per 15 minutes.
struct LoginAttemptsPerAccount;

impl Limit for LoginAttemptsPerAccount {
    const ID: &'static str = "login-attempts-per-account";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::sliding_window_log(10, Duration::from_secs(15 * 60))
    }
    fn on_store_failure() -> OnStoreFailure {
        OnStoreFailure::Closed
    }
}

/// 3 SMS codes per phone number per hour (each one costs money).
struct SmsPerPhone;

impl Limit for SmsPerPhone {
    const ID: &'static str = "sms-per-phone";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(3, Duration::from_secs(3_600))
    }
    fn on_store_failure() -> OnStoreFailure {
        OnStoreFailure::Closed
    }
}

/// Never more than 2,000 SMS codes a second in total.
struct SmsGlobal;

impl Limit for SmsGlobal {
    const ID: &'static str = "sms-global";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(2_000, Duration::from_secs(1))
    }
    fn on_store_failure() -> OnStoreFailure {
        OnStoreFailure::Closed
    }
}

async fn follow(_follows: Limited<FollowsPerDay>) -> &'static str {
    "followed"
}

#[derive(serde::Deserialize)]
struct Login {
    account: String,
    password: String,
}

async fn login(limiter: Limiter, Json(login): Json<Login>) -> Result<Response, LimitRejection> {
    let attempt = limiter
        .check::<LoginAttemptsPerAccount>(&Key::new(&login.account))
        .await?;
    if login.password == "correct horse" {
        // Only failed attempts count.
        if let Err(error) = attempt.refund().await {
            eprintln!("could not refund a successful login: {error}");
        }
        return Ok("welcome".into_response());
    }
    Ok(StatusCode::UNAUTHORIZED.into_response())
}

#[derive(serde::Deserialize)]
struct SmsCode {
    phone: String,
}

async fn sms_code(
    limiter: Limiter,
    Json(request): Json<SmsCode>,
) -> Result<&'static str, LimitRejection> {
    limiter
        .all()
        .check::<SmsPerPhone>(&Key::new(&request.phone))
        .check::<SmsGlobal>(&Key::global())
        .run()
        .await?;
    Ok("code sent")
}

/// Stands in for authentication: the `x-account` header names the signed-in account.
async fn authenticate(mut request: Request, next: Next) -> Response {
    let account = request
        .headers()
        .get("x-account")
        .and_then(|value| value.to_str().ok());
    if let Some(account) = account.map(str::to_owned) {
        request.extensions_mut().insert(AccountId(account));
    }
    next.run(request).await
}

fn app() -> Router {
    Router::new()
        .route("/users/{id}/follow", post(follow))
        .route("/login", post(login))
        .route("/sms-code", post(sms_code))
        .layer(middleware::from_fn(authenticate))
        .layer(Extension(Tollgate::new(MemoryStore::new())))
}

async fn send(app: &Router, path: &str, account: Option<&str>, json: &str) -> StatusCode {
    let mut request = axum::http::Request::post(path).header("content-type", "application/json");
    if let Some(account) = account {
        request = request.header("x-account", account);
    }
    let request = request
        .body(axum::body::Body::from(json.to_owned()))
        .expect("a valid request");
    app.clone()
        .oneshot(request)
        .await
        .map_or(StatusCode::INTERNAL_SERVER_ERROR, |response| {
            response.status()
        })
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = app();

    let mut follows = Vec::new();
    for id in 0..402 {
        follows.push(
            send(
                &app,
                &format!("/users/{id}/follow"),
                Some("account-4821"),
                "",
            )
            .await,
        );
    }
    let allowed = follows.iter().filter(|status| status.is_success()).count();
    println!("follows: {allowed} allowed, then {}", follows[401]);

    for (attempt, password) in ["wrong", "wrong", "correct horse", "wrong"]
        .iter()
        .enumerate()
    {
        let body = format!(r#"{{"account":"victim@example.com","password":"{password}"}}"#);
        println!(
            "login attempt {}: {}",
            attempt + 1,
            send(&app, "/login", None, &body).await
        );
    }
    for attempt in 5..=13 {
        let body = r#"{"account":"victim@example.com","password":"guess"}"#;
        let status = send(&app, "/login", None, body).await;
        println!("login attempt {attempt}: {status}");
    }

    for attempt in 1..=4 {
        let status = send(&app, "/sms-code", None, r#"{"phone":"+15550100"}"#).await;
        println!("sms code {attempt} to +15550100: {status}");
    }
}
