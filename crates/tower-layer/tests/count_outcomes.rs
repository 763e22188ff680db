//! Counting only some outcomes: failed logins are charged, successful ones refunded.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_core::{MemoryStore, Quota};
use tollgate_tower::key::HeaderKey;
use tollgate_tower::{RateLimitLayer, Rule};
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

/// A login endpoint: `x-password: right` logs in, anything else is 401.
async fn login(request: Request<()>) -> Result<Response<Empty<Bytes>>, Infallible> {
    let right = request
        .headers()
        .get("x-password")
        .is_some_and(|value| value == "right");
    let mut response = Response::new(Empty::new());
    if !right {
        *response.status_mut() = StatusCode::UNAUTHORIZED;
    }
    Ok(response)
}

fn failed_logins_layer(allowed_failures: u64) -> RateLimitLayer<MemoryStore> {
    let quota = Quota::sliding_window_log(allowed_failures, Duration::from_secs(15 * 60))
        .expect("valid quota");
    let rule = Rule::new(
        "failed-logins",
        quota,
        HeaderKey::new(HeaderName::from_static("x-login")),
    )
    .expect("valid rule id")
    .count_only_when(|status| {
        status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN
    });
    RateLimitLayer::new(MemoryStore::new()).rule(rule)
}

fn attempt(account: &str, password: &str) -> Request<()> {
    Request::post("/login")
        .header("x-login", account)
        .header("x-password", password)
        .body(())
        .expect("valid request")
}

#[tokio::test]
async fn successful_logins_are_refunded_and_failures_count() {
    let service = ServiceBuilder::new()
        .layer(failed_logins_layer(3))
        .service(service_fn(login));
    for _ in 0..20 {
        let response = service
            .clone()
            .oneshot(attempt("user77", "right"))
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "successes never use up the budget"
        );
    }
    for _ in 0..3 {
        let response = service
            .clone()
            .oneshot(attempt("user77", "wrong"))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    }
    let refused = service
        .clone()
        .oneshot(attempt("user77", "right"))
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "3 failures used the budget"
    );
    let other = service.oneshot(attempt("user78", "wrong")).await.unwrap();
    assert_eq!(
        other.status(),
        StatusCode::UNAUTHORIZED,
        "another account is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_attempts_with_one_left_let_at_most_one_through() {
    let mut service = ServiceBuilder::new()
        .layer(failed_logins_layer(3))
        .service(service_fn(login));
    for _ in 0..2 {
        let response = service
            .ready()
            .await
            .unwrap()
            .call(attempt("user77", "wrong"))
            .await;
        assert_eq!(response.unwrap().status(), StatusCode::UNAUTHORIZED);
    }
    let attempts: Vec<_> = (0..50)
        .map(|_| {
            let service = service.clone();
            tokio::spawn(async move { service.oneshot(attempt("user77", "wrong")).await })
        })
        .collect();
    let mut passed = 0;
    for task in attempts {
        let status = task.await.unwrap().unwrap().status();
        if status != StatusCode::TOO_MANY_REQUESTS {
            passed += 1;
        }
    }
    assert_eq!(passed, 1, "{passed} attempts got past the last token");
}
