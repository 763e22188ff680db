//! Exactness under concurrency: ten stores, each with its own connection (ten gateways), fifty
//! tasks each, against limits that cannot refill during the test, let exactly the limit
//! through — on one server and on a cluster, for every algorithm that refuses.

mod common;

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::{RedisConnection, RedisStore};

const GATEWAYS: usize = 10;
const TASKS_PER_GATEWAY: usize = 50;
const CHECKS_PER_TASK: usize = 3;
const LIMIT: u64 = 100;

/// Limits of 100 that do not refill during a test (windows of a year: a boundary falls inside
/// the test only once every 366 days since 1970).
fn quotas() -> Vec<(&'static str, Quota)> {
    let day = Duration::from_secs(86_400);
    let year = Duration::from_secs(366 * 86_400);
    vec![
        (
            "token-bucket",
            Quota::token_bucket(LIMIT, Rate::per(1, day)).expect("valid"),
        ),
        (
            "fixed-window",
            Quota::fixed_window(LIMIT, year).expect("valid"),
        ),
        (
            "sliding-counter",
            Quota::sliding_window_counter(LIMIT, year).expect("valid"),
        ),
        (
            "sliding-log",
            Quota::sliding_window_log(LIMIT, day).expect("valid"),
        ),
    ]
}

/// Ten gateways' stores: one connection each, one prefix for all.
async fn gateways(connect: impl AsyncFn() -> RedisConnection) -> Vec<Arc<RedisStore>> {
    let prefix = common::unique_prefix();
    let mut stores = Vec::new();
    for _ in 0..GATEWAYS {
        let store = RedisStore::builder()
            .prefix(prefix.clone())
            .build(connect().await)
            .expect("a valid prefix");
        stores.push(Arc::new(store));
    }
    stores
}

/// Runs every task against `quota` and counts what was allowed.
async fn allowed_under_contention(stores: &[Arc<RedisStore>], name: &str, quota: Quota) -> u64 {
    let mut tasks = Vec::new();
    for store in stores {
        for _ in 0..TASKS_PER_GATEWAY {
            let store = Arc::clone(store);
            let rule = RuleId::new(name).expect("valid rule id");
            tasks.push(tokio::spawn(async move {
                let key = Key::new("shared-account");
                let mut allowed = 0;
                for _ in 0..CHECKS_PER_TASK {
                    let answer = store.check_one(&Item::new(&rule, quota, &key)).await;
                    if answer.expect("redis answers").decision().is_allowed() {
                        allowed += 1;
                    }
                }
                allowed
            }));
        }
    }
    let mut allowed = 0;
    for task in tasks {
        allowed += task.await.expect("task does not panic");
    }
    allowed
}

fn assert_exact(stores: &[Arc<RedisStore>]) {
    common::block_on(async {
        for (name, quota) in quotas() {
            let allowed = allowed_under_contention(stores, name, quota).await;
            assert_eq!(
                allowed,
                LIMIT,
                "{name}: {} attempts from {GATEWAYS} gateways",
                GATEWAYS * TASKS_PER_GATEWAY * CHECKS_PER_TASK
            );
        }
    });
}

#[test]
fn ten_gateways_of_fifty_tasks_allow_exactly_the_limit_on_one_server() {
    let url = common::server().url();
    let stores = common::block_on(gateways(async || {
        RedisConnection::connect(&url).await.expect("connect")
    }));
    assert_exact(&stores);
}

#[test]
fn ten_gateways_of_fifty_tasks_allow_exactly_the_limit_on_a_cluster() {
    let nodes = common::cluster().urls();
    let stores = common::block_on(gateways(async || {
        RedisConnection::connect_cluster(&nodes)
            .await
            .expect("connect")
    }));
    assert_exact(&stores);
}
