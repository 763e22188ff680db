//! An operator's reset, through the public API: the caller named by value is normalised by the
//! rule's own key extractor (an IPv6 address to its /64), so the reset reaches exactly the
//! count requests were charged to; and each rule's admin counters.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use http::{Request, Response};
use tollgate_core::{MemoryStore, Quota, RuleId};
use tollgate_tower::key::{Endpoint, HeaderKey, KeyValueError, PeerAddr, PeerIp};
use tollgate_tower::{Escalation, RateLimitLayer, ResetError, Rule, RuleSet};
use tower::{Layer, Service, ServiceExt, service_fn};

fn hourly(limit: u64) -> Quota {
    Quota::fixed_window(limit, Duration::from_secs(3_600)).expect("quota")
}

/// Sends one request from `peer` with `headers` through `layer`; its status.
async fn status(layer: &RateLimitLayer<MemoryStore>, peer: &str, headers: &[(&str, &str)]) -> u16 {
    let service = layer.layer(service_fn(|_: Request<String>| async {
        Ok::<_, Infallible>(Response::new(String::new()))
    }));
    let mut request = Request::get("/posts").body(String::new()).expect("request");
    for (name, value) in headers {
        request.headers_mut().insert(
            http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
            value.parse().expect("value"),
        );
    }
    let peer: SocketAddr = peer.parse().expect("peer");
    request.extensions_mut().insert(PeerAddr(peer));
    let mut service = service;
    service.ready().await.expect("ready");
    service
        .call(request)
        .await
        .expect("answer")
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_reset_by_one_address_clears_its_whole_ipv6_block() {
    let layer = RateLimitLayer::new(MemoryStore::new())
        .rule(Rule::new("per-block", hourly(1), PeerIp::new()).expect("rule"));
    assert_eq!(status(&layer, "[2001:db8::1]:1000", &[]).await, 200);
    assert_eq!(
        status(&layer, "[2001:db8::ffff]:1000", &[]).await,
        429,
        "same /64"
    );
    let done = layer
        .handle()
        .reset("per-block", &["2001:db8::abcd"])
        .await
        .expect("reset");
    assert_eq!(done.cleared, [RuleId::new("per-block").expect("id")]);
    assert_eq!(
        status(&layer, "[2001:db8::ffff]:1000", &[]).await,
        200,
        "the block is clear"
    );
    // Another block was never counted.
    let other = layer.handle().reset("per-block", &["2001:db9::1"]).await;
    assert!(other.is_ok());
}

#[tokio::test]
async fn header_and_combined_keys_are_named_one_value_per_part() {
    let api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key"));
    let layer = RateLimitLayer::new(MemoryStore::new())
        .route(
            http::Method::GET,
            "/posts",
            Rule::new("per-key-route", hourly(1), (api_key, Endpoint)).expect("rule"),
        )
        .expect("route");
    let headers = [("x-api-key", "partner-acme")];
    assert_eq!(status(&layer, "10.0.0.1:1", &headers).await, 200);
    assert_eq!(status(&layer, "10.0.0.1:1", &headers).await, 429);
    layer
        .handle()
        .reset("per-key-route", &[" partner-acme ", " get  /posts "])
        .await
        .expect("reset");
    assert_eq!(status(&layer, "10.0.0.1:1", &headers).await, 200);

    let missing = layer
        .handle()
        .reset("per-key-route", &["partner-acme"])
        .await;
    assert!(
        matches!(
            missing,
            Err(ResetError::Key {
                error: KeyValueError::Missing(_),
                ..
            })
        ),
        "{missing:?}"
    );
    let extra = layer
        .handle()
        .reset("per-key-route", &["a", "GET /x", "b"])
        .await;
    assert!(
        matches!(
            extra,
            Err(ResetError::Key {
                error: KeyValueError::TooMany,
                ..
            })
        ),
        "{extra:?}"
    );
    let unknown = layer.handle().reset("nope", &["a"]).await;
    assert!(matches!(unknown, Err(ResetError::UnknownRule(_))));
}

#[tokio::test]
async fn a_reset_lifts_an_escalation_block_too() {
    let escalation = Escalation::new(1, Duration::from_secs(60), Duration::from_secs(3_600))
        .expect("escalation");
    let layer = RateLimitLayer::new(MemoryStore::new()).rule(
        Rule::new("login", hourly(1), PeerIp::new())
            .expect("rule")
            .escalate(escalation)
            .expect("escalate"),
    );
    for _ in 0..4 {
        status(&layer, "192.0.2.7:1", &[]).await;
    }
    let done = layer
        .handle()
        .reset("login", &["192.0.2.7"])
        .await
        .expect("reset");
    assert_eq!(
        done.cleared.len(),
        3,
        "the count, the strikes and the block"
    );
    assert_eq!(status(&layer, "192.0.2.7:1", &[]).await, 200);
}

#[tokio::test]
async fn admin_counters_count_each_decision_and_outlive_a_reload_that_keeps_the_rule() {
    let rule = || Rule::new("reads", hourly(2), PeerIp::new()).expect("rule");
    let layer = RateLimitLayer::new(MemoryStore::new())
        .rule(rule())
        .track_stats();
    let id = RuleId::new("reads").expect("id");
    for _ in 0..3 {
        status(&layer, "192.0.2.1:1", &[]).await;
    }
    let stats = layer.handle().stats(&id).expect("tracked");
    assert_eq!(
        (stats.since_start.allowed, stats.since_start.refused),
        (2, 1)
    );
    assert_eq!(stats.last_5_minutes, stats.since_start);
    layer
        .handle()
        .replace_rules(RuleSet::new().rule(rule().shadow()))
        .expect("the layer's store can count these rules");
    status(&layer, "192.0.2.1:1", &[]).await;
    let stats = layer.handle().stats(&id).expect("tracked");
    assert_eq!(
        (
            stats.since_start.allowed,
            stats.since_start.refused,
            stats.since_start.shadow_refused
        ),
        (2, 1, 1)
    );
    let untracked = RateLimitLayer::new(MemoryStore::new()).rule(rule());
    assert!(untracked.handle().stats(&id).is_none());
}

#[tokio::test]
async fn a_rule_taken_out_and_put_back_counts_afresh() {
    let rule = || Rule::new("temp", hourly(100), PeerIp::new()).expect("rule");
    let layer = RateLimitLayer::new(MemoryStore::new())
        .rule(rule())
        .track_stats();
    let id = RuleId::new("temp").expect("id");
    for _ in 0..3 {
        status(&layer, "192.0.2.1:1", &[]).await;
    }
    assert_eq!(
        layer
            .handle()
            .stats(&id)
            .expect("tracked")
            .since_start
            .allowed,
        3
    );
    layer
        .handle()
        .replace_rules(RuleSet::new())
        .expect("the layer's store can count these rules");
    assert!(
        layer.handle().stats(&id).is_none(),
        "no rule in force has the id"
    );
    layer
        .handle()
        .replace_rules(RuleSet::new().rule(rule()))
        .expect("the layer's store can count these rules");
    assert_eq!(
        layer
            .handle()
            .stats(&id)
            .expect("tracked")
            .since_start
            .checks(),
        0
    );
}
