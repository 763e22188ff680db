//! Rules whose cost is known only after the response, through the layer on a real axum server
//! and a real client: an estimate taken up front, settled with the actual cost read from a
//! response header, a response extension or a meter the handler adds to while it streams; the
//! excess owed and paid before the caller's next request is admitted, the rest given back.

mod common;

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::Extension;
use axum::routing::get;
use bytes::Bytes;
use common::server::{Reply, TestServer};
use http::{HeaderName, StatusCode};
use http_body::{Body, Frame};
use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store, Take};
use tollgate_testing::ManualClock;
use tollgate_tower::key::Global;
use tollgate_tower::{ActualCost, CostMeter, RateLimitLayer, Rule, SettleFrom};

const LIMIT: u64 = 500;
const ESTIMATE: u64 = 100;

fn quota() -> Quota {
    // 500 an hour: nothing comes back while a test runs on the manual clock.
    Quota::token_bucket(LIMIT, Rate::per_hour(LIMIT)).expect("a valid quota")
}

fn tokens(from: SettleFrom) -> Rule {
    Rule::new("tokens", quota(), Global)
        .expect("a valid policy name")
        .cost(ESTIMATE)
        .settle(from)
}

fn used_header() -> HeaderName {
    HeaderName::from_static("x-tokens-used")
}

type Store_ = MemoryStore<ManualClock>;

fn store() -> (ManualClock, Store_) {
    let clock = ManualClock::new(tollgate_testing::conformance::START);
    (clock.clone(), MemoryStore::builder().clock(clock).build())
}

/// What the caller has left, as the store says (a peek of cost 0 after its debt: 0 while owing).
async fn remaining(store: &Store_) -> u64 {
    let (rule, key) = (RuleId::new("tokens").expect("valid"), Key::global());
    let item = Item::new(&rule, quota(), &key).with_cost(0);
    store.peek(&item).await.expect("memory answers").remaining()
}

/// What the caller owes, as a debt item of cost 0 reports it (it pays nothing: nothing is left).
async fn debt(store: &Store_) -> u64 {
    let (rule, key) = (RuleId::new("tokens").expect("valid"), Key::global());
    let item = Item::new(&rule, quota(), &key)
        .with_cost(0)
        .with_take(Take::AsDebt);
    store.check_one(&item).await.expect("memory answers").debt()
}

/// Waits until the store shows `left` units remaining (settling runs as the body ends, which
/// may be just after the client has read it).
async fn until_remaining(store: &Store_, left: u64) {
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        while remaining(store).await != left {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "expected {left} remaining, the store says {}",
        remaining(store).await
    );
}

/// A body of `chunks` chunks, each adding `each` to the request's meter as it is sent.
struct Metered {
    meter: CostMeter,
    chunks: u32,
    each: u64,
}

impl Body for Metered {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.chunks == 0 {
            return Poll::Ready(None);
        }
        self.chunks -= 1;
        self.meter.add(self.each);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"tokens\n")))))
    }
}

/// A body that sends a chunk every millisecond, adding 7 to the meter each time, and never
/// ends (7 never adds up to the estimate of 100, so a settled stream is told from one that is
/// still running).
struct Endless {
    every: tokio::time::Interval,
    meter: CostMeter,
}

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        std::task::ready!(self.every.poll_tick(cx));
        self.meter.add(7);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"tokens\n")))))
    }
}

fn app(rule: Rule, store: Store_) -> Router {
    let streamed = |Extension(meter): Extension<CostMeter>| async move {
        axum::body::Body::new(Metered {
            meter,
            chunks: 9,
            each: 100,
        })
    };
    let header = |axum::extract::Path(used): axum::extract::Path<String>| async move {
        ([(used_header(), used)], "answer")
    };
    let extension = |axum::extract::Path(used): axum::extract::Path<u64>| async move {
        (Extension(ActualCost(used)), "answer")
    };
    Router::new()
        .route("/streamed", get(streamed))
        .route("/header/{used}", get(header))
        .route("/extension/{used}", get(extension))
        .route("/silent", get(|| async { "no cost reported" }))
        .route(
            "/fails",
            get(|| async { (StatusCode::BAD_GATEWAY, [(used_header(), "300")]) }),
        )
        .layer(RateLimitLayer::new(store).rule(rule))
}

