//! Refusals are `tracing` events on target `tollgate::refusal`; the allowed path emits nothing.

use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_core::{Key, MemoryStore, Quota};
use tollgate_tower::key::HeaderKey;
use tollgate_tower::{KeyLogging, RateLimitLayer, Rule};
use tower::{Layer, ServiceExt, service_fn};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One recorded event: its target and fields as text.
#[derive(Debug, Clone, Default)]
struct Recorded {
    target: String,
    fields: Vec<(String, String)>,
}

impl Recorded {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.as_str())
    }
}

impl Visit for Recorded {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.fields
            .push((field.name().to_owned(), format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .push((field.name().to_owned(), value.to_owned()));
    }
}

/// A subscriber that keeps every event.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Recorded>>>);

impl Recorder {
    fn refusals(&self) -> Vec<Recorded> {
        let events = self.0.lock().expect("recorder lock");
        events
            .iter()
            .filter(|event| event.target == "tollgate::refusal")
            .cloned()
            .collect()
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut recorded = Recorded {
            target: event.metadata().target().to_owned(),
            ..Recorded::default()
        };
        event.record(&mut recorded);
        self.0.lock().expect("recorder lock").push(recorded);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Sends `count` requests for `account` through one enforced rule (limit 2) and one shadow
/// rule (limit 1), recording events; returns the statuses.
fn run(logging: KeyLogging, count: usize, recorder: &Recorder) -> Vec<StatusCode> {
    let key = || HeaderKey::new(HeaderName::from_static("x-account"));
    let window = Duration::from_secs(60);
    let enforced = Rule::new(
        "posts",
        Quota::fixed_window(2, window).expect("quota"),
        key(),
    )
    .expect("rule id");
    let shadow = Rule::new(
        "posts-trial",
        Quota::fixed_window(1, window).expect("quota"),
        key(),
    )
    .expect("rule id")
    .shadow();
    let service = RateLimitLayer::new(MemoryStore::new())
        .rule(enforced)
        .rule(shadow)
        .key_logging(logging)
        .layer(service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
        }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    tracing::subscriber::with_default(recorder.clone(), || {
        runtime.block_on(async {
            let mut statuses = Vec::new();
            for _ in 0..count {
                let request = Request::post("/posts")
                    .header("x-account", "account-4821")
                    .body(())
                    .expect("request");
                let response = service.clone().oneshot(request).await.expect("infallible");
                statuses.push(response.status());
            }
            statuses
        })
    })
}

#[test]
fn the_allowed_path_emits_nothing() {
    let recorder = Recorder::default();
    let statuses = run(KeyLogging::Hashed, 1, &recorder);
    assert_eq!(statuses, [StatusCode::OK]);
    assert!(
        recorder.0.lock().unwrap().is_empty(),
        "no event of any kind"
    );
}

#[test]
fn shadow_and_real_refusals_are_events_with_a_hashed_key() {
    let recorder = Recorder::default();
    let statuses = run(KeyLogging::Hashed, 3, &recorder);
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    let refusals = recorder.refusals();
    let rules: Vec<_> = refusals
        .iter()
        .map(|event| event.field("rule").unwrap())
        .collect();
    // Request 2: the shadow rule would refuse; request 3: the real one refuses (and the shadow
    // rule is reported again).
    assert_eq!(rules, ["posts-trial", "posts", "posts-trial"]);
    assert_eq!(refusals[0].field("enforced"), Some("false"));
    assert_eq!(refusals[1].field("enforced"), Some("true"));
    let fingerprint = Key::new("account-4821").fingerprint();
    assert!(
        refusals
            .iter()
            .all(|event| event.field("key") == Some(fingerprint.as_str()))
    );
    assert_eq!(refusals[1].field("reason"), Some("Some(LimitReached)"));
}

#[test]
fn raw_key_logging_shows_the_key() {
    let recorder = Recorder::default();
    run(KeyLogging::Raw, 3, &recorder);
    let refusals = recorder.refusals();
    assert!(!refusals.is_empty());
    assert!(
        refusals.iter().all(|event| event
            .field("key")
            .is_some_and(|key| key.contains("account-4821"))),
        "{refusals:?}"
    );
}
