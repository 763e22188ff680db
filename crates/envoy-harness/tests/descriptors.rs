//! What a real Envoy sends the rate limit service for the route's actions, and what its client
//! sees of the answer — against a service that records each call (tests/common).

mod common;

use common::recording_service::{Answer, Call, RecordingService};
use common::{Upstream, upstream_body};
use tollgate_envoy_harness::{Action, Envoy, EnvoyConfig, RateLimitFilter};

fn entry(key: &str, value: &str) -> (String, String) {
    (key.to_owned(), value.to_owned())
}

/// A client that sends requests to Envoy itself, never through a proxy from the environment.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rate_limit_entry_is_one_descriptor_of_its_actions_entries() {
    let upstream = Upstream::start().await;
    let service = RecordingService::start(Answer::Ok).await;
    let config = EnvoyConfig::new(upstream.address())
        .rate_limit_filter(RateLimitFilter::new("tollgate", service.address()))
        .rate_limit([Action::remote_address()])
        .rate_limit([Action::generic_key("everyone")])
        .rate_limit([
            Action::generic_entry("route", "api"),
            Action::request_header("x-user-id", "user"),
        ]);
    let envoy = Envoy::start(&config).unwrap();
    let client = client();

    let with_user = client
        .get(format!("{}/feed", envoy.url()))
        .header("x-user-id", "alice")
        // Not trusted: the caller's address is the peer's.
        .header("x-forwarded-for", "203.0.113.7")
        .send()
        .await
        .unwrap();
    assert_eq!(with_user.status(), 200, "Envoy's log:\n{}", envoy.log());
    assert_eq!(with_user.text().await.unwrap(), upstream_body("/feed"));
    // No `x-user-id`: no third descriptor.
    let anonymous = client.get(envoy.url()).send().await.unwrap();
    assert_eq!(anonymous.status(), 200);

    let by_address = vec![entry("remote_address", "127.0.0.1")];
    let everyone = vec![entry("generic_key", "everyone")];
    assert_eq!(
        service.calls(),
        [
            Call {
                domain: "tollgate".to_owned(),
                descriptors: vec![
                    by_address.clone(),
                    everyone.clone(),
                    vec![entry("route", "api"), entry("user", "alice")],
                ],
            },
            Call {
                domain: "tollgate".to_owned(),
                descriptors: vec![by_address, everyone],
            },
        ]
    );
    assert_eq!(upstream.served(), 2);
    assert_eq!(envoy.counter("cluster.upstream.ratelimit.ok").unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_limit_is_429_with_the_rate_limit_headers() {
    let upstream = Upstream::start().await;
    let service = RecordingService::start(Answer::OverLimit).await;
    let config = EnvoyConfig::new(upstream.address())
        .rate_limit_filter(
            RateLimitFilter::new("tollgate", service.address()).x_ratelimit_headers(true),
        )
        .rate_limit([Action::remote_address()]);
    let envoy = Envoy::start(&config).unwrap();

    let refused = client().get(envoy.url()).send().await.unwrap();

    assert_eq!(refused.status(), 429, "Envoy's log:\n{}", envoy.log());
    let header = |name: &str| {
        refused
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    assert_eq!(header("x-envoy-ratelimited").as_deref(), Some("true"));
    assert_eq!(header("x-ratelimit-limit").as_deref(), Some("10, 10;w=60"));
    assert_eq!(header("x-ratelimit-remaining").as_deref(), Some("0"));
    assert_eq!(header("x-ratelimit-reset").as_deref(), Some("30"));
    assert_eq!(
        envoy
            .counter("cluster.upstream.ratelimit.over_limit")
            .unwrap(),
        1
    );
    assert_eq!(upstream.served(), 0);
    assert_eq!(service.calls().len(), 1);
}
