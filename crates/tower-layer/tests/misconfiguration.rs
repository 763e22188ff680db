//! No rule is skipped without a word: an IP rule that can never find an address answers 500
//! and says why at `error`, and so does a rule asking for a fleet mode the layer's store cannot
//! give (never counted exactly without a word); a rule skipped for a missing key is counted and said at `warn`;
//! a tower-only service supplies the peer with a `PeerAddr` extension.

mod common;

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use common::events::Recorder;
use common::server::{Reply, TestServer};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tollgate_core::{MemoryStore, Quota};
use tollgate_tower::key::{HeaderKey, PeerAddr, PeerIp};
use tollgate_tower::{MissingKey, RateLimitLayer, Rule};
use tower::ServiceBuilder;

fn per_ip(policy: &str) -> Rule {
    let quota = Quota::fixed_window(2, Duration::from_secs(3600)).expect("a valid quota");
    Rule::new(policy, quota, PeerIp::new()).expect("a valid policy name")
}

fn app(rule: Rule) -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(RateLimitLayer::new(MemoryStore::new()).rule(rule))
}

/// The `error` events about `policy` on target `tollgate::rule`.
fn errors_about(policy: &str) -> Vec<common::events::Recorded> {
    let mut events = Recorder::global().on_target("tollgate::rule");
    events.retain(|event| {
        event.field("rule") == Some(policy) && event.level == tracing::Level::ERROR
    });
    events
}

/// Sends `requests` requests, each answered 500 as misconfigured without naming `policy`, and
/// gives the one `error` the rule logged for them.
async fn answers_500_and_logs_once(server: &TestServer, policy: &str, requests: usize) -> String {
    for _ in 0..requests {
        let reply = Reply::send(server.client.get(server.url("/"))).await;
        assert_eq!(
            reply.status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{}",
            reply.body
        );
        assert!(
            reply.body.contains("urn:tollgate:problem:misconfigured"),
            "{}",
            reply.body
        );
        assert!(
            !reply.body.contains(policy),
            "the caller is not told the rule"
        );
    }
    let errors = errors_about(policy);
    assert_eq!(errors.len(), 1, "logged once, not per request: {errors:?}");
    errors[0].field("message").unwrap_or_default().to_owned()
}

#[tokio::test]
async fn an_ip_rule_served_without_a_peer_address_answers_500_and_says_why_once() {
    Recorder::global();
    let server = TestServer::start_without_peer(app(per_ip("no-peer"))).await;
    let message = answers_500_and_logs_once(&server, "no-peer", 4).await;
    assert!(
        message.contains("into_make_service_with_connect_info") && message.contains("PeerAddr"),
        "the log names the fix: {message}"
    );
}

