//! Escalation: a caller that keeps sending after refusals is blocked for longer, on every
//! gateway that shares the store.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_core::{MemoryStore, Quota, Rate, Store, Timestamp};
use tollgate_testing::ManualClock;
use tollgate_tower::key::PeerIp;
use tollgate_tower::{Escalation, RateLimitLayer, ResponseBody, Rule};
use tollgate_wrappers::BlockedCache;
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt, service_fn};

const HOUR: Duration = Duration::from_secs(3_600);

/// One gateway's service.
type Gateway = BoxCloneService<Request<()>, Response<ResponseBody<Empty<Bytes>>>, Infallible>;

/// A gateway: 2 requests an hour per peer; more than 3 refusals in a minute block for 2 hours;
/// `cache_blocked`: the rule lets a blocked-caller cache answer (when the store has one).
fn gateway<S: Store + Clone>(store: S, cache_blocked: bool) -> Gateway {
    let quota = Quota::token_bucket(2, Rate::every(HOUR)).expect("valid quota");
    let escalation =
        Escalation::new(3, Duration::from_secs(60), 2 * HOUR).expect("valid escalation");
    let rule = Rule::new("reads", quota, PeerIp::new())
        .expect("valid rule id")
        .cache_blocked(cache_blocked)
        .escalate(escalation)
        .expect("room for the derived rule ids");
    let service = RateLimitLayer::new(store)
        .rule(rule)
        .layer(service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
        }));
    BoxCloneService::new(service)
}

fn from(peer: [u8; 4]) -> Request<()> {
    let mut request = Request::get("/").body(()).expect("valid request");
    request
        .extensions_mut()
        .insert(SocketAddr::from((peer, 40_000)));
    request
}

async fn status_and_retry(service: &Gateway, peer: [u8; 4]) -> (StatusCode, Option<u64>) {
    let response = service
        .clone()
        .oneshot(from(peer))
        .await
        .expect("infallible");
    // Let the escalation's strike task (spawned) land.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let retry = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok()?.parse().ok());
    (response.status(), retry)
}

#[tokio::test]
async fn hammering_after_refusals_blocks_on_every_gateway_sharing_the_store() {
    let clock = ManualClock::new(Timestamp::from_secs(1_700_000_000));
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let (first, second) = (gateway(store.clone(), false), gateway(store.clone(), false));
    let attacker = [203, 0, 113, 7];

    for _ in 0..2 {
        assert_eq!(status_and_retry(&first, attacker).await.0, StatusCode::OK);
    }
    for _ in 0..4 {
        let (status, retry) = status_and_retry(&first, attacker).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(retry, Some(3_600), "an hour until the next token");
    }
    // The fourth refusal went past three strikes: the caller is now blocked for two hours.
    clock.advance(HOUR);
    let (status, retry) = status_and_retry(&second, attacker).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "blocked on the other gateway too"
    );
    assert_eq!(
        retry,
        Some(3_600),
        "until the block ends, not the next token"
    );
    assert_eq!(
        status_and_retry(&second, [198, 51, 100, 1]).await.0,
        StatusCode::OK,
        "other callers are not blocked"
    );
    clock.advance(HOUR);
    assert_eq!(
        status_and_retry(&first, attacker).await.0,
        StatusCode::OK,
        "the block ends after two hours"
    );
}

#[tokio::test]
async fn a_few_refusals_do_not_block() {
    let clock = ManualClock::new(Timestamp::from_secs(1_700_000_000));
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let service = gateway(store, false);
    let caller = [198, 51, 100, 9];
    for _ in 0..2 {
        assert_eq!(status_and_retry(&service, caller).await.0, StatusCode::OK);
    }
    for _ in 0..3 {
        assert_eq!(
            status_and_retry(&service, caller).await.0,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
    clock.advance(HOUR);
    assert_eq!(
        status_and_retry(&service, caller).await.0,
        StatusCode::OK,
        "three refusals stay within the strikes: no block"
    );
}

/// An escalated caller is blocked for 2 h: a gateway with a blocked-caller cache answers as one
/// without it (`Retry-After: 7200`, not the rule's own 3600), since a request with a block gate
/// always asks the store, and charges no strikes while blocked.
#[tokio::test]
async fn a_cached_refusal_never_hides_an_escalation_block() {
    let clock = ManualClock::new(Timestamp::from_secs(1_700_000_000));
    let memory = || MemoryStore::builder().clock(clock.clone()).build();
    let cached = gateway(BlockedCache::with_clock(memory(), clock.clone()), true);
    let twin = gateway(memory(), false);
    let attacker = [203, 0, 113, 7];
    let mut seen = Vec::new();
    for _ in 0..7 {
        let here = status_and_retry(&cached, attacker).await;
        let there = status_and_retry(&twin, attacker).await;
        seen.push((here, there));
    }
    for (at, (here, there)) in seen.iter().enumerate() {
        assert_eq!(
            here, there,
            "request {at}: cached {here:?}, store {there:?} (all: {seen:?})"
        );
    }
}
