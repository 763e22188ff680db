//! The reqwest middleware against a real tollgate-limited axum server on loopback (paused time):
//! the same waits as the layer, and a cooling host failing fast when asked to.

#![cfg(feature = "reqwest")]

mod common;

use std::time::Duration;

use common::Server;
use tollgate_client::{CoolingDown, RetryAfterMiddleware, RetryPolicy, WhenCooling};
use tollgate_core::{Quota, Rate};
use tollgate_tower::Rule;
use tollgate_tower::key::Global;

fn client(policy: RetryPolicy) -> reqwest_middleware::ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(RetryAfterMiddleware::new(policy))
        .build()
}

fn bucket(disclosed: bool) -> Rule {
    let quota = Quota::token_bucket(3, Rate::every(Duration::from_secs(2))).expect("valid");
    Rule::new("feed", quota, Global)
        .expect("valid")
        .disclose(disclosed)
}

#[tokio::test(start_paused = true)]
async fn ten_successes_wait_as_told() {
    let server = Server::limited(bucket(false)).await;
    let client = client(RetryPolicy::default().max_retries(10));
    for n in 0..10 {
        let response = client
            .get(server.url("/feed"))
            .send()
            .await
            .expect("answers");
        assert_eq!(response.status(), 200, "request {n}");
    }
    common::never_early(&server.arrivals());
    assert!(server.answered(429) <= 7, "at most one refusal per refill");
}

#[tokio::test(start_paused = true)]
async fn a_cooling_host_fails_fast_when_asked_to() {
    let server = Server::limited(bucket(false)).await;
    let client = client(
        RetryPolicy::default()
            .max_retries(0)
            .when_cooling(WhenCooling::FailFast),
    );
    let mut last = None;
    for _ in 0..5 {
        last = Some(client.get(server.url("/feed")).send().await);
    }
    // Three go through, the fourth is refused, the fifth finds the host cooling: never sent.
    let error = last.expect("sent").expect_err("failed fast");
    let cooling = std::error::Error::source(&error)
        .and_then(|source| source.downcast_ref::<CoolingDown>())
        .map(CoolingDown::retry_after)
        .or_else(|| {
            error
                .to_string()
                .contains("asked to wait")
                .then_some(Duration::ZERO)
        });
    assert!(cooling.is_some(), "{error}");
    assert_eq!(server.arrivals().len(), 4);
}

/// As the tower layer: a `PUT` of 100 KiB with an `Idempotency-Key`, answered `429 Retry-After:
/// 1`, is over the default `max_body` (64 KiB), so sent once and its refusal returned; 1 KiB is
/// retried.
#[tokio::test(start_paused = true)]
async fn a_body_over_max_body_is_sent_once_and_a_small_one_retried() {
    for (bytes, sent, status) in [(100 * 1024, 1, 429), (1024, 2, 200)] {
        let app = axum::Router::new().route(
            "/upload",
            common::refusing(1, || common::too_many(&[("retry-after", "1")])),
        );
        let server = Server::start(app).await;
        let response = client(RetryPolicy::default())
            .put(server.url("/upload"))
            .header("idempotency-key", "upload-7")
            .body(vec![b'x'; bytes])
            .send()
            .await
            .expect("answers");
        assert_eq!(response.status(), status, "{bytes} bytes");
        assert_eq!(server.arrivals().len(), sent, "{bytes} bytes");
    }
}
