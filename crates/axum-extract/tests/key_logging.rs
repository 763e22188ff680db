//! A typed limit's refusal events show keys as its `Tollgate` says — with a layer or without.

#[path = "../../tower-layer/tests/common/mod.rs"]
mod common;

use std::time::Duration;

use axum::extract::FromRequestParts;
use common::events::{Recorder, RefusalsBy};
use tollgate_axum::{Limit, Limiter, Tollgate};
use tollgate_core::{Key, MemoryStore, Quota, QuotaError};
use tollgate_tower::{KeyLogging, RateLimitLayer};

macro_rules! one_an_hour {
    ($name:ident, $id:literal) => {
        struct $name;
        impl Limit for $name {
            const ID: &'static str = $id;
            fn default_quota() -> Result<Quota, QuotaError> {
                Quota::fixed_window(1, Duration::from_secs(3_600))
            }
        }
    };
}
one_an_hour!(WithoutLayer, "typed-without-layer");
one_an_hour!(RawOverHashedLayer, "typed-raw-over-hashed");
one_an_hour!(HashedOverRawLayer, "typed-hashed-over-raw");

async fn limiter(tollgate: Tollgate) -> Limiter {
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.extensions.insert(tollgate);
    Limiter::from_request_parts(&mut parts, &())
        .await
        .expect("a Tollgate extension")
}

#[tokio::test]
async fn a_typed_limits_events_show_keys_as_its_tollgate_says() {
    Recorder::global();
    let without = limiter(Tollgate::new(MemoryStore::new()).key_logging(KeyLogging::Raw)).await;
    let hashed_layer = RateLimitLayer::new(MemoryStore::new());
    let raw = limiter(Tollgate::from_layer(&hashed_layer).key_logging(KeyLogging::Raw)).await;
    let raw_layer = RateLimitLayer::new(MemoryStore::new()).key_logging(KeyLogging::Raw);
    let hashed = limiter(Tollgate::from_layer(&raw_layer).key_logging(KeyLogging::Hashed)).await;
    for _ in 0..2 {
        let _ = without.check::<WithoutLayer>(&Key::new("shown-1")).await;
        let _ = raw.check::<RawOverHashedLayer>(&Key::new("shown-2")).await;
        let _ = hashed
            .check::<HashedOverRawLayer>(&Key::new("private"))
            .await;
    }
    let keys = Recorder::global().keys_refused_by("typed-without-layer");
    assert!(keys.len() == 1 && keys[0].contains("shown-1"), "{keys:?}");
    let keys = Recorder::global().keys_refused_by("typed-raw-over-hashed");
    assert!(keys.len() == 1 && keys[0].contains("shown-2"), "{keys:?}");
    let keys = Recorder::global().keys_refused_by("typed-hashed-over-raw");
    assert!(keys.len() == 1 && !keys[0].contains("private"), "{keys:?}");
}