#[tokio::test]
async fn estimate_100_streamed_900_owes_the_excess_and_the_next_request_waits_for_it() {
    let (clock, store) = store();
    let server = TestServer::start(app(tokens(SettleFrom::reported()), store.clone())).await;

    let first = Reply::send(server.client.get(server.url("/streamed"))).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.body.lines().count(), 9, "the whole stream");
    // 100 up front, 800 more at the end: 400 fit, 400 are owed.
    until_remaining(&store, 0).await;
    assert_eq!(debt(&store).await, 400);

    let waits = Reply::send(server.client.get(server.url("/silent"))).await;
    assert_eq!(
        waits.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        waits.body
    );
    // The 400 owed and the 100 estimated fit again in 500 / (500 an hour): an hour.
    assert_eq!(waits.headers["retry-after"], "3600");

    clock.advance(Duration::from_secs(3_599));
    let still = Reply::send(server.client.get(server.url("/silent"))).await;
    assert_eq!(still.status, StatusCode::TOO_MANY_REQUESTS);
    clock.advance(Duration::from_secs(1));
    let admitted = Reply::send(server.client.get(server.url("/silent"))).await;
    assert_eq!(admitted.status, StatusCode::OK, "{}", admitted.body);
    assert_eq!(debt(&store).await, 0, "the debt was paid");
}

#[tokio::test]
async fn a_cost_below_the_estimate_is_given_back() {
    let (_clock, store) = store();
    let server = TestServer::start(app(
        tokens(SettleFrom::header(used_header())),
        store.clone(),
    ))
    .await;
    let reply = Reply::send(server.client.get(server.url("/header/30"))).await;
    assert_eq!(reply.status, StatusCode::OK);
    until_remaining(&store, LIMIT - 30).await;
}

#[tokio::test]
async fn a_cost_above_the_estimate_read_from_a_header_is_charged() {
    let (_clock, store) = store();
    let server = TestServer::start(app(
        tokens(SettleFrom::header(used_header())),
        store.clone(),
    ))
    .await;
    let reply = Reply::send(server.client.get(server.url("/header/250"))).await;
    assert_eq!(reply.status, StatusCode::OK);
    until_remaining(&store, LIMIT - 250).await;
}

#[tokio::test]
async fn a_response_extension_reports_the_cost() {
    let (_clock, store) = store();
    let server = TestServer::start(app(tokens(SettleFrom::reported()), store.clone())).await;
    let reply = Reply::send(server.client.get(server.url("/extension/7"))).await;
    assert_eq!(reply.status, StatusCode::OK);
    until_remaining(&store, LIMIT - 7).await;
}

#[tokio::test]
async fn a_function_of_the_response_reports_the_cost() {
    let (_clock, store) = store();
    let from = SettleFrom::function(|response| {
        let used = response.headers.get("x-tokens-used")?.to_str().ok()?;
        used.parse::<u64>().ok().map(|used| used * 2)
    });
    let server = TestServer::start(app(tokens(from), store.clone())).await;
    let reply = Reply::send(server.client.get(server.url("/header/60"))).await;
    assert_eq!(reply.status, StatusCode::OK);
    until_remaining(&store, LIMIT - 120).await;
}

