//! A rule with `cache_blocked(true)` over real HTTP: two axum servers on loopback ports, one
//! behind a layer on a `BlockedCache`, its twin behind the same rule on a plain in-memory
//! store, both on one manual clock. Every response — status, `Retry-After`, `RateLimit` and
//! `RateLimit-Policy`, problem body — is the same from both, while the cached one asks its store
//! only until the caller is refused; with feature `metrics`, the local refusals are counted as
//! `refused_locally`.

mod common;

use common::server::{Reply, TestServer};

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use std::time::Duration;
use tollgate_core::{MemoryStore, Quota, Rate, Store, Timestamp};
use tollgate_testing::ManualClock;
use tollgate_tower::key::Global;
use tollgate_tower::{RateLimitLayer, Rule};
use tollgate_wrappers::BlockedCache;

fn app<S: Store + Clone>(store: S, cache_blocked: bool) -> Router {
    // Two at once, one back every 30 s.
    let quota = Quota::token_bucket(2, Rate::per_minute(2)).expect("a valid quota");
    let rule = Rule::new("login", quota, Global)
        .expect("a valid rule id")
        .cache_blocked(cache_blocked);
    let layer = RateLimitLayer::new(store).rule(rule);
    #[cfg(feature = "metrics")]
    let layer = layer.metrics();
    Router::new()
        .route("/login", get(|| async { "welcome" }))
        .layer(layer)
}

/// What a response says to the caller about its limit.
fn shown(reply: &Reply) -> (StatusCode, Vec<(String, String)>, String) {
    let headers = [
        "retry-after",
        "ratelimit",
        "ratelimit-policy",
        "content-type",
    ]
    .iter()
    .filter_map(|name| {
        let value = reply.headers.get(*name)?.to_str().ok()?;
        Some(((*name).to_owned(), value.to_owned()))
    })
    .collect();
    (reply.status, headers, reply.body.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_refusal_answers_as_the_stores_and_skips_it() {
    #[cfg(feature = "metrics")]
    let snapshotter = {
        // This file's only test installs the process's recorder, before any layer is built.
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this test binary");
        snapshotter
    };
    let clock = ManualClock::new(Timestamp::from_secs(1_700_000_000));
    let memory = || MemoryStore::builder().clock(clock.clone()).build();
    let cache = BlockedCache::with_clock(memory(), clock.clone());
    let cached = TestServer::start(app(cache.clone(), true)).await;
    let twin = TestServer::start(app(memory(), false)).await;

    let mut replies = Vec::new();
    // Two allowed, the store's refusal, then refusals 0 s, 0.4 s, 10.5 s and 29.9 s later, and
    // the unit that comes back at 30 s.
    for advance_ms in [0, 0, 0, 0, 400, 10_100, 19_400, 100] {
        clock.advance(Duration::from_millis(advance_ms));
        let here = Reply::send(cached.client.get(cached.url("/login"))).await;
        let there = Reply::send(twin.client.get(twin.url("/login"))).await;
        assert_eq!(shown(&here), shown(&there), "after {advance_ms} ms more");
        replies.push(here);
    }
    let statuses: Vec<u16> = replies.iter().map(|reply| reply.status.as_u16()).collect();
    assert_eq!(statuses, [200, 200, 429, 429, 429, 429, 429, 200]);
    let waits: Vec<&str> = replies[2..7]
        .iter()
        .map(|reply| reply.headers["retry-after"].to_str().expect("ascii"))
        .collect();
    assert_eq!(waits, ["30", "30", "30", "20", "1"]);
    let fields = shown(&replies[3]).1;
    assert!(
        fields.iter().any(|(name, _)| name == "ratelimit")
            && fields.iter().any(|(name, _)| name == "ratelimit-policy"),
        "the fields compared are there: {fields:?}"
    );

    let stats = cache.stats();
    assert_eq!(stats.refused_locally, 4, "every refusal after the store's");
    assert_eq!(
        stats.store_checks, 4,
        "two allowed, one refused, and the one at 30 s"
    );

    #[cfg(feature = "metrics")]
    {
        use metrics_util::debugging::DebugValue;
        // One snapshot: taking one drains the counters.
        let snapshot = snapshotter.snapshot().into_vec();
        let counted = |outcome: &str| -> u64 {
            snapshot
                .iter()
                .filter(|(key, _, _, _)| {
                    let key = key.key();
                    key.name() == "tollgate_checks_total"
                        && key.labels().any(|label| label.value() == outcome)
                })
                .map(|(_, _, _, value)| match value {
                    DebugValue::Counter(count) => *count,
                    _ => 0,
                })
                .sum()
        };
        // Both servers count under rule `login`: the twin's refusals are all the store's.
        assert_eq!(counted("refused_locally"), 4);
        assert_eq!(counted("refused"), 1 + 5);
        assert_eq!(counted("allowed"), 3 + 3);
    }
}
