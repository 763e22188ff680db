//! A Redis outage seen over real HTTP: an axum server with `RateLimitLayer` over
//! `FallbackStore<RedisStore>` on a real redis-server, and a real client. While Redis is down,
//! open rules let requests through, local rules count in the gateway's memory, closed rules
//! answer 503 with `Retry-After` — and none of them answers 429 because of the outage. After a
//! restart, closed rules work again within two seconds.

mod common;

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::Method;
use axum::http::StatusCode;
use axum::routing::{get, post};
use reqwest::header::RETRY_AFTER;
use tollgate::core::FallbackStore;
use tollgate::tower::key::PeerIp;
use tollgate::tower::{RateLimitLayer, Rule};
use tollgate::{OnStoreFailure, Quota};
use tollgate_redis_harness::RedisServer;

fn rule(id: &str, limit: u64, policy: OnStoreFailure) -> Rule {
    let quota = Quota::fixed_window(limit, Duration::from_secs(3600)).expect("valid");
    Rule::new(id, quota, PeerIp::new())
        .expect("valid id")
        .with_store_failure(policy)
}

async fn serve(server: &RedisServer) -> String {
    let redis = common::redis_store(server).await;
    let store = FallbackStore::builder(redis)
        .timeout(Duration::from_millis(50))
        .cool_down(Duration::from_millis(200))
        .build();
    let route = |limits: RateLimitLayer<_>, method, path, rule| {
        limits.route(method, path, rule).expect("a valid pattern")
    };
    let limits = RateLimitLayer::new(store);
    let limits = route(
        limits,
        Method::GET,
        "/feed",
        rule("feed", 1_000, OnStoreFailure::Open),
    );
    let limits = route(
        limits,
        Method::GET,
        "/posts",
        rule("posts", 3, OnStoreFailure::Local),
    );
    let limits = route(
        limits,
        Method::POST,
        "/login",
        rule("login", 1_000, OnStoreFailure::Closed),
    );
    let within = Quota::fixed_window(2, Duration::from_secs(3600)).expect("valid");
    let limits = route(
        limits,
        Method::GET,
        "/search",
        rule("search", 1_000, OnStoreFailure::OpenWithin(within)),
    );
    let app = Router::new()
        .route("/feed", get(|| async { "feed" }))
        .route("/posts", get(|| async { "posts" }))
        .route("/login", post(|| async { "welcome" }))
        .route("/search", get(|| async { "results" }))
        .layer(limits);
    common::serve(app).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_handled_per_rule_over_http() {
    let server = RedisServer::start().expect("start redis-server");
    let base = serve(&server).await;
    let client = common::client();
    let login = || client.post(format!("{base}/login")).send();
    let get = |path: &str| client.get(format!("{base}{path}")).send();
    assert_eq!(login().await.expect("answers").status(), StatusCode::OK);
    let counted = get("/feed").await.expect("answers");
    assert_eq!(
        rate_limit(&counted).as_deref(),
        Some(r#""feed";r=999"#),
        "while Redis counts, the count is shown"
    );

    server.kill().expect("kill redis-server");
    for _ in 0..5 {
        let feed = client
            .get(format!("{base}/feed"))
            .send()
            .await
            .expect("answers");
        assert_eq!(
            feed.status(),
            StatusCode::OK,
            "open: allowed while Redis is down"
        );
        assert_eq!(
            rate_limit(&feed),
            None,
            "open: nothing is counted, so nothing is claimed"
        );
        let refused = login().await.expect("answers");
        assert_eq!(
            refused.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "closed: 503"
        );
        assert!(refused.headers().contains_key(RETRY_AFTER));
    }
    let mut posts = Vec::new();
    let mut shown = Vec::new();
    for _ in 0..4 {
        let answer = get("/posts").await.expect("answers");
        posts.push(answer.status());
        shown.push(rate_limit(&answer).unwrap_or_default());
    }
    assert_eq!(
        shown[..3],
        [r#""posts";r=2"#, r#""posts";r=1"#, r#""posts";r=0"#].map(|fields| fields.to_owned()),
        "local: this gateway's own count is shown"
    );
    assert_eq!(
        posts,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ],
        "local: the same limit, counted in this gateway"
    );
    let searches = [
        get("/search").await.expect("answers"),
        get("/search").await.expect("answers"),
    ];
    let shown: Vec<String> = searches
        .iter()
        .map(|answer| rate_limit(answer).unwrap_or_default())
        .collect();
    assert_eq!(
        shown,
        [r#""search";r=1"#, r#""search";r=0"#].map(|fields| fields.to_owned()),
        "open within a local quota: that quota's count is shown"
    );
    let policy = searches[0].headers()["ratelimit-policy"]
        .to_str()
        .expect("text");
    assert!(
        policy.contains(r#""search";q=2"#),
        "the local quota, not the rule's: {policy}"
    );

    server.restart().expect("restart redis-server");
    wait_until_logins_pass(&client, &base).await;
}

/// The `RateLimit` field without its `t` parameter (which depends on where in its window the
/// clock is): `"feed";r=999`. `None` when the response has none.
fn rate_limit(response: &reqwest::Response) -> Option<String> {
    let field = response.headers().get("ratelimit")?.to_str().ok()?;
    Some(field.split(";t=").next().unwrap_or(field).to_owned())
}

/// A gateway starts while Redis is down: building the store does not need Redis, each rule's
/// plan applies meanwhile, and once Redis starts, checks reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_starts_while_redis_is_down_and_reaches_it_once_it_is_up() {
    let server = RedisServer::start().expect("start redis-server");
    server.kill().expect("kill redis-server");
    let base = serve(&server).await;
    let client = common::client();
    let get = |path: &str| client.get(format!("{base}{path}")).send();
    let login = || client.post(format!("{base}/login")).send();

    assert_eq!(
        get("/feed").await.expect("answers").status(),
        StatusCode::OK,
        "open"
    );
    assert_eq!(
        login().await.expect("answers").status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "closed"
    );
    let mut posts = Vec::new();
    for _ in 0..4 {
        posts.push(get("/posts").await.expect("answers").status());
    }
    assert_eq!(
        posts,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ],
        "local"
    );

    server.restart().expect("start redis-server");
    wait_until_logins_pass(&client, &base).await;
    let keys = server.cli(&["DBSIZE"]).expect("redis-cli DBSIZE");
    assert_ne!(keys.trim(), "0", "the check was counted on the server");
}

/// Waits until the closed `/login` rule reaches Redis again (its requests pass), failing only if
/// that takes longer than a generous deadline.
async fn wait_until_logins_pass(client: &reqwest::Client, base: &str) {
    let started = Instant::now();
    loop {
        let login = client.post(format!("{base}/login")).send().await;
        if login.expect("answers").status() == StatusCode::OK {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the closed rule still fails: the store never reached the server"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
