//! Faults, each bounded in time, on a redis-server of the test's own: killed under load, then
//! restarted; paused with SIGSTOP, then resumed. The store is wrapped in `FallbackStore` as in
//! production, with short deadlines (these are the only tests with short timeouts; they assert
//! "within the timeout plus slack", the slack allowing for a loaded CI machine).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tollgate_core::{FallbackStore, Item, Key, OnStoreFailure, Quota, RuleId, Store};
use tollgate_redis::{ConnectionSettings, RedisStore};
use tollgate_redis_harness::RedisServer;

const TIMEOUT: Duration = Duration::from_millis(50);
const COOL_DOWN: Duration = Duration::from_millis(200);
/// What a loaded 2-core machine may add to a deadline.
const SLACK: Duration = Duration::from_millis(250);
const BACK_WITHIN: Duration = Duration::from_secs(2);

type Guarded = FallbackStore<RedisStore>;

async fn guarded(server: &RedisServer) -> Arc<Guarded> {
    let store = RedisStore::builder()
        .prefix(common::unique_prefix())
        .settings(ConnectionSettings {
            connect_timeout: Duration::from_millis(200),
            response_timeout: Duration::from_millis(200),
        })
        .connect(&server.url())
        .await
        .expect("connect");
    let store = FallbackStore::builder(store)
        .timeout(TIMEOUT)
        .failure_threshold(3)
        .cool_down(COOL_DOWN)
        .build();
    Arc::new(store)
}

/// A limit the load never reaches, whose keys live until the day ends (long enough to be seen
/// in Redis).
fn quota() -> Quota {
    Quota::fixed_window(1 << 40, Duration::from_secs(86_400)).expect("valid")
}

/// Checks one item and says how long it took and whether the store allowed it (`None`: error).
async fn timed_check(
    store: &Guarded,
    policy: OnStoreFailure,
    key: &Key,
) -> (Duration, Option<bool>) {
    let rule = RuleId::new("fault").expect("id");
    let item = Item::new(&rule, quota(), key).with_store_failure(policy);
    let started = Instant::now();
    let answer = store.check_one(&item).await;
    (
        started.elapsed(),
        answer.ok().map(|answer| answer.decision().is_allowed()),
    )
}

/// Background load: tasks checking until told to stop; panics surface when they are joined.
fn load(
    store: &Arc<Guarded>,
    tasks: usize,
) -> (Arc<AtomicBool>, Vec<tokio::task::JoinHandle<u64>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let handles = (0..tasks)
        .map(|task| {
            let (store, stop) = (Arc::clone(store), Arc::clone(&stop));
            tokio::spawn(async move {
                let key = Key::new(format!("load-{task}"));
                let mut checks = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (took, _) = timed_check(&store, OnStoreFailure::Open, &key).await;
                    assert!(took <= TIMEOUT + SLACK, "a check under load took {took:?}");
                    checks += 1;
                    tokio::task::yield_now().await;
                }
                checks
            })
        })
        .collect();
    (stop, handles)
}

/// Whether Redis itself holds the state of a fresh key checked through `store`.
async fn counted_in_redis(store: &Guarded, server: &RedisServer, attempt: u32) -> bool {
    let rule = RuleId::new("fault").expect("id");
    let key = Key::new(format!("probe-{attempt}"));
    let _ = timed_check(store, OnStoreFailure::Open, &key).await;
    let name = store
        .primary()
        .stored_key(&rule, &key, quota().algorithm())
        .expect("known");
    server
        .cli(&["exists", &name])
        .is_ok_and(|answer| answer.trim() == "1")
}

