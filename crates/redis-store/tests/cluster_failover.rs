//! A cluster master killed under load (on a cluster of this binary's own): the replica is
//! promoted, checks keep answering within the deadline (open rules allow meanwhile), nothing
//! panics, and afterwards every slot is counted in Redis again.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate_core::{FallbackStore, Item, Key, Quota, RuleId, Store};
use tollgate_redis::{ConnectionSettings, RedisStore};
use tollgate_redis_harness::RedisCluster;

const TIMEOUT: Duration = Duration::from_millis(100);
const SLACK: Duration = Duration::from_millis(400);
const TASKS: u64 = 8;
/// Enough keys that every master serves some.
const KEYS: u64 = 64;

fn quota() -> Quota {
    Quota::fixed_window(1 << 40, Duration::from_secs(86_400)).expect("valid")
}

#[test]
fn checks_continue_through_a_master_failover_without_panics() {
    let cluster = RedisCluster::start().expect("start a cluster of this test's own");
    let nodes = cluster.urls();
    common::block_on(async {
        let settings = ConnectionSettings {
            connect_timeout: Duration::from_millis(300),
            response_timeout: Duration::from_millis(300),
        };
        let redis = RedisStore::builder()
            .prefix(common::unique_prefix())
            .settings(settings)
            .connect_cluster(&nodes)
            .await
            .expect("connect");
        let store = Arc::new(
            FallbackStore::builder(redis.clone())
                .timeout(TIMEOUT)
                .failure_threshold(5)
                .cool_down(Duration::from_millis(200))
                .build(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let slowest_micros = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
                let slowest = Arc::clone(&slowest_micros);
                tokio::spawn(async move {
                    let rule = RuleId::new("failover").expect("id");
                    let mut allowed = 0u64;
                    let mut n = task;
                    while !stop.load(Ordering::Relaxed) {
                        let key = Key::new(format!("k{}", n % KEYS));
                        n += TASKS;
                        let started = Instant::now();
                        let answer = store.check_one(&Item::new(&rule, quota(), &key)).await;
                        let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                        slowest.fetch_max(took, Ordering::Relaxed);
                        allowed +=
                            u64::from(answer.expect("open rules answer").decision().is_allowed());
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    allowed
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;

        let killed = cluster.kill_master(0).expect("kill a master");
        let cluster_ref = &cluster;
        tokio::task::block_in_place(|| cluster_ref.wait_until_ok(Duration::from_secs(30)))
            .expect("the replica is promoted");
        assert!(!killed.is_running());

        // Every slot answers from Redis again, directly (no fallback), within a few seconds.
        let rule = RuleId::new("after-failover").expect("id");
        let deadline = Instant::now() + Duration::from_secs(10);
        for k in 0..KEYS {
            let key = Key::new(format!("k{k}"));
            loop {
                match redis.check_one(&Item::new(&rule, quota(), &key)).await {
                    Ok(answer) => {
                        assert!(answer.decision().is_allowed());
                        break;
                    }
                    Err(error) => {
                        assert!(Instant::now() < deadline, "k{k} still failing: {error}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }

        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            assert!(task.await.expect("no check panicked") > 0);
        }
        let slowest = Duration::from_micros(slowest_micros.load(Ordering::Relaxed));
        assert!(
            slowest <= TIMEOUT + SLACK,
            "slowest check during the failover: {slowest:?}"
        );
        let stats = store.stats();
        assert!(
            stats.primary_failures >= 1,
            "the failover was noticed: {stats:?}"
        );
    });
}
