//! A refund whose answer was lost may or may not have happened; retrying it is safe. Writes are
//! held on the server (`CLIENT PAUSE ... WRITE`) while a refund is sent with a short deadline,
//! so the refund reaches Redis but its answer comes too late: the store reports a timeout and
//! hands the receipt back. Once writes resume, the held refund is applied; the retry of the
//! returned receipt finds its refund marker and gives nothing more.

mod common;

use std::time::{Duration, Instant};

use tollgate_core::{Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::{ConnectionSettings, RedisStore};
use tollgate_redis_harness::RedisServer;
use tollgate_testing::ManualClock;
use tollgate_testing::conformance::START;

/// How long a refund waits for its answer here.
const DEADLINE: Duration = Duration::from_millis(200);

/// How long writes are held: far longer than the deadline.
const PAUSE_MS: &str = "5000";

/// How long the held refund may take to show once writes resume (generous: a loaded machine).
const VISIBLE_WITHIN: Duration = Duration::from_secs(10);

fn quotas() -> Vec<Quota> {
    let day = Duration::from_secs(86_400);
    vec![
        Quota::token_bucket(10, Rate::per_day(10)).expect("valid"),
        Quota::leaky_bucket(Rate::per_hour(10), Duration::from_secs(9 * 360)).expect("valid"),
        Quota::fixed_window(10, day).expect("valid"),
        Quota::sliding_window_counter(10, day).expect("valid"),
        Quota::sliding_window_log(10, day).expect("valid"),
    ]
}

async fn remaining(store: &RedisStore, item: Item<'_>) -> u64 {
    store
        .peek(&item.with_cost(0))
        .await
        .expect("redis answers a peek")
        .remaining()
}

#[test]
fn a_refund_whose_answer_was_lost_is_retried_without_giving_back_twice() {
    // A server of this test's own: pausing writes on the shared one would stall other tests.
    let server = RedisServer::start().expect("start redis-server");
    let clock = ManualClock::new(START);
    let rule = RuleId::new("lost-answer").expect("id");
    common::block_on(async {
        let store = RedisStore::builder()
            .prefix(common::unique_prefix())
            .settings(ConnectionSettings {
                connect_timeout: Duration::from_secs(1),
                response_timeout: DEADLINE,
            })
            .test_clock(clock.clone())
            .connect(&server.url())
            .await
            .expect("connect");
        for quota in quotas() {
            let algorithm = quota.algorithm().name();
            let key = Key::new(algorithm);
            let item = Item::new(&rule, quota, &key);
            // 2 that stay charged, then 3 to refund.
            let kept = store.check(&[item.with_cost(2)]).await.expect("answers");
            assert!(kept.is_allowed(), "{algorithm}");
            let items = [item.with_cost(3)];
            let receipt = store
                .check(&items)
                .await
                .expect("answers")
                .into_receipts(&items)
                .pop()
                .expect("{algorithm}: charged");
            let id = receipt.id();
            let before = remaining(&store, item).await;
            assert_eq!(before, 5, "{algorithm}: 5 of 10 spent");

            server
                .cli(&["client", "pause", PAUSE_MS, "WRITE"])
                .expect("pause writes");
            let failed = store
                .refund(receipt)
                .await
                .expect_err("no answer while writes are held");
            server.cli(&["client", "unpause"]).expect("resume writes");
            assert!(
                failed.error().is_timeout(),
                "{algorithm}: the lost answer is a timeout: {failed}"
            );
            let receipt = failed.into_receipt();
            assert_eq!(receipt.id(), id, "{algorithm}: the same receipt comes back");

            // The refund did reach Redis: it is applied once writes resume.
            let started = Instant::now();
            loop {
                let now = remaining(&store, item).await;
                if now == 8 {
                    break;
                }
                assert_eq!(now, before, "{algorithm}: only the 3 can come back");
                assert!(
                    started.elapsed() < VISIBLE_WITHIN,
                    "{algorithm}: the held refund never showed"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let marker = store.refund_marker_key(&rule, &key, id);
            let exists = server.cli(&["exists", &marker]).expect("redis-cli");
            assert_eq!(
                exists.trim(),
                "1",
                "{algorithm}: {marker} remembers the refund"
            );

            store.refund(receipt).await.expect("the retry is answered");
            assert_eq!(
                remaining(&store, item).await,
                8,
                "{algorithm}: the retry gave nothing more (the 2 stay charged)"
            );
        }
    });
}
