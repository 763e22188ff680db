//! A rule's alert as it nears its limit, through the real layer on a manual clock: raised once
//! when a caller reaches the rule's share, announced once (a `warn` event on `tollgate::alert`,
//! and with feature `metrics` the gauge and counter), cleared once no caller has reached the
//! share for as long as the allowance takes to be whole again (an `info` event), whatever the
//! traffic in between.
//!
//! Events are recorded by one global recorder for the whole test binary; each test uses rules
//! of its own.

mod common;

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use common::events::{Recorded, Recorder};
use http::{HeaderName, Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_core::{Clock, MemoryStore, Quota, Rate, Timestamp};
use tollgate_testing::ManualClock;
use tollgate_tower::key::{Global, HeaderKey};
use tollgate_tower::{AlertShare, LayerHandle, RateLimitLayer, Rule};
use tower::{Layer, ServiceExt, service_fn};

const START: Timestamp = Timestamp::from_secs(1_800_000_000);

/// A layer over a memory store on `clock`, with `rule`, its alerts timed on `clock`.
fn layer_on(clock: &ManualClock, rule: Rule) -> RateLimitLayer<MemoryStore<ManualClock>> {
    let store = MemoryStore::builder().clock(clock.clone()).build();
    RateLimitLayer::new(store)
        .rule(rule)
        .alert_clock(clock.clone())
}

/// Sends `count` requests from `caller` (header `x-number`); their statuses.
async fn send<St: tollgate_core::Store>(
    layer: &RateLimitLayer<St>,
    caller: &str,
    count: usize,
) -> Vec<StatusCode> {
    let service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let mut statuses = Vec::with_capacity(count);
    for _ in 0..count {
        let request = Request::post("/otp")
            .header("x-number", caller)
            .body(())
            .expect("a valid request");
        let response = service.clone().oneshot(request).await.expect("infallible");
        statuses.push(response.status());
    }
    statuses
}

/// The `tollgate::alert` events of `rule` so far.
fn alert_events(rule: &str) -> Vec<Recorded> {
    let mut events = Recorder::global().on_target("tollgate::alert");
    events.retain(|event| event.field("rule") == Some(rule));
    events
}

/// The ids of the rules alerting now.
fn alerting(handle: &LayerHandle) -> Vec<String> {
    (handle.alerts().iter())
        .map(|alert| alert.rule.as_str().to_owned())
        .collect()
}

fn share(share: f64) -> AlertShare {
    AlertShare::new(share).expect("a valid share")
}

#[tokio::test]
async fn a_global_cap_alerts_once_at_its_share_and_clears_once_its_window_is_over() {
    Recorder::global();
    let clock = ManualClock::new(START);
    let quota = Quota::fixed_window(10, Duration::from_secs(60)).expect("a valid quota");
    let cap = Rule::new("codes-global", quota, Global)
        .expect("a valid id")
        .with_alert_at(share(0.8));
    let layer = layer_on(&clock, cap);
    let handle = layer.handle();

    // Seven codes: below 80 %.
    assert!(
        send(&layer, "+44 7700 900001", 7)
            .await
            .iter()
            .all(|s| s.is_success())
    );
    assert!(handle.alerts().is_empty());
    assert!(alert_events("codes-global").is_empty());

    // The eighth reaches 80 %: raised, once.
    clock.advance(Duration::from_secs(10));
    send(&layer, "+44 7700 900002", 1).await;
    let alerts = handle.alerts();
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].rule.as_str(), "codes-global");
    assert_eq!(alerts[0].alert_at, share(0.8));
    assert_eq!(alerts[0].reached, 0.8);
    assert_eq!(alerts[0].since, clock.now());
    let events = alert_events("codes-global");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].level, tracing::Level::WARN);
    assert_eq!(events[0].field("alert_at"), Some("80 %"));
    assert_eq!(events[0].field("reached"), Some("80 %"));

    // The rest of the window and past it: refusals, and still one event.
    let statuses = send(&layer, "+44 7700 900003", 4).await;
    assert_eq!(statuses[2..], [StatusCode::TOO_MANY_REQUESTS; 2]);
    let alerts = handle.alerts();
    assert_eq!(alerts[0].reached, 1.0, "refused: the whole limit");
    assert_eq!(alerts[0].since, START.saturating_add_micros(10_000_000));
    assert_eq!(alert_events("codes-global").len(), 1);

    // The window ends at START + 60 s: whole again, cleared, once.
    clock.advance(Duration::from_secs(49));
    assert_eq!(alerting(&handle), ["codes-global"]);
    clock.advance(Duration::from_secs(1));
    assert!(handle.alerts().is_empty());
    assert!(handle.alerts().is_empty());
    let events = alert_events("codes-global");
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1].level, tracing::Level::INFO);
    assert_eq!(events[1].field("reached"), Some("100 %"));
    assert_eq!(events[1].field("alerted_for_s"), Some("50"));

    // The next window: half the cap is quiet, 80 % raises it again.
    send(&layer, "+44 7700 900004", 5).await;
    assert!(handle.alerts().is_empty());
    send(&layer, "+44 7700 900004", 3).await;
    assert_eq!(alerting(&handle), ["codes-global"]);
    assert_eq!(alert_events("codes-global").len(), 3);
}

