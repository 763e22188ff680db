//! With the in-memory store the allowed path boxes nothing and allocates only for header values
//! (keys are held in place), and a rule's alert adds nothing to it once raised. This test binary counts the test thread's allocations with a wrapping global allocator.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderName, Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_core::{MemoryStore, Quota, Rate};
use tollgate_testing::CountingAllocator;
use tollgate_tower::key::{HeaderKey, PeerIp};
use tollgate_tower::{AlertShare, RateLimitLayer, Rule};
use tower::{Layer, Service, service_fn};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator::new();

#[test]
fn an_allowed_request_allocates_only_its_keys_and_header_values() {
    allowed_requests_allocate_only_header_values(None);
}

#[test]
fn a_raised_alert_allocates_nothing_more_per_request() {
    // Every request is past the share: the first raises the alert, the rest only read it.
    allowed_requests_allocate_only_header_values(Some(AlertShare::new(1e-6).unwrap()));
}

/// Sends 101 allowed requests through two rules (alerting at `alert_at`, if given) and checks
/// the last 100's allocations.
fn allowed_requests_allocate_only_header_values(alert_at: Option<AlertShare>) {
    let quota = Quota::token_bucket(1_000_000, Rate::per_second(1_000)).expect("a valid quota");
    let account = HeaderKey::new(HeaderName::from_static("x-account"));
    let alerting = |rule: Rule| match alert_at {
        Some(share) => rule.with_alert_at(share),
        None => rule,
    };
    let layer = RateLimitLayer::new(MemoryStore::new())
        .rule(alerting(
            Rule::new("per-ip", quota, PeerIp::new()).expect("a valid id"),
        ))
        .rule(alerting(
            Rule::new("per-account", quota, account).expect("a valid id"),
        ));
    let mut service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let requests: Vec<Request<()>> = (0..101)
        .map(|_| {
            let mut request = Request::get("/")
                .header("x-account", "account-4821")
                .body(())
                .expect("a valid request");
            request
                .extensions_mut()
                .insert(SocketAddr::from(([203, 0, 113, 7], 40_000)));
            request
        })
        .collect();
    let mut context = Context::from_waker(Waker::noop());
    let mut send = |request| {
        let mut future = std::pin::pin!(service.call(request));
        match future.as_mut().poll(&mut context) {
            Poll::Ready(response) => response.expect("infallible"),
            Poll::Pending => panic!("the in-memory path must answer at once"),
        }
    };
    let mut requests = requests.into_iter();
    // The first request stores the keys; later ones find them.
    assert_eq!(
        send(requests.next().expect("101 requests")).status(),
        StatusCode::OK
    );
    let before = ALLOCATOR.allocations_on_this_thread();
    let mut responses = Vec::with_capacity(100);
    for request in requests {
        responses.push(send(request));
    }
    let per_request = (ALLOCATOR.allocations_on_this_thread() - before) as f64 / 100.0;
    assert!(
        responses
            .iter()
            .all(|response| response.status() == StatusCode::OK)
    );
    assert!(
        responses
            .iter()
            .all(|response| response.headers().contains_key("ratelimit"))
    );
    // Keys are held in place (no allocation); each of the two header fields is written in a
    // buffer the thread keeps and copied once into its value (one allocation each); and the
    // response's header map allocates its index and entry tables on its first insert: 2 + 2 = 4.
    // No key buffers, no boxed futures, no rule-set copies, no other per-request buffers. (A
    // stray one-off allocation over the 100 requests, such as a lazily initialised global, is
    // tolerated.)
    eprintln!("{per_request} allocations per allowed request");
    assert!(
        per_request < 4.5,
        "{per_request} allocations per allowed request"
    );
    if alert_at.is_some() {
        assert_eq!(layer.handle().alerts().len(), 2, "both rules alerting");
    }
}
