//! Typed limits' refusals reach the layer's top refused callers.

use std::time::{Duration, Instant};

use axum::extract::FromRequestParts;
use tollgate_axum::{Limit, Limiter, Tollgate};
use tollgate_core::{Key, MemoryStore, Quota, QuotaError, RuleId};
use tollgate_tower::RateLimitLayer;

struct SmsPerPhone;

impl Limit for SmsPerPhone {
    const ID: &'static str = "sms-per-phone";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(1, Duration::from_secs(3600))
    }
}

#[tokio::test]
async fn a_typed_limits_refusals_are_counted_with_the_layers() {
    let layer = RateLimitLayer::new(MemoryStore::new()).track_top_refused(10);
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.extensions.insert(Tollgate::from_layer(&layer));
    let limiter = Limiter::from_request_parts(&mut parts, &())
        .await
        .expect("a limiter");
    for _ in 0..4 {
        let _ = limiter
            .check::<SmsPerPhone>(&Key::new("+91-98xxxxxx01"))
            .await;
    }
    let rule = RuleId::new(SmsPerPhone::ID).expect("id");
    let started = Instant::now();
    loop {
        let report = layer.handle().top_refused(&rule, 5).expect("tracked");
        if report.refusals == 3 {
            assert_eq!(report.callers.len(), 1);
            assert_eq!(report.callers[0].count, 3);
            assert!(
                !report.callers[0].caller.contains("98xxxxxx01"),
                "a fingerprint"
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never counted: {report:?}"
        );
        tokio::task::yield_now().await;
    }
}