#[tokio::test]
async fn any_key_at_the_share_raises_a_per_key_rule_and_a_key_that_stops_lets_it_clear() {
    Recorder::global();
    let clock = ManualClock::new(START);
    // Four codes a number, one back every 15 s.
    let quota = Quota::token_bucket(4, Rate::per_minute(4)).expect("a valid quota");
    let number = HeaderKey::new(HeaderName::from_static("x-number"));
    let per_number = Rule::new("codes-per-number", quota, number)
        .expect("a valid id")
        .with_alert_at(share(0.75));
    let layer = layer_on(&clock, per_number);
    let handle = layer.handle();

    // Other numbers below the share do not raise it; one number at 3 of 4 does.
    send(&layer, "+44 7700 900101", 2).await;
    send(&layer, "+44 7700 900102", 2).await;
    assert!(handle.alerts().is_empty());
    send(&layer, "+44 7700 900103", 3).await;
    assert_eq!(alerting(&handle), ["codes-per-number"]);

    // Its allowance is whole again 45 s later; other numbers below the share meanwhile do not
    // keep the alert up.
    clock.advance(Duration::from_secs(30));
    send(&layer, "+44 7700 900101", 1).await;
    assert_eq!(alerting(&handle), ["codes-per-number"]);
    clock.advance(Duration::from_secs(14));
    assert_eq!(alerting(&handle), ["codes-per-number"]);
    clock.advance(Duration::from_secs(1));
    assert!(handle.alerts().is_empty());
    let levels: Vec<_> = (alert_events("codes-per-number").iter())
        .map(|event| event.level)
        .collect();
    assert_eq!(levels, [tracing::Level::WARN, tracing::Level::INFO]);
}

#[tokio::test]
async fn a_cap_hovering_at_its_share_stays_raised() {
    Recorder::global();
    let clock = ManualClock::new(START);
    let quota = Quota::fixed_window(10, Duration::from_secs(1)).expect("a valid quota");
    let cap = Rule::new("codes-hovering", quota, Global)
        .expect("a valid id")
        .with_alert_at(share(0.8));
    let layer = layer_on(&clock, cap);
    let handle = layer.handle();
    // Nine a second, second after second: every window passes the share.
    for _ in 0..5 {
        send(&layer, "+44 7700 900201", 9).await;
        assert_eq!(alerting(&handle), ["codes-hovering"]);
        clock.advance(Duration::from_secs(1));
    }
    // Then five a second: the last window that passed ended; cleared.
    send(&layer, "+44 7700 900201", 5).await;
    assert!(handle.alerts().is_empty());
    assert_eq!(
        alert_events("codes-hovering").len(),
        2,
        "raised once, cleared once"
    );
}