#[tokio::test]
async fn a_rule_asking_for_what_the_store_cannot_do_answers_500_and_says_what_to_add() {
    Recorder::global();
    let leased = per_ip("leased-on-memory").with_counting(tollgate_core::Counting::Lease(
        tollgate_core::LeaseSettings::new(),
    ));
    let server = TestServer::start(app(leased)).await;
    let message = answers_500_and_logs_once(&server, "leased-on-memory", 3).await;
    assert!(
        message.contains("FleetStore"),
        "the log names the fix: {message}"
    );

    // A shadow rule never stops a request: it passes, uncounted, with the same log.
    let shadow = per_ip("shadow-leased-on-memory")
        .with_counting(tollgate_core::Counting::Lease(
            tollgate_core::LeaseSettings::new(),
        ))
        .shadow();
    let server = TestServer::start(app(shadow)).await;
    let reply = Reply::send(server.client.get(server.url("/"))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(errors_about("shadow-leased-on-memory").len(), 1);
}

/// With the `axum` feature the layer reads axum's `ConnectInfo`: the usual axum set-up counts.
#[cfg(feature = "axum")]
#[tokio::test]
async fn with_the_axum_feature_connect_info_alone_names_the_peer() {
    let server = TestServer::start_with_connect_info_only(app(per_ip("connect-info"))).await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(Reply::send(server.client.get(server.url("/"))).await.status);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
}

/// Without the `axum` feature the layer cannot read axum's `ConnectInfo`: loudly, not by
/// limiting nothing, and the log says to enable the feature.
#[cfg(not(feature = "axum"))]
#[tokio::test]
async fn without_the_axum_feature_connect_info_alone_is_a_misconfiguration() {
    Recorder::global();
    let server = TestServer::start_with_connect_info_only(app(per_ip("connect-info"))).await;
    let reply = Reply::send(server.client.get(server.url("/"))).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    let errors = errors_about("connect-info");
    assert_eq!(errors.len(), 1);
    let message = errors[0].field("message").unwrap_or_default();
    assert!(message.contains("`axum` feature"), "{message}");
}

#[tokio::test]
async fn a_rule_that_opts_into_skipping_lets_requests_through_without_a_peer() {
    Recorder::global();
    let rule = per_ip("no-peer-skip").on_missing_key(MissingKey::SkipAlways);
    let counted = rule.clone();
    let server = TestServer::start_without_peer(app(rule)).await;
    for _ in 0..3 {
        let reply = Reply::send(server.client.get(server.url("/"))).await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    assert!(errors_about("no-peer-skip").is_empty());
    assert_eq!(counted.keyless_skips(), 3, "skips are still counted");
}

#[tokio::test]
async fn a_shadow_ip_rule_without_a_peer_never_stops_a_request_but_still_says_why() {
    Recorder::global();
    let server = TestServer::start_without_peer(app(per_ip("no-peer-shadow").shadow())).await;
    for _ in 0..3 {
        let reply = Reply::send(server.client.get(server.url("/"))).await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    let errors = errors_about("no-peer-shadow");
    assert_eq!(errors.len(), 1);
    let message = errors[0].field("message").unwrap_or_default();
    assert!(
        message.contains("never stops a request") && !message.contains("500"),
        "the log says what happens: {message}"
    );
}

#[tokio::test]
async fn a_rule_skipped_for_a_missing_key_is_counted_and_warned_about_once() {
    Recorder::global();
    let quota = Quota::fixed_window(1, Duration::from_secs(3600)).expect("a valid quota");
    let rule = Rule::new(
        "keyless",
        quota,
        HeaderKey::new(http::HeaderName::from_static("x-api-key")),
    )
    .expect("a valid policy name");
    let layer = RateLimitLayer::new(MemoryStore::new()).rule(rule);
    let rules = layer.clone();
    let server = TestServer::start(
        Router::new()
            .route("/", get(|| async { "hello" }))
            .layer(layer),
    )
    .await;
    for _ in 0..3 {
        let reply = Reply::send(server.client.get(server.url("/"))).await;
        assert_eq!(reply.status, StatusCode::OK, "a missing key skips the rule");
    }
    let skips: Vec<u64> = rules
        .handle()
        .rules()
        .rules()
        .map(Rule::keyless_skips)
        .collect();
    assert_eq!(skips, [3]);
    let mut warnings = Recorder::global().on_target("tollgate::rule");
    warnings.retain(|event| event.field("rule") == Some("keyless"));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].level, tracing::Level::WARN);
}

/// A plain hyper serve loop, as a tower-only service runs: each connection's requests carry
/// its peer as a `PeerAddr`.
#[tokio::test]
async fn a_tower_only_service_supplies_the_peer_with_a_peer_addr_extension() {
    let limits = RateLimitLayer::new(MemoryStore::new()).rule(per_ip("tower-only"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    let server = tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                return;
            };
            let service = ServiceBuilder::new()
                .map_request(move |mut request: Request<Incoming>| {
                    request.extensions_mut().insert(PeerAddr(peer));
                    request
                })
                .layer(limits.clone())
                .service_fn(|_request: Request<Incoming>| async {
                    Ok::<_, Infallible>(Response::new(String::from("hello")))
                });
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
                let _ = connection.await;
            });
        }
    });
    let client = common::server::client();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let reply = Reply::send(client.get(format!("http://{addr}/"))).await;
        statuses.push(reply.status);
    }
    server.abort();
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
}
