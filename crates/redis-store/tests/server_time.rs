//! The server's clock decides: checks on Redis `TIME` (loose tolerances: these run in real
//! time on a loaded machine), gateways whose clocks disagree, and a clock that steps back.

mod common;

use std::time::Duration;

use tollgate_core::{Item, Key, Quota, Rate, RefusalReason, RuleId, Store};
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_testing::ManualClock;
use tollgate_testing::conformance::START;

fn rule(id: &str) -> RuleId {
    RuleId::new(id).expect("valid rule id")
}

/// How long the standalone server will keep `name`, in ms (-1: forever, -2: gone).
fn pttl_ms(name: &str) -> i64 {
    common::server()
        .cli(&["pttl", name])
        .expect("redis-cli")
        .trim()
        .parse()
        .expect("a number")
}

#[test]
fn a_token_bucket_on_server_time_bursts_then_refuses_with_a_sane_retry_after() {
    let store = common::server_time_store();
    let (login, who) = (rule("login"), Key::new("user77"));
    // 5 a minute: nothing refills noticeably during the test.
    let quota = Quota::token_bucket(5, Rate::per_minute(5)).expect("valid");
    common::block_on(async {
        for expected_remaining in (0..5).rev() {
            let answer = store.check_one(&Item::new(&login, quota, &who)).await;
            let decision = *answer.expect("answers").decision();
            assert!(decision.is_allowed());
            assert_eq!(decision.remaining(), expected_remaining);
        }
        let refused = store.check_one(&Item::new(&login, quota, &who)).await;
        let decision = *refused.expect("answers").decision();
        assert_eq!(decision.refusal(), Some(RefusalReason::LimitReached));
        // One token every 12 s; a little of it has passed.
        let retry = decision.retry_after();
        assert!(
            retry > Duration::from_secs(9) && retry <= Duration::from_secs(12),
            "{retry:?}"
        );
    });
}

#[test]
fn a_fixed_window_on_server_time_resets_within_its_window() {
    let store = common::server_time_store();
    let (follows, who) = (rule("follows"), Key::new("account-4821"));
    let quota = Quota::fixed_window(3, Duration::from_secs(3600)).expect("valid");
    common::block_on(async {
        let mut last = None;
        for _ in 0..4 {
            let answer = store.check_one(&Item::new(&follows, quota, &who)).await;
            last = Some(*answer.expect("answers").decision());
        }
        let refused = last.expect("four checks");
        assert!(!refused.is_allowed());
        assert!(refused.reset_after() <= Duration::from_secs(3600));
        assert_eq!(refused.retry_after(), refused.reset_after());
    });
}

#[test]
fn a_pacing_rule_on_server_time_spaces_requests() {
    let store = common::server_time_store();
    let (sms, provider) = (rule("sms"), Key::global());
    let quota = Quota::leaky_bucket(Rate::per_second(1), Duration::from_secs(10)).expect("valid");
    common::block_on(async {
        let mut delays = Vec::new();
        for _ in 0..3 {
            let answer = store.check_one(&Item::new(&sms, quota, &provider)).await;
            delays.push(answer.expect("answers").decision().delay());
        }
        assert_eq!(delays[0], Duration::ZERO);
        for (n, delay) in delays.iter().enumerate().skip(1) {
            let slot = Duration::from_secs(n as u64);
            let early = slot.saturating_sub(Duration::from_millis(500));
            assert!(
                *delay > early && *delay <= slot,
                "request {n} waits {delay:?}"
            );
        }
    });
}

