//! Escalation costs one store call per request — the block is read in the request's own call —
//! and, behind `FallbackStore`, an outage of Redis and its recovery leave the breaker closed
//! again: no dropped read takes the breaker's single probe. Real HTTP, a real redis-server.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use tollgate::core::FallbackStore;
use tollgate::redis::RedisStore;
use tollgate::tower::key::PeerIp;
use tollgate::tower::{Escalation, RateLimitLayer, Rule};
use tollgate::{
    BatchDecision, Decision, Item, Key, OnStoreFailure, Quota, Rate, Receipt, RefundError, RuleId,
    Store, StoreError,
};
use tollgate_redis_harness::RedisServer;

/// A store that counts the calls made to it and passes them on.
#[derive(Clone)]
struct Counting<S> {
    inner: S,
    checks: Arc<AtomicU64>,
}

impl<S: Store> Store for Counting<S> {
    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.inner.check(items).await
    }
    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.inner.peek(item).await
    }
    async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
        self.inner.refund(receipt).await
    }
    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        self.inner.reset(rule, key).await
    }
    fn capabilities(&self) -> tollgate::Capabilities {
        self.inner.capabilities()
    }
}

type Guarded = FallbackStore<Counting<RedisStore>>;

/// A gateway with one escalating rule (`limit` an hour per peer; more than 2 refusals a minute
/// block for an hour) that counts locally while Redis is down.
async fn gateway(server: &RedisServer, limit: u64) -> (String, Guarded, Arc<AtomicU64>) {
    let redis = common::redis_store(server).await;
    let checks = Arc::new(AtomicU64::new(0));
    let counting = Counting {
        inner: redis,
        checks: Arc::clone(&checks),
    };
    let store = FallbackStore::builder(counting)
        .timeout(Duration::from_millis(100))
        .cool_down(Duration::from_millis(200))
        .build();
    let quota = Quota::token_bucket(limit, Rate::per_hour(1)).expect("valid");
    let escalation =
        Escalation::new(2, Duration::from_secs(60), Duration::from_secs(3_600)).expect("valid");
    let rule = Rule::new("reads", quota, PeerIp::new())
        .expect("valid id")
        .escalate(escalation)
        .expect("room for derived ids")
        .with_store_failure(OnStoreFailure::Local);
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(store.clone()).rule(rule));
    (format!("{}/", common::serve(app).await), store, checks)
}

async fn status(client: &reqwest::Client, url: &str) -> StatusCode {
    client
        .get(url)
        .send()
        .await
        .expect("the gateway answers")
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_request_under_an_escalating_rule_costs_one_store_call() {
    let server = RedisServer::start().expect("start redis-server");
    let (url, _store, checks) = gateway(&server, 1_000).await;
    let client = common::client();
    for _ in 0..10 {
        assert_eq!(status(&client, &url).await, StatusCode::OK);
    }
    assert_eq!(
        checks.load(Ordering::SeqCst),
        10,
        "one call per request: the block is read in the request's own call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_outage_the_breaker_closes_and_a_block_still_holds() {
    let server = RedisServer::start().expect("start redis-server");
    let (url, store, _checks) = gateway(&server, 2).await;
    let client = common::client();

    // Two allowed, then refusals until the third strike blocks the caller for an hour.
    assert_eq!(status(&client, &url).await, StatusCode::OK);
    assert_eq!(status(&client, &url).await, StatusCode::OK);
    let blocked_by = |retry: Option<u64>| retry.is_some_and(|secs| secs > 3_000);
    let waited = Instant::now();
    loop {
        let response = client.get(&url).send().await.expect("the gateway answers");
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let retry = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok()?.parse().ok());
        if blocked_by(retry) {
            break;
        }
        assert!(waited.elapsed() < Duration::from_secs(30), "never blocked");
    }

    // Redis goes away: the rule counts locally (a fresh local count: allowed), and the breaker
    // opens.
    server.kill().expect("kill redis-server");
    let waited = Instant::now();
    while !store.stats().breaker_open {
        let _ = status(&client, &url).await;
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "the breaker never opened"
        );
    }

    // Redis comes back: within a few cool-downs the breaker closes, and the block made before
    // the outage holds again.
    server.restart().expect("restart redis-server");
    let waited = Instant::now();
    loop {
        let response = client.get(&url).send().await.expect("the gateway answers");
        let retry = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok()?.parse().ok());
        if !store.stats().breaker_open && blocked_by(retry) {
            break;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "the breaker never closed after the outage: {:?}",
            store.stats()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
