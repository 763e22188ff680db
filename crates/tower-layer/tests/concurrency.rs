//! Concurrency rules through the layer, on a real axum server and a real client: a request
//! holds a slot while it runs and gives it back when its response body has ended, or when the
//! client goes away mid-body, the handler panics (a `CatchPanicLayer` outside the layer) or a
//! timeout layer fires; a request refused for a slot waits the rule's `Retry-After`; the
//! `RateLimit` fields show the free slots; and none is ever leaked (the store holds nothing after a thousand mixed requests).

mod common;

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use common::server::{Reply, TestServer};
use http::StatusCode;
use http_body::{Body, Frame};
use tokio::sync::{Semaphore, watch};
use tollgate_core::{MemoryStore, Quota};
use tollgate_tower::key::PeerIp;
use tollgate_tower::{RateLimitLayer, Rule};

const LIMIT: u64 = 3;

fn in_flight() -> Rule {
    let quota = Quota::concurrency_with(LIMIT, Duration::from_secs(7), Duration::from_secs(60))
        .expect("a valid quota");
    Rule::new("in-flight", quota, PeerIp::new()).expect("a valid policy name")
}

/// What the handlers share: how many run now (and the most at once), and the permits that let
/// a `/slow` handler finish.
#[derive(Clone)]
struct Running {
    now: watch::Sender<usize>,
    most: Arc<std::sync::atomic::AtomicUsize>,
    finish: Arc<Semaphore>,
}

impl Running {
    fn new() -> Self {
        Running {
            now: watch::channel(0).0,
            most: Arc::default(),
            finish: Arc::new(Semaphore::new(0)),
        }
    }

    /// Counts a handler in until the returned guard drops (also when it is cancelled).
    fn enter(&self) -> impl Drop + use<> {
        self.now.send_modify(|now| *now += 1);
        let now = *self.now.borrow();
        self.most
            .fetch_max(now, std::sync::atomic::Ordering::SeqCst);
        struct Leave(watch::Sender<usize>);
        impl Drop for Leave {
            fn drop(&mut self) {
                self.0.send_modify(|now| *now -= 1);
            }
        }
        Leave(self.now.clone())
    }

    async fn until_running(&self, count: usize) {
        let mut seen = self.now.subscribe();
        seen.wait_for(|now| *now == count)
            .await
            .expect("the sender lives");
    }
}

/// Sends `count` requests to `/slow`, each in a task of its own, and waits until their handlers
/// all run (each holds a slot until let finish).
async fn start_slow(
    server: &Arc<TestServer>,
    running: &Running,
    count: usize,
) -> tokio::task::JoinSet<Reply> {
    let mut slow = tokio::task::JoinSet::new();
    for _ in 0..count {
        let server = Arc::clone(server);
        slow.spawn(async move { Reply::send(server.client.get(server.url("/slow"))).await });
    }
    running.until_running(count).await;
    slow
}

/// A body that sends a chunk every millisecond and never ends.
struct Endless(tokio::time::Interval);

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        ready!(self.0.poll_tick(cx));
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"chunk\n")))))
    }
}

fn app(running: &Running, store: MemoryStore) -> Router {
    routes(running, RateLimitLayer::new(store).rule(in_flight()))
}

fn routes(running: &Running, layer: RateLimitLayer<MemoryStore>) -> Router {
    let slow = {
        let running = running.clone();
        move || async move {
            let _inside = running.enter();
            let permit = running.finish.acquire().await.expect("the semaphore lives");
            permit.forget();
            "done"
        }
    };
    let quick = {
        let running = running.clone();
        move || async move {
            let _inside = running.enter();
            "quick"
        }
    };
    let panics = {
        let running = running.clone();
        move || async move {
            let _inside = running.enter();
            if std::hint::black_box(true) {
                panic!("the handler fails");
            }
            "never"
        }
    };
    let hangs = {
        let running = running.clone();
        move || async move {
            let _inside = running.enter();
            std::future::pending::<()>().await;
            "never"
        }
    };
    let streams = || async {
        let mut every = tokio::time::interval(Duration::from_millis(1));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        axum::body::Body::new(Endless(every))
    };
    Router::new()
        .route("/slow", get(slow))
        .route("/quick", get(quick))
        .route("/panics", get(panics))
        .route("/hangs", get(hangs))
        .route("/streams", get(streams))
        .layer(layer)
        .layer(tower_http::catch_panic::CatchPanicLayer::new())
}

/// [`app`] behind a timeout layer that gives up on a request after 20 ms, dropping the layer's
/// future (and what the handler was doing) from outside.
fn app_with_timeout(running: &Running, store: MemoryStore) -> Router {
    app(running, store).layer(tower_http::timeout::TimeoutLayer::with_status_code(
        StatusCode::GATEWAY_TIMEOUT,
        Duration::from_millis(20),
    ))
}

