//! Typed limits whose cost is known only after the work, over real HTTP: a handler checks an
//! estimate, does the work and settles with what it cost; the excess is owed and the caller's
//! next use waits for it; a use below its estimate gives the rest back; a refund gives the
//! estimate back.

#[path = "../../tower-layer/tests/common/mod.rs"]
mod common;

use std::time::Duration;

use axum::extract::Path;
use axum::routing::get;
use axum::{Extension, Router};
use common::server::{Reply, TestServer};
use http::StatusCode;
use http::request::Parts;
use tollgate_axum::{Limit, LimitRejection, Limited, Limiter, Tollgate};
use tollgate_core::{Item, Key, MemoryStore, Quota, QuotaError, Rate, RuleId, Store};
use tollgate_testing::ManualClock;

const LIMIT: u64 = 500;

/// 500 model tokens an hour per account, settled with what each answer used.
struct TokensPerHour;

impl Limit for TokensPerHour {
    const ID: &'static str = "tokens-per-hour";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::token_bucket(LIMIT, Rate::per_hour(LIMIT))
    }
    fn key(request: &Parts) -> Option<Key> {
        let account = request.headers.get("x-account")?.to_str().ok()?;
        Some(Key::new(account))
    }
    fn cost() -> u64 {
        100
    }
    fn settles() -> bool {
        true
    }
}

/// Checked through the `Limiter` handle, on an estimate of 100, and settled at `used`.
async fn complete(limiter: Limiter, Path(used): Path<u64>) -> Result<&'static str, LimitRejection> {
    let charged = limiter.check::<TokensPerHour>(&Key::new("acct-1")).await?;
    charged.settle(used).await.expect("memory settles");
    Ok("answer")
}

/// Checked, then refunded (the work did not happen).
async fn abandoned(limiter: Limiter) -> Result<&'static str, LimitRejection> {
    let charged = limiter.check::<TokensPerHour>(&Key::new("acct-1")).await?;
    charged.refund().await.expect("memory refunds");
    Ok("nothing done")
}

/// Checked while extracting, then settled.
async fn extracted(limit: Limited<TokensPerHour>, Path(used): Path<u64>) -> &'static str {
    limit.settle(used).await.expect("memory settles");
    "answer"
}

fn start() -> (ManualClock, MemoryStore<ManualClock>, Router) {
    let clock = ManualClock::new(tollgate_testing::conformance::START);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let app = Router::new()
        .route("/complete/{used}", get(complete))
        .route("/abandoned", get(abandoned))
        .route("/extracted/{used}", get(extracted))
        .layer(Extension(Tollgate::new(store.clone())));
    (clock, store, app)
}

async fn remaining(store: &MemoryStore<ManualClock>, account: &str) -> u64 {
    let (rule, key) = (
        RuleId::new(TokensPerHour::ID).expect("valid"),
        Key::new(account),
    );
    let item = Item::new(&rule, TokensPerHour::default_quota().expect("valid"), &key).with_cost(0);
    store.peek(&item).await.expect("memory answers").remaining()
}

#[tokio::test]
async fn an_excess_is_owed_and_the_next_use_waits_until_it_is_paid() {
    let (clock, store, app) = start();
    let server = TestServer::start(app).await;
    let get = |path: &'static str| Reply::send(server.client.get(server.url(path)));

    assert_eq!(get("/complete/900").await.status, StatusCode::OK);
    assert_eq!(
        remaining(&store, "acct-1").await,
        0,
        "settled before the answer"
    );
    let waits = get("/complete/1").await;
    assert_eq!(
        waits.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        waits.body
    );
    // 400 owed and 100 estimated: a whole allowance of 500 an hour.
    assert_eq!(waits.headers["retry-after"], "3600");
    clock.advance(Duration::from_secs(3_600));
    assert_eq!(get("/complete/100").await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_use_below_its_estimate_gives_the_rest_back_and_a_refund_all_of_it() {
    let (_clock, store, app) = start();
    let server = TestServer::start(app).await;
    let get = |path: &'static str| Reply::send(server.client.get(server.url(path)));

    assert_eq!(get("/complete/30").await.status, StatusCode::OK);
    assert_eq!(remaining(&store, "acct-1").await, LIMIT - 30);
    assert_eq!(get("/abandoned").await.status, StatusCode::OK);
    assert_eq!(
        remaining(&store, "acct-1").await,
        LIMIT - 30,
        "refunded whole"
    );
}

#[tokio::test]
async fn the_extractor_settles_too() {
    let (_clock, store, app) = start();
    let server = TestServer::start(app).await;
    let reply = Reply::send(
        server
            .client
            .get(server.url("/extracted/250"))
            .header("x-account", "acct-2"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(remaining(&store, "acct-2").await, LIMIT - 250);
}
