//! Each form of a server's answer against a real axum server on loopback (paused time): an
//! HTTP-date read against a skewed `Date`, a wait above the cap, `t=` without `Retry-After`, a
//! 503 from a rule failing closed, a POST (not retried unless it has an Idempotency-Key), a
//! streaming body (not retried), an exhausted budget.

mod common;

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::routing::{get as get_route, post};
use bytes::Bytes;
use common::{Server, get, refusing, too_many};
use http::Method;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use tollgate_client::{RetryAfterLayer, RetryPolicy};
use tollgate_core::{
    BatchDecision, Decision, Item, Key, OnStoreFailure, Quota, Receipt, RefundError, RuleId, Store,
    StoreError,
};
use tollgate_tower::key::Global;
use tollgate_tower::{RateLimitLayer, Rule};
use tower::{Layer, ServiceExt};

async fn scripted() -> Server {
    let app = Router::new()
        .route(
            "/date",
            refusing(1, || {
                too_many(&[
                    ("date", "Wed, 02 Dec 2026 12:00:00 GMT"),
                    ("retry-after", "Wed, 02 Dec 2026 12:00:03 GMT"),
                ])
            }),
        )
        .route(
            "/long",
            refusing(usize::MAX, || too_many(&[("retry-after", "3600")])),
        )
        .route(
            "/t",
            refusing(1, || too_many(&[("ratelimit", r#""p";r=0;t=4"#)])),
        )
        .route("/one", refusing(1, || too_many(&[("retry-after", "1")])))
        .route(
            "/upload",
            post(|| async { too_many(&[("retry-after", "1")]) }),
        );
    Server::start(app).await
}

fn patient() -> tollgate_client::RetryAfter<common::HttpClient> {
    RetryAfterLayer::new(RetryPolicy::default()).layer(common::http_client())
}

#[tokio::test(start_paused = true)]
async fn an_http_date_is_read_against_the_response_s_own_date() {
    let server = scripted().await;
    let response = patient()
        .oneshot(get(&server.url("/date")))
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    let arrivals = server.arrivals();
    assert_eq!(arrivals.len(), 2);
    let gap = arrivals[1].at - arrivals[0].at;
    // The client's own clock (the real date) plays no part: 3 s by the server's Date.
    assert!(
        gap >= Duration::from_secs(3) && gap <= Duration::from_millis(3_300),
        "{gap:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_above_the_cap_returns_the_refusal_at_once() {
    let server = scripted().await;
    let response = patient()
        .oneshot(get(&server.url("/long")))
        .await
        .expect("answers");
    assert_eq!(response.status(), 429);
    assert_eq!(server.arrivals().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn t_without_retry_after_is_waited() {
    let server = scripted().await;
    let response = patient()
        .oneshot(get(&server.url("/t")))
        .await
        .expect("answers");
    assert_eq!(response.status(), 200);
    let arrivals = server.arrivals();
    assert!(arrivals[1].at - arrivals[0].at >= Duration::from_secs(4));
}

#[tokio::test(start_paused = true)]
async fn a_post_is_retried_only_with_an_idempotency_key() {
    let server = scripted().await;
    let post = |server: &Server, key: Option<&'static str>| {
        let mut request = http::Request::builder()
            .method(Method::POST)
            .uri(server.url("/one"));
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        request
            .body(Full::new(Bytes::from_static(b"{}")))
            .expect("a request")
    };
    let refused = patient()
        .oneshot(post(&server, None))
        .await
        .expect("answers");
    assert_eq!(
        refused.status(),
        429,
        "a POST without a key is not sent again"
    );
    assert_eq!(server.arrivals().len(), 1);
    let server = scripted().await;
    let response = patient()
        .oneshot(post(&server, Some("order-77")))
        .await
        .expect("answers");
    assert_eq!(response.status(), 200, "with a key it is");
    assert_eq!(server.arrivals().len(), 2);
}

/// A body whose size is not known up front (a stream, as far as anyone can tell).
enum TestBody {
    Sized(Full<Bytes>),
    Streaming(Full<Bytes>),
}

impl From<Bytes> for TestBody {
    fn from(bytes: Bytes) -> Self {
        TestBody::Sized(Full::new(bytes))
    }
}

impl Body for TestBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            TestBody::Sized(body) | TestBody::Streaming(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            TestBody::Sized(body) => body.size_hint(),
            TestBody::Streaming(_) => SizeHint::default(),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_streaming_or_large_body_is_sent_once() {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<TestBody>();
    let layer = RetryAfterLayer::new(RetryPolicy::default().max_body(1_024));
    for body in [
        TestBody::Streaming(Full::new(Bytes::from_static(b"chunk"))),
        TestBody::Sized(Full::new(Bytes::from(vec![b'x'; 4_096]))),
    ] {
        let server = scripted().await;
        let request = http::Request::put(server.url("/one"))
            .body(body)
            .expect("a request");
        let response = layer
            .layer(client.clone())
            .oneshot(request)
            .await
            .expect("answers");
        assert_eq!(response.status(), 429);
        assert_eq!(server.arrivals().len(), 1);
    }
}

/// A `PUT` of 100 KiB with an `Idempotency-Key`, answered `429 Retry-After: 1`: over the
/// default `max_body` (64 KiB), so sent once and its refusal returned; 1 KiB is retried.
#[tokio::test(start_paused = true)]
async fn a_body_over_max_body_is_sent_once_and_a_small_one_retried() {
    for (bytes, sent, status) in [(100 * 1024, 1, 429), (1024, 2, 200)] {
        let server = scripted().await;
        let request = http::Request::put(server.url("/one"))
            .header("idempotency-key", "upload-7")
            .body(Full::new(Bytes::from(vec![b'x'; bytes])))
            .expect("a request");
        let response = patient().oneshot(request).await.expect("answers");
        assert_eq!(response.status(), status, "{bytes} bytes");
        assert_eq!(server.arrivals().len(), sent, "{bytes} bytes");
    }
}

#[tokio::test(start_paused = true)]
async fn an_exhausted_budget_returns_the_refusal() {
    let server = scripted().await;
    let policy = RetryPolicy::default().budget(Duration::from_secs(10), 0, 0.0);
    let client = RetryAfterLayer::new(policy).layer(common::http_client());
    let response = client
        .oneshot(get(&server.url("/one")))
        .await
        .expect("answers");
    assert_eq!(response.status(), 429);
    assert_eq!(server.arrivals().len(), 1);
}

/// A store that is down: every call fails.
struct Down;

impl Store for Down {
    async fn check(&self, _: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn peek(&self, _: &Item<'_>) -> Result<Decision, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn refund(&self, _: Receipt) -> Result<(), RefundError> {
        Ok(())
    }
    async fn reset(&self, _: &RuleId, _: &Key) -> Result<(), StoreError> {
        Err(StoreError::unavailable("down"))
    }
}

/// A rule failing closed while its store is down answers 503 with `Retry-After: 1`: the client
/// asks again once a second, three times, then returns the 503.
#[tokio::test(start_paused = true)]
async fn a_503_from_a_closed_rule_is_retried_then_returned() {
    let quota = Quota::fixed_window(10, Duration::from_secs(60)).expect("valid");
    let rule = Rule::new("sms", quota, Global)
        .expect("valid")
        .with_store_failure(OnStoreFailure::Closed);
    let app = Router::new()
        .route("/sms", get_route(|| async { "sent" }))
        .layer(RateLimitLayer::new(Down).rule(rule));
    let server = Server::start(app).await;
    let response = patient()
        .oneshot(get(&server.url("/sms")))
        .await
        .expect("answers");
    assert_eq!(response.status(), 503);
    let arrivals = server.arrivals();
    assert_eq!(arrivals.len(), 4, "the first try and 3 retries");
    common::never_early(&arrivals);
}