/// Waits until the store holds no slot (its in-flight counters go when they reach 0).
async fn until_no_slot_is_held(store: &MemoryStore) {
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        while store.stats().keys > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "slots still held: {} keys",
        store.stats().keys
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_limit_waits_the_rules_retry_after_until_one_ends() {
    let (running, store) = (Running::new(), MemoryStore::new());
    let server = Arc::new(TestServer::start(app(&running, store.clone())).await);
    let mut slow = start_slow(&server, &running, LIMIT as usize).await;

    let refused = Reply::send(server.client.get(server.url("/quick"))).await;
    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refused.body
    );
    assert_eq!(refused.headers["retry-after"], "7", "the rule's own wait");
    assert!(refused.body.contains("in-flight"), "{}", refused.body);

    running.finish.add_permits(1);
    let first = slow
        .join_next()
        .await
        .expect("three")
        .expect("the request task ends");
    assert_eq!(first.status, StatusCode::OK);
    // Its slot is free once the server has sent the body's end, which may come just after the
    // client has read it: ask again until it is.
    let mut admitted = Reply::send(server.client.get(server.url("/quick"))).await;
    for _ in 0..1_000 {
        if admitted.status == StatusCode::OK {
            break;
        }
        tokio::task::yield_now().await;
        admitted = Reply::send(server.client.get(server.url("/quick"))).await;
    }
    assert_eq!(admitted.status, StatusCode::OK, "a freed slot is taken");
    // The fields show the free slots after this request (two still run) and the limit, with
    // no reset time or window: slots come back when requests end.
    assert_eq!(admitted.headers["ratelimit"], r#""in-flight";r=0"#);
    assert_eq!(admitted.headers["ratelimit-policy"], r#""in-flight";q=3"#);

    running.finish.add_permits(LIMIT as usize);
    while let Some(request) = slow.join_next().await {
        assert_eq!(request.expect("ends").status, StatusCode::OK);
    }
    until_no_slot_is_held(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_may_answer_its_refusals_with_503() {
    let (running, store) = (Running::new(), MemoryStore::new());
    let rule = in_flight().on_refusal(tollgate_tower::OnRefusal::Unavailable);
    let layer = RateLimitLayer::new(store.clone()).rule(rule);
    let server = Arc::new(TestServer::start(routes(&running, layer)).await);
    let mut slow = start_slow(&server, &running, LIMIT as usize).await;
    let refused = Reply::send(server.client.get(server.url("/quick"))).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.body
    );
    assert_eq!(refused.headers["retry-after"], "7");
    assert!(refused.body.contains(r#""status":503"#), "{}", refused.body);
    assert_eq!(refused.headers["ratelimit"], r#""in-flight";r=0"#);
    running.finish.add_permits(LIMIT as usize);
    while slow.join_next().await.is_some() {}
    until_no_slot_is_held(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_slot_is_leaked_by_a_thousand_requests_ending_every_way() {
    let (running, store) = (Running::new(), MemoryStore::new());
    let server = Arc::new(TestServer::start(app_with_timeout(&running, store.clone())).await);
    let tasks: Vec<_> = (0..4)
        .map(|task| {
            let server = Arc::clone(&server);
            tokio::spawn(async move {
                let mut seen = Vec::new();
                for round in 0..250 {
                    let path = ["/quick", "/panics", "/hangs", "/streams"][(task + round) % 4];
                    let response = server
                        .client
                        .get(server.url(path))
                        .send()
                        .await
                        .expect("the server answers");
                    let status = response.status();
                    if path == "/streams" && status == StatusCode::OK {
                        // Read the start of an endless body, then go away.
                        let mut response = response;
                        let chunk = response.chunk().await.expect("a chunk");
                        assert!(chunk.is_some());
                        drop(response);
                    }
                    seen.push((path, status));
                }
                seen
            })
        })
        .collect();
    let mut outcomes = std::collections::BTreeMap::<(&str, u16), usize>::new();
    for task in tasks {
        for (path, status) in task.await.expect("the client task ends") {
            *outcomes.entry((path, status.as_u16())).or_default() += 1;
        }
    }
    // Every way of ending happened, and some requests were refused for a slot.
    for (path, status) in [
        ("/quick", 200),
        ("/panics", 500),
        ("/hangs", 504),
        ("/streams", 200),
    ] {
        assert!(
            outcomes.get(&(path, status)).copied().unwrap_or(0) > 0,
            "{path} never answered {status}: {outcomes:?}"
        );
    }
    until_no_slot_is_held(&store).await;
    assert_eq!(*running.now.borrow(), 0);
    assert!(
        running.most.load(std::sync::atomic::Ordering::SeqCst) <= LIMIT as usize,
        "never more than the limit in flight"
    );
}

/// With feature `metrics`, `tollgate_in_flight{rule}` counts the slots running requests hold.
#[cfg(feature = "metrics")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_flight_gauge_counts_the_slots_running_requests_hold() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    // This file's only test that installs the process's recorder, before its layer is built.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let gauge = || {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find_map(|(key, _, _, value)| {
                let named = key.key().name() == "tollgate_in_flight"
                    && key.key().labels().any(|label| label.value() == "in-flight");
                match value {
                    DebugValue::Gauge(value) if named => Some(value.into_inner()),
                    _ => None,
                }
            })
    };

    let (running, store) = (Running::new(), MemoryStore::new());
    let layer = RateLimitLayer::new(store.clone())
        .rule(in_flight())
        .metrics();
    let server = Arc::new(TestServer::start(routes(&running, layer)).await);
    let mut slow = start_slow(&server, &running, 2).await;
    assert_eq!(gauge(), Some(2.0));
    running.finish.add_permits(2);
    while slow.join_next().await.is_some() {}
    until_no_slot_is_held(&store).await;
    // The debugging recorder drains what it shows: the next snapshot has the change since.
    assert_eq!(gauge(), Some(-2.0), "both given back: the gauge is at 0");
}
