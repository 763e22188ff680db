//! Faults on a redis-server of the test's own: killed under load, then restarted; paused with
//! SIGSTOP, then resumed. The store is wrapped in `FallbackStore` as in production, with short
//! deadlines. The tests assert what happened — who answered (the fallback's counters: timeouts,
//! short-circuited calls, breaker openings), what was allowed — and wait on state (Redis holding
//! a fresh key again) with a generous deadline; they never assert how long a call took, which a
//! busy machine decides. That each call waits at most the deadline is `FallbackStore`'s
//! contract, tested on paused time in tollgate-core.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate_core::{Item, Key, OnStoreFailure, Quota, RuleId, Store};
use tollgate_redis::{ConnectionSettings, RedisStore};
use tollgate_redis_harness::RedisServer;
use tollgate_wrappers::FallbackStore;

const TIMEOUT: Duration = Duration::from_millis(50);
const COOL_DOWN: Duration = Duration::from_millis(200);
/// How long Redis may take to be used again after it is back, however busy the machine.
const BACK_WITHIN: Duration = Duration::from_secs(30);

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

/// Checks one item and says whether the store allowed it (`None`: an error).
async fn check(store: &Guarded, policy: OnStoreFailure, key: &Key) -> Option<bool> {
    let rule = RuleId::new("fault").expect("id");
    let item = Item::new(&rule, quota(), key).with_store_failure(policy);
    let answer = store.check_one(&item).await;
    answer.ok().map(|answer| answer.decision().is_allowed())
}

/// Background load: tasks checking until told to stop, each an open rule that must always be
/// allowed; how many checks they made so far; panics surface when they are joined.
fn load(
    store: &Arc<Guarded>,
    tasks: usize,
) -> (
    Arc<AtomicBool>,
    Arc<AtomicU64>,
    Vec<tokio::task::JoinHandle<u64>>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let made = Arc::new(AtomicU64::new(0));
    let handles = (0..tasks)
        .map(|task| {
            let (store, stop, made) = (Arc::clone(store), Arc::clone(&stop), Arc::clone(&made));
            tokio::spawn(async move {
                let key = Key::new(format!("load-{task}"));
                let mut checks = 0;
                while !stop.load(Ordering::Relaxed) {
                    let allowed = check(&store, OnStoreFailure::Open, &key).await;
                    assert_eq!(allowed, Some(true), "an open rule under load is allowed");
                    checks += 1;
                    made.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
                checks
            })
        })
        .collect();
    (stop, made, handles)
}

/// Whether Redis itself holds the state of a fresh key checked through `store`.
async fn counted_in_redis(store: &Guarded, server: &RedisServer, attempt: u32) -> bool {
    let rule = RuleId::new("fault").expect("id");
    let key = Key::new(format!("probe-{attempt}"));
    let _ = check(store, OnStoreFailure::Open, &key).await;
    let name = store
        .primary()
        .stored_key(&rule, &key, quota().algorithm())
        .expect("known");
    server
        .cli(&["exists", &name])
        .is_ok_and(|answer| answer.trim() == "1")
}

/// Polls until Redis counts again; how long that took, or `None` after `BACK_WITHIN`.
async fn time_until_counted_in_redis(store: &Guarded, server: &RedisServer) -> Option<Duration> {
    let started = Instant::now();
    let mut attempt = 0;
    while started.elapsed() < BACK_WITHIN {
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
            check(&store, OnStoreFailure::Closed, &key).await,
            Some(true)
        );
        let (stop, made, handles) = load(&store, 8);
        // The load is running once it has made some checks.
        let started = Instant::now();
        while made.load(Ordering::Relaxed) < 16 {
            assert!(started.elapsed() < BACK_WITHIN, "the load never started");
            tokio::task::yield_now().await;
        }

        server.kill().expect("kill redis-server");
        for _ in 0..20 {
            let open = check(&store, OnStoreFailure::Open, &key).await;
            assert_eq!(open, Some(true), "an open rule allows while Redis is down");
            let closed = check(&store, OnStoreFailure::Closed, &key).await;
            assert_eq!(
                closed, None,
                "a closed rule fails (the layer answers 503), never refuses"
            );
        }
        let stats = store.stats();
        assert!(stats.breaker_open && stats.breaker_opened >= 1, "{stats:?}");
        assert!(
            stats.short_circuited >= 1,
            "the open breaker answers at once: {stats:?}"
        );

        server.restart().expect("restart redis-server");
        let back = time_until_counted_in_redis(&store, &server).await;
        stop.store(true, Ordering::Relaxed);
        for handle in handles {
            assert!(handle.await.expect("no check panicked") > 0);
        }
        back.expect("Redis is used again after the restart");
        assert_eq!(
            check(&store, OnStoreFailure::Closed, &key).await,
            Some(true)
        );
        assert!(store.stats().breaker_closed >= 1);
    });
}

