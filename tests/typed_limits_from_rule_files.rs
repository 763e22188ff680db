//! Typed limits read their live quota and header style from the same rule file as the layer's
//! rules, over real HTTP: "follows per day" changes in the file, and the handler's limit follows.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::routing::post;
use axum::{Extension, Router};
use tollgate::axum::{Limit, Limited, Tollgate};
use tollgate::config::{Extractors, RuleWatcher};
use tollgate::core::{Key, MemoryStore, Quota, QuotaError};
use tollgate::tower::{QuotaRegistry, RateLimitLayer};

/// 400 follows a day unless the rule file says otherwise; every caller is one account here.
struct FollowsPerDay;

impl Limit for FollowsPerDay {
    const ID: &'static str = "follows-per-day";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::sliding_window_counter(400, Duration::from_secs(86_400))
    }
    fn key(_: &Parts) -> Option<Key> {
        Some(Key::new("ada"))
    }
}

fn file(follows: u64, legacy: bool) -> String {
    format!(
        "headers = {{ legacy = {legacy} }}\n\n[[limit]]\nid = \"follows-per-day\"\nalgorithm = \"sliding_window_counter\"\nlimit = {follows}\nwindow = \"1d\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_limit_takes_its_quota_and_headers_from_the_rule_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, file(2, false)).expect("write");
    let layer = RateLimitLayer::new(MemoryStore::new()).registry(QuotaRegistry::new());
    let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("a valid file");
    let tollgate = Tollgate::from_layer(&layer);
    let app = Router::new()
        .route(
            "/follow",
            post(|_: Limited<FollowsPerDay>| async { "followed" }),
        )
        .layer(layer)
        .layer(Extension(tollgate));
    let url = format!("{}/follow", common::serve(app).await);
    let client = common::client();
    let follow = || async { client.post(&url).send().await.expect("the server answers") };

    assert_eq!(follow().await.status(), StatusCode::OK);
    assert_eq!(follow().await.status(), StatusCode::OK);
    let refused = follow().await;
    assert_eq!(
        refused.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "2 a day, from the file"
    );
    assert!(refused.headers().get("x-ratelimit-limit").is_none());

    // The file raises the limit to 3 and turns legacy headers on: the handler's limit follows.
    std::fs::write(&path, file(3, true)).expect("write");
    assert!(watcher.reload().is_ok());
    assert_eq!(follow().await.status(), StatusCode::OK);
    let refused = follow().await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["x-ratelimit-limit"], "3");
}