#[tokio::test]
async fn rules_without_a_share_never_alert() {
    Recorder::global();
    let clock = ManualClock::new(START);
    let quota = Quota::fixed_window(2, Duration::from_secs(60)).expect("a valid quota");
    let quiet = Rule::new("codes-quiet", quota, Global).expect("a valid id");
    assert_eq!(quiet.alert_at(), None);
    let layer = layer_on(&clock, quiet);
    let statuses = send(&layer, "+44 7700 900301", 3).await;
    assert_eq!(statuses[2], StatusCode::TOO_MANY_REQUESTS);
    assert!(layer.handle().alerts().is_empty());
    assert!(alert_events("codes-quiet").is_empty());
}

#[tokio::test]
async fn a_rule_taken_out_while_alerting_clears_its_alert() {
    Recorder::global();
    let clock = ManualClock::new(START);
    let quota = Quota::fixed_window(1, Duration::from_secs(3_600)).expect("a valid quota");
    let rule = Rule::new("codes-removed", quota, Global)
        .expect("a valid id")
        .with_alert_at(share(1.0));
    let layer = layer_on(&clock, rule);
    let handle = layer.handle();
    send(&layer, "+44 7700 900401", 1).await;
    assert_eq!(alerting(&handle), ["codes-removed"]);
    handle
        .replace_rules(tollgate_tower::RuleSet::new())
        .expect("no rules to refuse");
    assert!(handle.alerts().is_empty());
    let levels: Vec<_> = (alert_events("codes-removed").iter())
        .map(|event| event.level)
        .collect();
    assert_eq!(levels, [tracing::Level::WARN, tracing::Level::INFO]);
}

#[cfg(feature = "metrics")]
#[tokio::test]
async fn the_gauge_and_counter_change_with_the_alert_not_per_request() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

    /// The gauge's and the counter's values for rule `codes-metered` since the last snapshot
    /// (taking one drains them).
    fn values(snapshotter: &Snapshotter) -> (Option<f64>, Option<f64>) {
        let snapshot = snapshotter.snapshot().into_vec();
        let value = |name: &str| {
            (snapshot.iter()).find_map(|(key, _, _, value)| {
                let key = key.key();
                let ours = key.labels().any(|label| label.value() == "codes-metered");
                (key.name() == name && ours).then(|| match value {
                    DebugValue::Counter(count) => *count as f64,
                    DebugValue::Gauge(gauge) => gauge.into_inner(),
                    DebugValue::Histogram(_) => f64::NAN,
                })
            })
        };
        (value(GAUGE), value(COUNTER))
    }
    const GAUGE: &str = "tollgate_rule_alerting";
    const COUNTER: &str = "tollgate_alerts_total";

    Recorder::global();
    let clock = ManualClock::new(START);
    let quota = Quota::fixed_window(10, Duration::from_secs(60)).expect("a valid quota");
    let cap = Rule::new("codes-metered", quota, Global)
        .expect("a valid id")
        .with_alert_at(share(0.8));
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // Handles are made when rules are installed: with this recorder, for this test alone.
    let layer = metrics::with_local_recorder(&recorder, || layer_on(&clock, cap).metrics());
    let handle = layer.handle();
    assert!(tollgate_core::metrics::NAMES.contains(&GAUGE));
    assert!(tollgate_core::metrics::NAMES.contains(&COUNTER));

    send(&layer, "+44 7700 900501", 7).await;
    assert_eq!(
        values(&snapshotter),
        (Some(0.0), Some(0.0)),
        "there from the install"
    );
    send(&layer, "+44 7700 900501", 1).await;
    assert_eq!(values(&snapshotter), (Some(1.0), Some(1.0)), "raised");
    // Requests past the share, refused ones too: nothing recorded (the gauge was drained by
    // the snapshot and is not set again).
    send(&layer, "+44 7700 900501", 4).await;
    assert_eq!(handle.alerts().len(), 1);
    assert_eq!(values(&snapshotter), (Some(0.0), Some(0.0)));
    clock.advance(Duration::from_secs(60));
    assert!(handle.alerts().is_empty());
    assert_eq!(values(&snapshotter), (Some(0.0), Some(0.0)), "cleared");
    send(&layer, "+44 7700 900501", 8).await;
    assert_eq!(values(&snapshotter), (Some(1.0), Some(1.0)), "raised again");
}