#[test]
fn a_paused_server_times_out_opens_the_breaker_and_is_used_again_once_resumed() {
    let server = RedisServer::start().expect("start redis-server");
    common::block_on(async {
        let store = guarded(&server).await;
        let key = Key::new("user77");
        assert_eq!(check(&store, OnStoreFailure::Open, &key).await, Some(true));

        server.pause().expect("SIGSTOP redis-server");
        for _ in 0..10 {
            let allowed = check(&store, OnStoreFailure::Open, &key).await;
            assert_eq!(allowed, Some(true), "an open rule allows while Redis hangs");
        }
        let stats = store.stats();
        server.resume().expect("SIGCONT redis-server");
        assert!(
            stats.timeouts >= 3,
            "calls to the hung server time out: {stats:?}"
        );
        assert!(
            stats.breaker_opened >= 1 && stats.short_circuited >= 1,
            "then the breaker answers without waiting: {stats:?}"
        );

        let back = time_until_counted_in_redis(&store, &server).await;
        back.expect("Redis is used again after SIGCONT");
        assert!(store.stats().breaker_closed >= 1);
    });
}

#[test]
fn a_server_that_is_gone_is_answered_by_the_fallback_and_never_refuses() {
    let server = RedisServer::start().expect("start redis-server");
    common::block_on(async {
        let store = guarded(&server).await;
        server.kill().expect("kill redis-server");
        let key = Key::new("user77");
        for policy in [OnStoreFailure::Open, OnStoreFailure::Local] {
            let allowed = check(&store, policy, &key).await;
            assert_eq!(allowed, Some(true), "{policy:?}");
        }
        assert_eq!(
            store.stats().fallback_checks,
            2,
            "both answered by the fallback"
        );
    });
}

