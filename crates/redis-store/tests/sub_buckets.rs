//! Hot-key sub-buckets on a real Redis Cluster: one key's load spread over the masters
//! (measured with each master's `INFO commandstats`), never more than the limit admitted, and
//! refusals only within the stated bound of unused units.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tollgate_core::{FleetModes, Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::RedisStore;
use tollgate_testing::ManualClock;
use tollgate_wrappers::SubBuckets;

/// Script calls (`EVALSHA` and `EVAL`) each master has answered since its stats were reset.
fn script_calls_per_master() -> Vec<u64> {
    let masters = common::cluster().masters().expect("the cluster's masters");
    masters
        .iter()
        .map(|master| {
            let stats = master
                .cli(&["INFO", "commandstats"])
                .expect("INFO commandstats");
            stats
                .lines()
                .filter(|line| {
                    line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:")
                })
                .filter_map(|line| {
                    let calls = line.split("calls=").nth(1)?.split(',').next()?;
                    calls.parse::<u64>().ok()
                })
                .sum()
        })
        .collect()
}

/// Held by each test: the command counts must not see the other test's traffic.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn reset_stats() {
    for master in common::cluster().masters().expect("the cluster's masters") {
        master
            .cli(&["CONFIG", "RESETSTAT"])
            .expect("CONFIG RESETSTAT");
    }
}

/// `checks` checks of `item`'s rule and key from 8 tasks; how many were allowed.
async fn flood(store: Arc<SubBuckets<RedisStore>>, item: ItemSpec, checks: u64) -> u64 {
    let admitted = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (store, admitted, item) = (Arc::clone(&store), Arc::clone(&admitted), item.clone());
            tokio::spawn(async move {
                for _ in 0..checks / 8 {
                    let sent = item.item();
                    if store.check(&[sent]).await.expect("answers").is_allowed() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("the flooding task ends");
    }
    admitted.load(Ordering::Relaxed)
}

/// What a flooding task sends, owned.
#[derive(Clone)]
struct ItemSpec {
    rule: RuleId,
    key: Key,
    quota: Quota,
    sub_buckets: u32,
}

impl ItemSpec {
    fn item(&self) -> Item<'_> {
        Item::new(&self.rule, self.quota, &self.key)
            .with_fleet_modes(FleetModes::new().with_sub_buckets(self.sub_buckets))
    }
}

/// One hot key flooded with and without 6 sub-buckets: with them every master answers part of
/// the load; without, one master answers all of it.
#[test]
fn a_hot_key_spread_over_sub_buckets_reaches_every_master() {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    common::block_on(async {
        let store = Arc::new(SubBuckets::new(common::cluster_store(ManualClock::new(
            tollgate_testing::conformance::START,
        ))));
        let mut shares = Vec::new();
        for sub_buckets in [6, 1] {
            let item = ItemSpec {
                rule: RuleId::new("trending").expect("valid"),
                key: Key::new("hot-topic"),
                quota: Quota::token_bucket(1_000_000, Rate::per_second(1_000_000)).expect("valid"),
                sub_buckets,
            };
            reset_stats();
            assert_eq!(flood(Arc::clone(&store), item, 2_400).await, 2_400);
            let calls = script_calls_per_master();
            let total: u64 = calls.iter().sum();
            assert!(total >= 2_400, "every check reached a master: {calls:?}");
            let share: Vec<f64> = calls.iter().map(|c| *c as f64 / total as f64).collect();
            println!(
                "{sub_buckets} sub-bucket(s): script calls per master {calls:?}, shares {share:.2?}"
            );
            shares.push(share);
        }
        assert!(
            shares[0].iter().all(|share| *share >= 0.20),
            "with 6 sub-buckets every master takes a part: {:?}",
            shares[0]
        );
        assert!(
            shares[1].iter().any(|share| *share >= 0.99),
            "one key is one master's: {:?}",
            shares[1]
        );
    });
}

/// Units left in every sub-bucket, read from the cluster.
async fn unused(store: &SubBuckets<RedisStore>, spec: &ItemSpec) -> u64 {
    let item = spec.item();
    store
        .peek(&item.with_cost(0))
        .await
        .expect("peeks")
        .remaining()
}

/// A key of 100 split 6 ways (parts of 17 and 16) on a frozen clock, sequentially with costs 1
/// and 2: never more than 100 admitted, and at every refusal at most (S − 2)·⌈C/S⌉ + 2(c − 1)
/// units unused; then 8 tasks at once on a fresh key: still never more than 100.
#[test]
fn the_cluster_admits_at_most_the_limit_and_refuses_early_only_within_the_bound() {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    common::block_on(async {
        for cost in [1_u64, 2] {
            let store = SubBuckets::new(common::cluster_store(ManualClock::new(
                tollgate_testing::conformance::START,
            )));
            let spec = ItemSpec {
                rule: RuleId::new("trending").expect("valid"),
                key: Key::new(format!("bound-{cost}")),
                quota: Quota::token_bucket(100, Rate::per_second(100)).expect("valid"),
                sub_buckets: 6,
            };
            let bound = 4 * 100_u64.div_ceil(6) + 2 * (cost - 1);
            let (mut admitted, mut worst) = (0, 0);
            for _ in 0..150 {
                let item = spec.item().with_cost(cost);
                if store.check(&[item]).await.expect("answers").is_allowed() {
                    admitted += cost;
                } else {
                    let left = unused(&store, &spec).await;
                    assert!(
                        left <= bound,
                        "cost {cost}: refused with {left} unused (bound {bound})"
                    );
                    worst = worst.max(left);
                }
            }
            assert!(admitted <= 100, "cost {cost}: admitted {admitted}");
            assert_eq!(admitted + unused(&store, &spec).await, 100);
            println!(
                "cost {cost}: admitted {admitted}, worst unused at a refusal {worst} (bound {bound})"
            );
        }
        let store = Arc::new(SubBuckets::new(common::cluster_store(ManualClock::new(
            tollgate_testing::conformance::START,
        ))));
        let spec = ItemSpec {
            rule: RuleId::new("trending").expect("valid"),
            key: Key::new("concurrent"),
            quota: Quota::token_bucket(100, Rate::per_second(100)).expect("valid"),
            sub_buckets: 6,
        };
        let admitted = flood(Arc::clone(&store), spec.clone(), 400).await;
        assert!(admitted <= 100, "8 tasks at once admitted {admitted}");
        assert_eq!(admitted + unused(&store, &spec).await, 100);
    });
}
