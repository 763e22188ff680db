//! Sub-buckets on a real Redis Cluster, as an adversarial review tried them, kept as regressions:
//! hostile keys, refunds reaching the charged sub-bucket, two sub-bucketed rules in one
//! (cross-slot) request, and up-to grants.

mod common;

use std::time::Duration;

use tollgate_core::{FleetModes, Item, Key, Quota, Rate, RuleId, Store, Take};
use tollgate_testing::ManualClock;
use tollgate_wrappers::SubBuckets;

fn store() -> SubBuckets<tollgate_redis::RedisStore> {
    SubBuckets::new(common::cluster_store(ManualClock::new(
        tollgate_testing::conformance::START,
    )))
}

/// Hostile keys ('#', '{', '}', '%', long keys that get digested, keys that look like a salt)
/// each keep their own sub-buckets: never more than C each, and no two keys share state.
#[test]
fn hostile_keys_with_sub_buckets_keep_their_own_limits() {
    common::block_on(async {
        let store = store();
        let rule = RuleId::new("r15-hostile").expect("valid");
        let quota = Quota::fixed_window(12, Duration::from_secs(3600)).expect("valid");
        let long = "x".repeat(200);
        let long2 = format!("{long}#1");
        let keys: Vec<Key> = [
            "", "#1", "#2", "a#1", "a", "%23", "{a}", "}{", "a}#1", "#", "%", &long, &long2,
            "#0.4", "x#0.4:a",
        ]
        .iter()
        .map(|k| Key::new(*k))
        .collect();
        for key in &keys {
            let item = Item::new(&rule, quota, key)
                .with_fleet_modes(FleetModes::new().with_sub_buckets(4));
            let mut admitted = 0;
            for _ in 0..30 {
                admitted += u64::from(store.check(&[item]).await.expect("answers").is_allowed());
            }
            assert!(
                (8..=12).contains(&admitted),
                "key {:?}: admitted {admitted} (shared state with another key?)",
                key.as_bytes()
            );
        }
    });
}

/// A receipt refunds the sub-bucket charged, on the cluster; the refund is then visible.
#[test]
fn receipts_refund_the_charged_sub_bucket_on_the_cluster() {
    common::block_on(async {
        let store = store();
        let rule = RuleId::new("r15-refund").expect("valid");
        let key = Key::new("refund{me}#1");
        let quota = Quota::token_bucket(40, Rate::per_minute(40)).expect("valid");
        let item =
            Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_sub_buckets(4));
        for _ in 0..20 {
            let answer = store.check(&[item]).await.expect("answers");
            assert!(answer.is_allowed());
            for receipt in answer.into_receipts(&[item]) {
                store.refund(receipt).await.expect("refunds");
            }
        }
        let left = store
            .peek(&item.with_cost(0))
            .await
            .expect("peeks")
            .remaining();
        assert_eq!(left, 40, "every charge was refunded");
    });
}

/// Two sub-bucketed rules (and one plain one) in one request: cross-slot on the cluster, still
/// all-or-nothing — when the plain rule refuses, neither sub-bucket is charged.
#[test]
fn two_sub_bucketed_rules_in_one_request_stay_all_or_nothing() {
    common::block_on(async {
        let store = store();
        let (a, b, cap) = (
            RuleId::new("r15-a").expect("valid"),
            RuleId::new("r15-b").expect("valid"),
            RuleId::new("r15-cap").expect("valid"),
        );
        let key = Key::new("both");
        let quota = Quota::fixed_window(16, Duration::from_secs(3600)).expect("valid");
        let one = Quota::fixed_window(3, Duration::from_secs(3600)).expect("valid");
        let items = [
            Item::new(&a, quota, &key).with_fleet_modes(FleetModes::new().with_sub_buckets(4)),
            Item::new(&b, quota, &key).with_fleet_modes(FleetModes::new().with_sub_buckets(8)),
            Item::new(&cap, one, &key),
        ];
        let mut admitted = 0;
        for _ in 0..20 {
            admitted += u64::from(store.check(&items).await.expect("answers").is_allowed());
        }
        assert_eq!(admitted, 3);
        for item in &items[..2] {
            let left = store
                .peek(&item.with_cost(0))
                .await
                .expect("peeks")
                .remaining();
            assert_eq!(left, 13, "only the admitted requests were charged");
        }
    });
}

/// `granted` of an up-to item with sub-buckets (never spread) reports the units taken, on the
/// cluster.
#[test]
fn granted_of_an_up_to_sub_bucket_charge_on_the_cluster() {
    common::block_on(async {
        let store = store();
        let rule = RuleId::new("r15-upto").expect("valid");
        let key = Key::new("lease");
        let quota = Quota::token_bucket(100, Rate::per_second(100)).expect("valid");
        let lease = Item::new(&rule, quota, &key)
            .with_cost(10)
            .with_take(Take::UpTo)
            .with_fleet_modes(FleetModes::new().with_sub_buckets(4));
        let answer = store.check(&[lease]).await.expect("answers");
        assert!(answer.is_allowed());
        assert_eq!(answer.items()[0].granted(&lease), 10);
    });
}
