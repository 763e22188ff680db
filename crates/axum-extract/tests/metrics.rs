//! Typed limits count their decisions like the layer's rules when the layer records metrics.

#![cfg(feature = "metrics")]

use std::time::Duration;

use axum::extract::FromRequestParts;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tollgate_axum::{Limit, Limiter, Tollgate};
use tollgate_core::{Key, MemoryStore, Quota, QuotaError};
use tollgate_tower::RateLimitLayer;

struct Follows;

impl Limit for Follows {
    const ID: &'static str = "follows";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(2, Duration::from_secs(86_400))
    }
}

#[tokio::test]
async fn a_typed_limit_counts_allowed_refused_and_near_limit() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let layer = RateLimitLayer::new(MemoryStore::new()).metrics();
    let tollgate = Tollgate::from_layer(&layer);
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.extensions.insert(tollgate);
    let limiter = Limiter::from_request_parts(&mut parts, &())
        .await
        .expect("a limiter");
    let mut allowed = 0;
    for _ in 0..3 {
        if limiter.check::<Follows>(&Key::new("ada")).await.is_ok() {
            allowed += 1;
        }
    }
    assert_eq!(allowed, 2);
    let counts: Vec<(String, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(value) => {
                let labels: Vec<String> = key
                    .key()
                    .labels()
                    .map(|label| label.value().to_owned())
                    .collect();
                Some((format!("{} {}", key.key().name(), labels.join(" ")), value))
            }
            _ => None,
        })
        .collect();
    let count = |name: &str| {
        counts
            .iter()
            .find(|(seen, _)| seen == name)
            .map_or(0, |(_, value)| *value)
    };
    assert_eq!(
        count("tollgate_checks_total follows allowed"),
        2,
        "{counts:?}"
    );
    assert_eq!(
        count("tollgate_checks_total follows refused"),
        1,
        "{counts:?}"
    );
    assert_eq!(count("tollgate_near_limit_total follows"), 1, "{counts:?}");
}