/// Polls until Redis counts again; how long that took, or `None` after `BACK_WITHIN` × 3.
async fn time_until_counted_in_redis(store: &Guarded, server: &RedisServer) -> Option<Duration> {
    let started = Instant::now();
    let mut attempt = 0;
    while started.elapsed() < BACK_WITHIN * 3 {
        attempt += 1;
        if counted_in_redis(store, server, attempt).await {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

#[test]
fn a_killed_server_fails_open_and_closed_rules_as_planned_and_is_used_again_soon_after_restart() {
    let server = RedisServer::start().expect("start redis-server");
    common::block_on(async {
        let store = guarded(&server).await;
        let key = Key::new("user77");
        assert_eq!(
            timed_check(&store, OnStoreFailure::Closed, &key).await.1,
            Some(true)
        );
        let (stop, handles) = load(&store, 8);
        tokio::time::sleep(Duration::from_millis(100)).await;

        server.kill().expect("kill redis-server");
        for _ in 0..20 {
            let (took, open) = timed_check(&store, OnStoreFailure::Open, &key).await;
            assert_eq!(open, Some(true), "an open rule allows while Redis is down");
            assert!(took <= TIMEOUT + SLACK, "open rule answered in {took:?}");
            let (took, closed) = timed_check(&store, OnStoreFailure::Closed, &key).await;
            assert_eq!(
                closed, None,
                "a closed rule fails (the layer answers 503), never refuses"
            );
            assert!(took <= TIMEOUT + SLACK, "closed rule answered in {took:?}");
        }
        let stats = store.stats();
        assert!(stats.breaker_open && stats.breaker_opened >= 1, "{stats:?}");

        server.restart().expect("restart redis-server");
        let back = time_until_counted_in_redis(&store, &server).await;
        stop.store(true, Ordering::Relaxed);
        for handle in handles {
            assert!(handle.await.expect("no check panicked") > 0);
        }
        let back = back.expect("Redis is used again after the restart");
        assert!(
            back <= BACK_WITHIN,
            "back on Redis {back:?} after the restart"
        );
        assert_eq!(
            timed_check(&store, OnStoreFailure::Closed, &key).await.1,
            Some(true)
        );
        assert!(store.stats().breaker_closed >= 1);
    });
}

#[test]
fn a_paused_server_adds_at_most_the_timeout_and_opens_the_breaker() {
    let server = RedisServer::start().expect("start redis-server");
    common::block_on(async {
        let store = guarded(&server).await;
        let key = Key::new("user77");
        assert_eq!(
            timed_check(&store, OnStoreFailure::Open, &key).await.1,
            Some(true)
        );

        server.pause().expect("SIGSTOP redis-server");
        let mut latencies = Vec::new();
        for _ in 0..10 {
            let (took, allowed) = timed_check(&store, OnStoreFailure::Open, &key).await;
            assert_eq!(allowed, Some(true));
            latencies.push(took);
        }
        let stats = store.stats();
        server.resume().expect("SIGCONT redis-server");
        assert!(
            latencies.iter().all(|took| *took <= TIMEOUT + SLACK),
            "latencies while paused: {latencies:?}"
        );
        assert!(stats.timeouts >= 3, "{stats:?}");
        assert!(
            stats.breaker_opened >= 1 && stats.short_circuited >= 1,
            "{stats:?}"
        );
        // Once open, calls do not wait on Redis at all.
        let after_open = &latencies[4..];
        assert!(
            after_open.iter().any(|took| *took < TIMEOUT),
            "{latencies:?}"
        );

        let back = time_until_counted_in_redis(&store, &server).await;
        let back = back.expect("Redis is used again after SIGCONT");
        assert!(back <= BACK_WITHIN, "back on Redis {back:?} after resuming");
        assert!(store.stats().breaker_closed >= 1);
    });
}

#[test]
fn a_server_that_was_never_there_fails_fast_and_never_refuses() {
    let server = RedisServer::start().expect("start redis-server");
    common::block_on(async {
        let store = guarded(&server).await;
        server.kill().expect("kill redis-server");
        let key = Key::new("user77");
        for policy in [OnStoreFailure::Open, OnStoreFailure::Local] {
            let (took, allowed) = timed_check(&store, policy, &key).await;
            assert_eq!(allowed, Some(true), "{policy:?}");
            assert!(took <= TIMEOUT + SLACK, "{policy:?} took {took:?}");
        }
    });
}