/// What `server` counts under `INFO section` for the line starting `prefix` (`calls=` or
/// `count=`, the first number after it), 0 when absent.
fn stat(server: &RedisServer, section: &str, prefix: &str, field: &str) -> u64 {
    let info = server.cli(&["INFO", section]).expect("INFO");
    info.lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| {
            line.split(field)
                .nth(1)?
                .split(',')
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// A Redis store on `server` that waits 10 s for an answer, and a `FallbackStore` over it that
/// gives up after [`TIMEOUT`] and whose breaker stays closed: every check is sent, and queues
/// behind a stalled server.
async fn stalling_fallback(server: &RedisServer) -> (RedisStore, FallbackStore<RedisStore>) {
    let redis = RedisStore::builder()
        .prefix(common::unique_prefix())
        .settings(ConnectionSettings {
            connect_timeout: Duration::from_millis(200),
            response_timeout: Duration::from_secs(10),
        })
        .connect(&server.url())
        .await
        .expect("connect");
    let store = FallbackStore::builder(redis.clone())
        .timeout(TIMEOUT)
        .failure_threshold(1_000)
        .build();
    (redis, store)
}

/// A server stalled with checks queued (SIGSTOP): each check times out and is answered by its
/// rule's policy (`Local`, counted on the gateway). When the server wakes up it runs the queued
/// scripts, which start after their callers' deadlines: each declines (`TOLLGATE_LATE`) and
/// charges nothing, so no caller pays twice.
#[test]
fn a_check_that_timed_out_is_never_charged_when_the_stalled_server_wakes_up() {
    let server = RedisServer::start().expect("start redis-server");
    common::block_on(async {
        let (redis, store) = stalling_fallback(&server).await;
        let rule = RuleId::new("payments").expect("id");
        let key = Key::new("payer-7");
        let quota = Quota::fixed_window(1_000, Duration::from_secs(86_400)).expect("valid");
        let item = Item::new(&rule, quota, &key).with_store_failure(OnStoreFailure::Local);
        // One check in time: charged, and the store learns the server's clock from it.
        assert!(
            store
                .check_one(&item)
                .await
                .expect("answered")
                .decision()
                .is_allowed()
        );
        let sent_before = stat(&server, "commandstats", "cmdstat_evalsha:", "calls=");

        server.pause().expect("SIGSTOP redis-server");
        let stalled: Vec<_> = (0..20).map(|_| store.check_one(&item)).collect();
        for answer in futures_util::future::join_all(stalled).await {
            let answer = answer.expect("answered by the rule's policy");
            assert!(
                answer.decision().is_allowed(),
                "counted on the gateway meanwhile"
            );
        }
        let timeouts = store.stats().timeouts;
        assert_eq!(
            timeouts,
            20,
            "every stalled check timed out: {:?}",
            store.stats()
        );
        server.resume().expect("SIGCONT redis-server");

        // Wait until the server has run every queued script.
        let deadline = Instant::now() + BACK_WITHIN;
        while stat(&server, "commandstats", "cmdstat_evalsha:", "calls=") < sent_before + timeouts {
            assert!(Instant::now() < deadline, "the queued scripts never ran");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            stat(&server, "errorstats", "errorstat_TOLLGATE_LATE:", "count="),
            timeouts,
            "every late script declined"
        );
        // A peek at cost 0 reports what is left, charging nothing.
        let left = redis
            .peek(&item.with_cost(0))
            .await
            .expect("Redis answers again");
        assert_eq!(
            left.remaining(),
            999,
            "only the check made in time is charged in Redis"
        );
    });
}

/// A gateway just started (its Redis store has had no answer yet, so it does not know the
/// server's clock) whose first checks stall behind a stopped server (SIGSTOP): each times out
/// and is answered by its rule's policy. The store asked the server's `TIME` before its first
/// script, so once the server wakes no script of those checks charges: none was sent before
/// its `TIME` came back, or each starts after its deadline and declines. (Before, a fresh
/// store sent no deadline, and every stalled check was charged in Redis as well; found by the
/// review of issue 25.)
#[test]
fn a_fresh_store_is_not_charged_for_checks_that_timed_out_before_its_first_answer() {
    let server = RedisServer::start().expect("start redis-server");
    common::block_on(async {
        let (redis, store) = stalling_fallback(&server).await;
        let rule = RuleId::new("payments").expect("id");
        let key = Key::new("payer-8");
        let quota = Quota::fixed_window(1_000, Duration::from_secs(86_400)).expect("valid");
        let item = Item::new(&rule, quota, &key).with_store_failure(OnStoreFailure::Local);
        // Another gateway (a store of its own) has loaded the script on the server already, so
        // this one's first scripts would run as sent.
        let other = RedisStore::builder()
            .prefix(common::unique_prefix())
            .connect(&server.url())
            .await
            .expect("connect");
        other.check_one(&item).await.expect("answered");
        let before = stat(&server, "commandstats", "cmdstat_evalsha:", "calls=");

        server.pause().expect("SIGSTOP redis-server");
        let stalled: Vec<_> = (0..20).map(|_| store.check_one(&item)).collect();
        for answer in futures_util::future::join_all(stalled).await {
            let answer = answer.expect("answered by the rule's policy");
            assert!(answer.decision().is_allowed(), "counted on the gateway");
        }
        assert_eq!(store.stats().timeouts, 20, "{:?}", store.stats());
        server.resume().expect("SIGCONT redis-server");

        // Once the server has run what the 20 checks queued (a `TIME` each, or a script where
        // no deadline could be sent), a peek reports what is left, charging nothing.
        let queued = || {
            stat(&server, "commandstats", "cmdstat_time:", "calls=")
                + stat(&server, "commandstats", "cmdstat_evalsha:", "calls=")
                - before
        };
        let deadline = Instant::now() + BACK_WITHIN;
        while queued() < 20 {
            assert!(Instant::now() < deadline, "the queued calls never ran");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left = redis
            .peek(&item.with_cost(0))
            .await
            .expect("Redis answers again");
        assert_eq!(
            left.remaining(),
            1_000,
            "no check that timed out is charged in Redis"
        );
    });
}

/// A proxy in front of `server` that holds each answer on its way back for `delay` ms (read
/// at each answer): a slow network after the script has run.
async fn slow_answers(server: &RedisServer, delay: Arc<AtomicU64>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let address = listener.local_addr().expect("an address");
    let target = format!("127.0.0.1:{}", server.port());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(upstream) = tokio::net::TcpStream::connect(&target).await else {
                return;
            };
            let (mut client_in, mut client_out) = client.into_split();
            let (mut server_in, mut server_out) = upstream.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut client_in, &mut server_out).await;
            });
            let delay = Arc::clone(&delay);
            tokio::spawn(async move {
                let mut buffer = vec![0; 64 * 1024];
                while let Ok(read) = server_in.read(&mut buffer).await {
                    if read == 0 {
                        return;
                    }
                    let held = delay.load(Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(held)).await;
                    if client_out.write_all(&buffer[..read]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("redis://{address}/")
}

/// The store learns the server's clock from its first answer, which came back 1.5 s late: an
/// offset learned too low. The next check through a `FallbackStore` is declined as late, but
/// the declined answer teaches the clock again: every check after it is answered by Redis.
#[test]
fn an_offset_learned_from_a_slow_answer_is_corrected_by_the_next_call() {
    let server = RedisServer::start().expect("start redis-server");
    let delay = Arc::new(AtomicU64::new(0));
    common::block_on(async {
        let url = slow_answers(&server, Arc::clone(&delay)).await;
        let redis = RedisStore::builder()
            .prefix(common::unique_prefix())
            .settings(ConnectionSettings {
                connect_timeout: Duration::from_millis(500),
                response_timeout: Duration::from_secs(10),
            })
            .connect(&url)
            .await
            .expect("connect through the proxy");
        let rule = RuleId::new("payments").expect("id");
        let key = Key::new("payer-8");
        let quota = Quota::fixed_window(1_000, Duration::from_secs(86_400)).expect("valid");
        let item = Item::new(&rule, quota, &key).with_store_failure(OnStoreFailure::Local);
        delay.store(1_500, Ordering::SeqCst);
        assert!(
            redis
                .check_one(&item)
                .await
                .expect("answered late")
                .decision()
                .is_allowed()
        );
        delay.store(0, Ordering::SeqCst);
        let store = FallbackStore::builder(redis.clone())
            .timeout(Duration::from_millis(300))
            .failure_threshold(1_000)
            .build();
        for _ in 0..10 {
            store.check_one(&item).await.expect("answered");
        }
        assert!(
            store.stats().primary_failures <= 1,
            "at most the first check is declined: {:?}",
            store.stats()
        );
    });
}