#[tokio::test]
async fn a_response_that_reports_nothing_keeps_the_estimate() {
    let (_clock, store) = store();
    let server = TestServer::start(app(
        tokens(SettleFrom::header(used_header())),
        store.clone(),
    ))
    .await;
    for path in ["/silent", "/header/not-a-number"] {
        let reply = Reply::send(server.client.get(server.url(path))).await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    // Nothing to settle: the two estimates stand, at once.
    assert_eq!(remaining(&store).await, LIMIT - 2 * ESTIMATE);
}

#[tokio::test]
async fn a_response_that_does_not_count_settles_at_zero() {
    let (_clock, store) = store();
    let rule =
        tokens(SettleFrom::header(used_header())).count_only_when(|status| status.is_success());
    let server = TestServer::start(app(rule, store.clone())).await;
    let reply = Reply::send(server.client.get(server.url("/fails"))).await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    until_remaining(&store, LIMIT).await;
    let counted = Reply::send(server.client.get(server.url("/header/300"))).await;
    assert_eq!(counted.status, StatusCode::OK);
    until_remaining(&store, LIMIT - 300).await;
}

/// A client that goes away mid-stream pays for what was streamed until then: the meter's value
/// when the body was dropped.
#[tokio::test]
async fn a_client_gone_mid_stream_pays_what_was_streamed() {
    let (_clock, store) = store();
    let seen: Arc<Mutex<Option<CostMeter>>> = Arc::default();
    let endless = {
        let seen = Arc::clone(&seen);
        move |Extension(meter): Extension<CostMeter>| async move {
            *seen.lock().expect("not poisoned") = Some(meter.clone());
            let mut every = tokio::time::interval(Duration::from_millis(1));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            axum::body::Body::new(Endless { every, meter })
        }
    };
    let app = Router::new()
        .route("/endless", get(endless))
        .layer(RateLimitLayer::new(store.clone()).rule(tokens(SettleFrom::reported())));
    let server = TestServer::start(app).await;

    let mut response = server
        .client
        .get(server.url("/endless"))
        .send()
        .await
        .expect("the server answers");
    for _ in 0..3 {
        response
            .chunk()
            .await
            .expect("a chunk")
            .expect("more to come");
    }
    drop(response);
    let meter = seen
        .lock()
        .expect("not poisoned")
        .clone()
        .expect("the handler ran");
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let streamed = meter.get().expect("the stream reported");
            let expected = LIMIT.saturating_sub(streamed);
            if streamed >= 21 && remaining(&store).await == expected {
                return streamed;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    let streamed = waited.expect("the stream's cost was settled when the client went away");
    assert!(streamed >= 21, "at least the three chunks read");
}

/// Two layers, each with a rule settled from what the handler reports: both see the handler's
/// one report (the outer layer's meter is the one the handler gets).
#[tokio::test]
async fn nested_layers_share_one_meter() {
    let (_clock, store) = store();
    let inner_rule = Rule::new("inner-tokens", quota(), Global)
        .expect("a valid policy name")
        .cost(ESTIMATE)
        .settle(SettleFrom::reported());
    let app = Router::new()
        .route(
            "/report",
            get(|Extension(meter): Extension<CostMeter>| async move {
                meter.add(300);
                "done"
            }),
        )
        .layer(RateLimitLayer::new(store.clone()).rule(inner_rule))
        .layer(RateLimitLayer::new(store.clone()).rule(tokens(SettleFrom::reported())));
    let server = TestServer::start(app).await;
    let reply = Reply::send(server.client.get(server.url("/report"))).await;
    assert_eq!(reply.status, StatusCode::OK);
    until_remaining(&store, LIMIT - 300).await;
    let (inner_id, global) = (RuleId::new("inner-tokens").expect("valid"), Key::global());
    let inner = Item::new(&inner_id, quota(), &global).with_cost(0);
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        while store.peek(&inner).await.expect("memory").remaining() != LIMIT - 300 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(waited.is_ok(), "the inner rule settled at 300 too");
}

/// A caller-set estimate cannot make a request free, and a header's value is read strictly.
#[tokio::test]
async fn estimates_and_reported_costs_read_from_headers_are_read_strictly() {
    let (_clock, store) = store();
    let rule = Rule::new("tokens", quota(), Global)
        .expect("a valid policy name")
        .cost_from_header(HeaderName::from_static("x-max-tokens"), 50)
        .settle(SettleFrom::header(used_header()));
    let server = TestServer::start(app(rule, store.clone())).await;
    // "x-max-tokens: 0" is an estimate of 1; nothing reported keeps it.
    let zero = Reply::send(
        server
            .client
            .get(server.url("/silent"))
            .header("x-max-tokens", "0"),
    )
    .await;
    assert_eq!(zero.status, StatusCode::OK);
    assert_eq!(remaining(&store).await, LIMIT - 1);
    // A signed value is no value: the estimate of 1 stands.
    let signed = Reply::send(
        server
            .client
            .get(server.url("/header/+5"))
            .header("x-max-tokens", "1"),
    )
    .await;
    assert_eq!(signed.status, StatusCode::OK);
    assert_eq!(remaining(&store).await, LIMIT - 2);
    // A number past u64::MAX is the most there is: everything left, and the rest owed.
    let huge = Reply::send(
        server
            .client
            .get(server.url("/header/99999999999999999999999"))
            .header("x-max-tokens", "1"),
    )
    .await;
    assert_eq!(huge.status, StatusCode::OK);
    until_remaining(&store, 0).await;
    assert_eq!(debt(&store).await, LIMIT * 1_024, "the debt cap");
}
