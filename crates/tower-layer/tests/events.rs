//! Refusals are `tracing` events on target `tollgate::refusal`; the allowed path emits nothing.
//!
//! Events are recorded by one global recorder for the whole test binary (a subscriber set for
//! one thread can miss events when tests run in parallel); each test uses policies of its own.

mod common;

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use common::events::{Recorder, RefusalsBy};
use http::{HeaderName, Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_core::{FingerprintSecret, Key, MemoryStore, Quota};
use tollgate_tower::key::HeaderKey;
use tollgate_tower::{KeyLogging, RateLimitLayer, Rule};
use tower::{Layer, ServiceExt, service_fn};

/// Sends `count` requests for one account through an enforced rule `{prefix}-posts` (limit 2)
/// and a shadow rule `{prefix}-trial` (limit 1); returns the statuses.
async fn run(prefix: &str, logging: KeyLogging, count: usize) -> Vec<StatusCode> {
    let key = || HeaderKey::new(HeaderName::from_static("x-account"));
    let window = Duration::from_secs(60);
    let quota = |limit| Quota::fixed_window(limit, window).expect("a valid quota");
    let enforced = Rule::new(&format!("{prefix}-posts"), quota(2), key()).expect("rule id");
    let shadow = Rule::new(&format!("{prefix}-trial"), quota(1), key())
        .expect("rule id")
        .shadow();
    let service = RateLimitLayer::new(MemoryStore::new())
        .rule(enforced)
        .rule(shadow)
        .key_logging(logging)
        .layer(service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
        }));
    let mut statuses = Vec::new();
    for _ in 0..count {
        let request = Request::post("/posts")
            .header("x-account", "account-4821")
            .body(())
            .expect("a valid request");
        let response = service.clone().oneshot(request).await.expect("infallible");
        statuses.push(response.status());
    }
    statuses
}

/// The refusal events of the two rules of `prefix`, in order.
fn refusals(prefix: &str) -> Vec<common::events::Recorded> {
    let recorder = Recorder::global();
    let mut events = recorder.refusals_by(&format!("{prefix}-trial"));
    events.extend(recorder.refusals_by(&format!("{prefix}-posts")));
    events
}

#[tokio::test]
async fn the_allowed_path_emits_nothing() {
    Recorder::global();
    let statuses = run("quiet", KeyLogging::Hashed, 1).await;
    assert_eq!(statuses, [StatusCode::OK]);
    assert!(refusals("quiet").is_empty());
}

#[tokio::test]
async fn shadow_and_real_refusals_are_events_with_a_hashed_key() {
    Recorder::global();
    let statuses = run("hashed", KeyLogging::Hashed, 3).await;
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    let trial = Recorder::global().refusals_by("hashed-trial");
    let posts = Recorder::global().refusals_by("hashed-posts");
    // Request 2: the shadow rule would refuse; request 3: the real rule refuses, and the shadow
    // rule is reported again.
    assert_eq!((trial.len(), posts.len()), (2, 1));
    assert!(
        trial
            .iter()
            .all(|event| event.field("enforced") == Some("false"))
    );
    assert_eq!(posts[0].field("enforced"), Some("true"));
    assert_eq!(posts[0].field("reason"), Some("Some(LimitReached)"));
    let fingerprint = Key::new("account-4821").fingerprint(FingerprintSecret::process());
    assert!(
        refusals("hashed")
            .iter()
            .all(|event| event.field("key") == Some(fingerprint.as_str()))
    );
}

