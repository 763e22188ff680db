//! The client's counters through the `metrics` facade (feature `metrics`): a retry per refusal
//! waited, a cool-down wait, and each reason a refusal was returned as it is.

#![cfg(feature = "metrics")]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{Server, get, http_client};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tollgate_client::{RetryAfterLayer, RetryPolicy};
use tollgate_core::{Quota, Rate};
use tollgate_tower::Rule;
use tollgate_tower::key::Global;
use tower::{Layer, ServiceExt};

fn counters(snapshotter: &Snapshotter) -> HashMap<String, u64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let DebugValue::Counter(value) = value else {
                return None;
            };
            let labels: Vec<String> = key
                .key()
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            Some((
                format!("{}{{{}}}", key.key().name(), labels.join(",")),
                value,
            ))
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn waits_and_give_ups_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let quota = Quota::token_bucket(1, Rate::every(Duration::from_secs(2))).expect("valid");
    let server = Server::limited(
        Rule::new("feed", quota, Global)
            .expect("valid")
            .disclose(false),
    )
    .await;
    let patient = RetryAfterLayer::new(RetryPolicy::default()).layer(http_client());
    for _ in 0..2 {
        let response = patient
            .clone()
            .oneshot(get(&server.url("/feed")))
            .await
            .expect("answers");
        assert_eq!(response.status(), 200);
    }
    let impatient =
        RetryAfterLayer::new(RetryPolicy::default().max_retries(0)).layer(http_client());
    let refused = impatient
        .oneshot(get(&server.url("/feed")))
        .await
        .expect("answers");
    assert_eq!(refused.status(), 429);
    let counts = counters(&snapshotter);
    assert_eq!(
        counts.get("tollgate_client_retries_total{status=429}"),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(
        counts.get("tollgate_client_gave_up_total{reason=attempts}"),
        Some(&1),
        "{counts:?}"
    );
}