/// Two gateways alternate on one key: on the server's clock each sees the other's charges
/// exactly (10, 9, 8, ... left); with their own clocks an hour apart, the one ahead finds the
/// bucket full again — the skew the server's clock exists to avoid.
#[test]
fn gateways_with_clocks_an_hour_apart_decide_identically_on_server_time() {
    let url = common::server().url();
    let quota = Quota::token_bucket(10, Rate::per_hour(10)).expect("valid");
    let (rule, key) = (rule("skew"), Key::new("user77"));
    let remaining_seen = |stores: [RedisStore; 2]| {
        let (rule, key) = (rule.clone(), key.clone());
        async move {
            let mut seen = Vec::new();
            for round in 0..6 {
                let store = &stores[round % 2];
                let answer = store.check_one(&Item::new(&rule, quota, &key)).await;
                seen.push(answer.expect("answers").decision().remaining());
            }
            seen
        }
    };
    common::block_on(async {
        let connect = || async { RedisConnection::connect(&url).await.expect("connect") };
        let prefix = common::unique_prefix();
        let server_time = [
            RedisStore::builder()
                .prefix(prefix.clone())
                .build(connect().await)
                .expect("prefix"),
            RedisStore::builder()
                .prefix(prefix)
                .build(connect().await)
                .expect("prefix"),
        ];
        assert_eq!(remaining_seen(server_time).await, [9, 8, 7, 6, 5, 4]);

        let prefix = common::unique_prefix();
        let behind = ManualClock::new(START);
        let ahead = ManualClock::new(START);
        ahead.advance(Duration::from_secs(3600));
        let own_clocks = [
            RedisStore::builder()
                .prefix(prefix.clone())
                .test_clock(behind)
                .build(connect().await),
            RedisStore::builder()
                .prefix(prefix)
                .test_clock(ahead)
                .build(connect().await),
        ]
        .map(|store| store.expect("prefix"));
        assert_ne!(remaining_seen(own_clocks).await, [9, 8, 7, 6, 5, 4]);
    });
}

/// A failover or a clock step can make `TIME` go back; for every algorithm, going back an hour
/// after using up the limit grants nothing.
#[test]
fn time_going_backwards_grants_nothing_for_any_algorithm() {
    let minute = Duration::from_secs(60);
    let quotas = [
        Quota::token_bucket(3, Rate::per_minute(3)).expect("valid"),
        Quota::fixed_window(3, minute).expect("valid"),
        Quota::sliding_window_counter(3, minute).expect("valid"),
        Quota::sliding_window_log(3, minute).expect("valid"),
        Quota::leaky_bucket(Rate::per_minute(3), minute).expect("valid"),
    ];
    for quota in quotas {
        let clock = ManualClock::new(START);
        let store = common::standalone_store(clock.clone());
        let (rule, key) = (rule("backwards"), Key::new("user77"));
        common::block_on(async {
            let allowed_in_ten = async || {
                let mut allowed = 0;
                for _ in 0..10 {
                    let answer = store.check_one(&Item::new(&rule, quota, &key)).await;
                    allowed += u32::from(answer.expect("answers").decision().is_allowed());
                }
                allowed
            };
            assert!(
                allowed_in_ten().await >= 3,
                "{:?} lets its limit through",
                quota.algorithm()
            );
            clock.rewind(Duration::from_secs(3600));
            assert_eq!(
                allowed_in_ten().await,
                0,
                "{:?} after a step back",
                quota.algorithm()
            );
        });
    }
}

/// Every key expires once dropping it would lose nothing: a token bucket when full again, a
/// window when it has passed (a sliding counter one window later), a log one window after its
/// newest entry.
#[test]
fn keys_expire_once_dropping_them_loses_nothing() {
    let store = common::server_time_store();
    let cases = lifetimes();
    let (rule, key) = (rule("expiry"), Key::new("user77"));
    for (quota, at_least_ms, at_most_ms) in cases {
        common::block_on(async {
            let answer = store.check_one(&Item::new(&rule, quota, &key)).await;
            assert!(answer.expect("answers").decision().is_allowed());
        });
        let name = store
            .stored_key(&rule, &key, quota.algorithm())
            .expect("known");
        let ttl = pttl_ms(&name);
        assert!(
            (at_least_ms..=at_most_ms).contains(&ttl),
            "{:?}: {name} expires in {ttl} ms",
            quota.algorithm()
        );
    }
}

