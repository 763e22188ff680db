//! The rate limit filter when its service cannot be reached (nothing listens on its port), as a
//! client of a real Envoy sees it, and as Envoy counts it.

mod common;

use common::{Upstream, get, refusing_port, upstream_body};
use tokio::net::TcpSocket;
use tollgate_envoy_harness::{Action, Envoy, EnvoyConfig, RateLimitFilter};

/// Envoy, and the upstream behind it, with the rate limit filter asking a service that
/// refuses connections for every request (one descriptor: the caller's address). The socket
/// holds the service's port, bound but not listening, for as long as the test keeps it.
async fn envoy_with_the_service_down(
    filter: impl FnOnce(RateLimitFilter) -> RateLimitFilter,
) -> (Envoy, Upstream, TcpSocket) {
    let upstream = Upstream::start().await;
    let (held, down) = refusing_port();
    let config = EnvoyConfig::new(upstream.address())
        .rate_limit_filter(filter(RateLimitFilter::new("tollgate", down)))
        .rate_limit([Action::remote_address()]);
    (Envoy::start(&config).expect("Envoy starts"), upstream, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_open_lets_the_request_through() {
    let (envoy, upstream, _down) =
        envoy_with_the_service_down(|filter| filter.failure_mode_deny(false)).await;

    let (status, body) = get(&format!("{}/open", envoy.url())).await;

    assert_eq!(status, 200, "Envoy's log:\n{}", envoy.log());
    assert_eq!(body, upstream_body("/open"));
    assert_eq!(upstream.served(), 1);
    let stats = envoy.stats().unwrap();
    let stat = |name: &str| stats.get(name).copied();
    assert_eq!(
        stat("cluster.upstream.ratelimit.error"),
        Some(1),
        "{stats:#?}"
    );
    assert_eq!(
        stat("cluster.upstream.ratelimit.failure_mode_allowed"),
        Some(1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_closed_refuses_with_the_status_on_error() {
    let (envoy, upstream, _down) =
        envoy_with_the_service_down(|filter| filter.failure_mode_deny(true).status_on_error(503))
            .await;

    let (status, _) = get(&format!("{}/closed", envoy.url())).await;

    assert_eq!(status, 503, "Envoy's log:\n{}", envoy.log());
    assert_eq!(upstream.served(), 0);
    let stats = envoy.stats().unwrap();
    let stat = |name: &str| stats.get(name).copied();
    assert_eq!(
        stat("cluster.upstream.ratelimit.error"),
        Some(1),
        "{stats:#?}"
    );
    assert_eq!(
        stat("cluster.upstream.ratelimit.failure_mode_allowed"),
        None
    );
}

/// Without `status_on_error`, Envoy 1.40 refuses with 500 Internal Server Error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_closed_without_a_status_refuses_with_500() {
    let (envoy, upstream, _down) =
        envoy_with_the_service_down(|filter| filter.failure_mode_deny(true)).await;

    let (status, _) = get(&format!("{}/closed", envoy.url())).await;

    assert_eq!(status, 500, "Envoy's log:\n{}", envoy.log());
    assert_eq!(upstream.served(), 0);
    assert_eq!(
        envoy.counter("cluster.upstream.ratelimit.error").unwrap(),
        1
    );
}