#[tokio::test]
async fn raw_key_logging_shows_the_key() {
    Recorder::global();
    run("raw", KeyLogging::Raw, 3).await;
    let events = refusals("raw");
    assert_eq!(events.len(), 3);
    assert!(
        events.iter().all(|event| event
            .field("key")
            .is_some_and(|key| key.contains("account-4821"))),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_configured_secret_gives_the_same_fingerprint_on_every_gateway() {
    Recorder::global();
    let secret = FingerprintSecret::from_bytes(b"shared by the whole fleet").expect("long enough");
    run("fleet-a", KeyLogging::HashedWith(secret), 3).await;
    run("fleet-b", KeyLogging::HashedWith(secret), 3).await;
    let expected = Key::new("account-4821").fingerprint(&secret);
    let unkeyed_or_process = Key::new("account-4821").fingerprint(FingerprintSecret::process());
    assert_ne!(expected, unkeyed_or_process);
    let events: Vec<_> = refusals("fleet-a")
        .into_iter()
        .chain(refusals("fleet-b"))
        .collect();
    assert_eq!(events.len(), 6);
    assert!(
        events
            .iter()
            .all(|event| event.field("key") == Some(expected.as_str())),
        "{events:?}"
    );
}

#[tokio::test]
async fn refusals_are_debug_events_summed_up_at_info_at_most_once_a_minute() {
    Recorder::global();
    run("flood", KeyLogging::Hashed, 10).await;
    let recorder = Recorder::global();
    let posts = recorder.refusals_by("flood-posts");
    assert_eq!(posts.len(), 8, "one debug event per refusal");
    assert!(
        posts
            .iter()
            .all(|event| event.level == tracing::Level::DEBUG)
    );
    let summaries = recorder.summaries_of("flood-posts");
    assert_eq!(
        summaries.len(),
        1,
        "one info summary within the minute: {summaries:?}"
    );
    assert_eq!(
        summaries[0].field("refusals"),
        Some("1"),
        "the first refusal is summed up at once"
    );
}

#[tokio::test]
async fn the_block_event_of_an_escalating_rule_shows_the_key_as_configured() {
    Recorder::global();
    let quota = Quota::fixed_window(1, Duration::from_secs(60)).expect("a valid quota");
    let escalation =
        tollgate_tower::Escalation::new(1, Duration::from_secs(60), Duration::from_secs(600))
            .expect("a valid escalation");
    let rule = Rule::new(
        "esc-raw",
        quota,
        HeaderKey::new(HeaderName::from_static("x-account")),
    )
    .expect("rule id")
    .escalate(escalation)
    .expect("room for derived ids");
    let service = RateLimitLayer::new(MemoryStore::new())
        .rule(rule)
        .key_logging(KeyLogging::Raw)
        .layer(service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
        }));
    for _ in 0..4 {
        let request = Request::get("/")
            .header("x-account", "account-77")
            .body(())
            .expect("a valid request");
        service.clone().oneshot(request).await.expect("infallible");
    }
    let mut blocks = Recorder::global().on_target("tollgate::refusal");
    blocks.retain(|event| event.field("rule") == Some("esc-raw.block"));
    assert!(!blocks.is_empty(), "the caller was blocked");
    assert!(
        blocks.iter().all(|event| event
            .field("key")
            .is_some_and(|key| key.contains("account-77"))),
        "{blocks:?}"
    );
}

/// Two requests for `account` through `layer` (its rule allows one).
async fn refuse_once(layer: &RateLimitLayer<MemoryStore>, account: &str) {
    let service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    for _ in 0..2 {
        let request = Request::get("/")
            .header("x-account", account)
            .body(())
            .expect("a request");
        let _ = service.clone().oneshot(request).await.expect("infallible");
    }
}

fn one_a_minute(policy: &str) -> Rule {
    let quota = Quota::fixed_window(1, Duration::from_secs(60)).expect("a valid quota");
    let key = HeaderKey::new(HeaderName::from_static("x-account"));
    Rule::new(policy, quota, key).expect("rule id")
}

#[tokio::test]
async fn key_logging_set_on_a_clone_is_that_clones_own() {
    Recorder::global();
    let base = RateLimitLayer::new(MemoryStore::new()).rule(one_a_minute("clone-logging"));
    let _raw = base.clone().key_logging(KeyLogging::Raw);
    refuse_once(&base, "secret-account").await;
    let keys = Recorder::global().keys_refused_by("clone-logging");
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(
        !keys[0].contains("secret-account"),
        "still hashed: {keys:?}"
    );
}

#[tokio::test]
async fn rules_replaced_through_an_earlier_handle_log_keys_as_the_serving_layer_says() {
    Recorder::global();
    let layer = RateLimitLayer::new(MemoryStore::new()).key_logging(KeyLogging::Raw);
    let early = layer.handle();
    let layer = layer.key_logging(KeyLogging::Hashed);
    early
        .replace_rules(tollgate_tower::RuleSet::new().rule(one_a_minute("early-handle")))
        .expect("a memory store counts it");
    refuse_once(&layer, "should-be-hashed").await;
    let keys = Recorder::global().keys_refused_by("early-handle");
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(!keys[0].contains("should-be-hashed"), "hashed: {keys:?}");
}