/// Two charges at one instant share one log entry; refunding one of them keeps the key's
/// expiry (the entry is rewritten, never re-created without a lifetime).
#[test]
fn a_partly_refunded_log_entry_keeps_its_expiry() {
    let (rule, key) = (rule("log-expiry"), Key::new("user77"));
    let quota = Quota::sliding_window_log(10, Duration::from_secs(60)).expect("valid");
    let item = Item::new(&rule, quota, &key);
    for store in [
        common::standalone_store(ManualClock::new(START)),
        common::server_time_store(),
    ] {
        let name = store
            .stored_key(&rule, &key, quota.algorithm())
            .expect("known");
        common::block_on(async {
            let batch = store.check(&[item, item]).await.expect("answers");
            assert!(batch.is_allowed());
            let receipt = batch
                .into_items()
                .nth(1)
                .and_then(|answer| answer.into_receipt(&item))
                .expect("charged");
            store.refund(receipt).await.expect("refunds");
            let left = store.peek(&item.with_cost(0)).await.expect("answers");
            assert_eq!(left.remaining(), 9, "one of the two charges was taken back");
        });
        let ttl = pttl_ms(&name);
        assert!(ttl > 0, "{name} has pttl {ttl}");
    }
}

/// A log's key lives one window after its newest entry, under the window of the latest check:
/// a check under a longer window (a quota change) lengthens it at once, even a check that
/// charges nothing.
#[test]
fn a_log_key_lives_by_the_window_of_its_latest_check() {
    let store = common::server_time_store();
    let (rule, key) = (rule("log-window"), Key::new("user77"));
    let minute = Quota::sliding_window_log(10, Duration::from_secs(60)).expect("valid");
    let hour = Quota::sliding_window_log(10, Duration::from_secs(3_600)).expect("valid");
    let name = store
        .stored_key(&rule, &key, minute.algorithm())
        .expect("known");
    common::block_on(async {
        let answer = store.check_one(&Item::new(&rule, minute, &key)).await;
        assert!(answer.expect("answers").decision().is_allowed());
    });
    let ttl = pttl_ms(&name);
    assert!((50_000..=60_000).contains(&ttl), "{name}: {ttl} ms");
    common::block_on(async {
        let look = Item::new(&rule, hour, &key).with_cost(0);
        let answer = store.check_one(&look).await;
        assert_eq!(answer.expect("answers").decision().remaining(), 9);
    });
    let ttl = pttl_ms(&name);
    assert!((3_590_000..=3_600_000).contains(&ttl), "{name}: {ttl} ms");
}

/// A refund's marker lives as long as its charge could matter, and no longer: a bucket's until
/// the charge's part of the schedule has passed, a window's until the window ends (a sliding
/// counter's one window later), a log entry's until it leaves the window.
#[test]
fn a_refund_marker_lives_as_long_as_the_charge_could_matter() {
    let store = common::server_time_store();
    let cases = lifetimes();
    let (rule, key) = (rule("marker-lifetime"), Key::new("user77"));
    for (quota, at_least_ms, at_most_ms) in cases {
        let items = [Item::new(&rule, quota, &key)];
        let receipt = common::block_on(async {
            let answer = store.check(&items).await.expect("answers");
            answer.into_receipts(&items).pop().expect("charged")
        });
        let marker = store.refund_marker_key(&rule, &key, receipt.id());
        assert_eq!(pttl_ms(&marker), -2, "{marker} is set by the refund");
        common::block_on(async { store.refund(receipt).await.expect("refunds") });
        let ttl = pttl_ms(&marker);
        assert!(
            (at_least_ms..=at_most_ms).contains(&ttl),
            "{:?}: {marker} expires in {ttl} ms",
            quota.algorithm()
        );
    }
}

/// One quota of each kind that keeps state, with how long (ms, at least and at most) a key it
/// wrote, or the refund marker of its charge, should live: a token bucket until its token is
/// back (one of ten a minute: 6 s), a window until it has passed (a sliding counter one window
/// later), a log one window after its newest entry.
fn lifetimes() -> [(Quota, i64, i64); 4] {
    let hour = Duration::from_secs(3_600);
    [
        (
            Quota::token_bucket(10, Rate::per_minute(10)).expect("valid"),
            5_000,
            6_000,
        ),
        (Quota::fixed_window(10, hour).expect("valid"), 1, 3_600_000),
        (
            Quota::sliding_window_counter(10, hour).expect("valid"),
            3_600_000,
            7_200_000,
        ),
        (
            Quota::sliding_window_log(10, hour).expect("valid"),
            3_590_000,
            3_600_000,
        ),
    ]
}
