//! Batches whose items live in different cluster slots: all-or-nothing by compensation, never
//! over-admitting, and how often the compensation over-refuses under concurrency.
//!
//! The over-refusal rate is printed, and held to a bound; run
//! `cargo test -p tollgate-redis --all-features --test cross_slot -- --nocapture` to see it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::{RedisConnection, RedisStore};

const REQUESTS: usize = 500;
const CALLERS: usize = 250;
const SHARED_LIMIT: u64 = 200;
const ROUNDS: usize = 5;
/// The most over-refusal the cluster test accepts, in percent of the admissible requests.
/// BENCHMARKS.md ("Cross-slot over-refusal on a Redis Cluster") documents 8.1–11.3 % for this
/// very mix; the bound leaves room for a busy machine, not for a store refusing every
/// cross-slot batch (100 %).
const OVER_REFUSAL_BOUND_PERCENT: u64 = 20;

/// A shared cap (200 a day) and a per-caller limit (1 a day); each caller asks twice, all at
/// once. Exactly 200 requests should go ahead: every caller's first request passes its own
/// limit, so there are always more candidates than the cap.
async fn one_round(store: &Arc<RedisStore>) -> (u64, u64) {
    let day = Duration::from_secs(86_400);
    let shared = Quota::token_bucket(SHARED_LIMIT, Rate::per(1, day)).expect("valid");
    let per_caller = Quota::token_bucket(1, Rate::per(1, day)).expect("valid");
    let mut tasks = Vec::new();
    for request in 0..REQUESTS {
        let store = Arc::clone(store);
        tasks.push(tokio::spawn(async move {
            let (cap, caller) = (
                RuleId::new("cap").expect("id"),
                RuleId::new("caller").expect("id"),
            );
            let (everyone, who) = (
                Key::global(),
                Key::new(format!("caller-{}", request % CALLERS)),
            );
            let items = [
                Item::new(&cap, shared, &everyone),
                Item::new(&caller, per_caller, &who),
            ];
            store
                .check(&items)
                .await
                .expect("redis answers")
                .is_allowed()
        }));
    }
    let mut allowed = 0;
    for task in tasks {
        allowed += u64::from(task.await.expect("task does not panic"));
    }
    let cap = RuleId::new("cap").expect("id");
    let left = store
        .peek(&Item::new(&cap, shared, &Key::global()).with_cost(0))
        .await
        .expect("redis answers")
        .remaining();
    (allowed, left)
}

async fn rounds(connect: impl AsyncFn() -> RedisConnection) -> Vec<u64> {
    let mut allowed_per_round = Vec::new();
    for _ in 0..ROUNDS {
        let store = RedisStore::builder()
            .prefix(common::unique_prefix())
            .build(connect().await)
            .expect("a valid prefix");
        let store = Arc::new(store);
        let (allowed, left) = one_round(&store).await;
        assert!(
            allowed <= SHARED_LIMIT,
            "over-admitted: {allowed} > {SHARED_LIMIT}"
        );
        assert_eq!(
            left,
            SHARED_LIMIT - allowed,
            "every charge of a refused request was refunded"
        );
        allowed_per_round.push(allowed);
    }
    allowed_per_round
}

#[test]
fn one_server_decides_each_batch_in_one_script_so_exactly_the_cap_goes_ahead() {
    let url = common::server().url();
    let allowed = common::block_on(rounds(async || {
        RedisConnection::connect(&url).await.expect("connect")
    }));
    assert!(allowed.iter().all(|&n| n == SHARED_LIMIT), "{allowed:?}");
}

#[test]
fn a_cluster_never_over_admits_cross_slot_batches_and_reports_its_over_refusal() {
    let nodes = common::cluster().urls();
    let allowed = common::block_on(rounds(async || {
        RedisConnection::connect_cluster(&nodes)
            .await
            .expect("connect")
    }));
    let expected = SHARED_LIMIT * ROUNDS as u64;
    let total: u64 = allowed.iter().sum();
    let over_refused = expected - total;
    eprintln!(
        "cross-slot over-refusal: {over_refused} of {expected} admissible requests refused \
         ({:.1}%) over {ROUNDS} rounds of {REQUESTS} concurrent two-slot requests; per round {allowed:?}",
        100.0 * over_refused as f64 / expected as f64
    );
    assert!(
        over_refused * 100 <= expected * OVER_REFUSAL_BOUND_PERCENT,
        "over-refusal past {OVER_REFUSAL_BOUND_PERCENT} %: {over_refused} of {expected} \
         admissible requests refused; per round {allowed:?}"
    );
}

/// A caller that stops waiting (a deadline, a client gone) does not leave the charges of a
/// refused cross-slot request behind: the check finishes, refunds included, on its own.
#[test]
fn a_cross_slot_check_dropped_midway_still_refunds_what_it_charged() {
    use tollgate_testing::ManualClock;
    use tollgate_testing::conformance::START;

    let store = common::cluster_store(ManualClock::new(START));
    let (open, full) = (
        RuleId::new("open-slot").expect("id"),
        RuleId::new("full-slot").expect("id"),
    );
    let quota = Quota::token_bucket(1000, Rate::per_day(1)).expect("valid");
    let exhausted = Key::new("exhausted");
    common::block_on(async {
        let spend = Item::new(&full, quota, &exhausted).with_cost(1000);
        assert!(store.check(&[spend]).await.expect("answers").is_allowed());
        let mut dropped = 0;
        for i in 0..100u64 {
            let key = Key::new(format!("caller-{i}"));
            assert_ne!(store.slot(&open, &key), store.slot(&full, &exhausted));
            let items = [
                Item::new(&open, quota, &key),
                Item::new(&full, quota, &exhausted),
            ];
            let deadline = Duration::from_micros(100 + (i % 20) * 100);
            match tokio::time::timeout(deadline, store.check(&items)).await {
                Ok(answer) => assert!(!answer.expect("answers").is_allowed()),
                Err(_) => dropped += 1,
            }
            // A dropped check's own task finishes its refund in the background: wait for the
            // charge to come back (a busy machine may take a while), failing only if it never
            // does.
            let peek = Item::new(&open, quota, &key).with_cost(0);
            let waited = std::time::Instant::now();
            loop {
                let left = store.peek(&peek).await.expect("answers").remaining();
                if left == 1000 {
                    break;
                }
                assert!(
                    waited.elapsed() < Duration::from_secs(30),
                    "caller-{i} kept a charge: {left} left of 1000"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        assert!(
            dropped > 0,
            "some checks were dropped midway (else this test shows nothing)"
        );
    });
}
