//! Split allowances: N gateways, each allowing its part of a limit with no shared state.

use std::time::Duration;

use tollgate_core::{
    Counting, FleetModes, Item, Key, MemoryStore, Quota, Rate, RuleId, SplitSettings, Store,
    Timestamp,
};
use tollgate_testing::ManualClock;
use tollgate_wrappers::FleetStore;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

/// How many of `attempts` checks of `item` `store` allows.
async fn admitted<S: Store>(store: &S, item: Item<'_>, attempts: u32) -> u32 {
    let mut admitted = 0;
    for _ in 0..attempts {
        admitted += u32::from(store.check(&[item]).await.expect("answers").is_allowed());
    }
    admitted
}

/// Four gateways sharing a bucket of 10 (10 a second) through FleetStores over one shared
/// store: gateway i allows part i (3, 3, 2, 2: the parts add up to 10), refills at 2.5 a
/// second, and never calls the shared store.
#[test]
fn each_gateway_allows_its_part_and_the_parts_add_up_to_the_limit() {
    runtime().block_on(async {
        let clock = ManualClock::new(Timestamp::from_micros(1_000_000_000));
        let shared = MemoryStore::new();
        let gateways: Vec<_> = (0..4)
            .map(|_| FleetStore::with_clock(shared.clone(), clock.clone()))
            .collect();
        let (rule, key) = (RuleId::new("search").expect("valid"), Key::new("acme"));
        let quota = Quota::token_bucket(10, Rate::per_second(10)).expect("valid");
        let mut parts = Vec::new();
        for (index, gateway) in (0..4).zip(&gateways) {
            let split = Counting::Split(SplitSettings::new(4).gateway(index));
            let item = Item::new(&rule, quota, &key)
                .with_fleet_modes(FleetModes::new().with_counting(split));
            assert_eq!(item.quota().limit(), [3, 3, 2, 2][index as usize]);
            parts.push(admitted(gateway, item, 20).await);
        }
        assert_eq!(parts, [3, 3, 2, 2]);
        assert_eq!(
            parts.iter().sum::<u32>(),
            10,
            "the parts add up to the limit"
        );
        // Each part refills at R/N = 2.5 a second: 2 whole units in one second on every
        // gateway (at R, the full parts would be back).
        clock.advance(Duration::from_secs(1));
        let mut refilled = 0;
        for (index, gateway) in (0..4).zip(&gateways) {
            let split = Counting::Split(SplitSettings::new(4).gateway(index));
            let item = Item::new(&rule, quota, &key)
                .with_fleet_modes(FleetModes::new().with_counting(split));
            let got = admitted(gateway, item, 20).await;
            assert_eq!(got, 2, "gateway {index}");
            refilled += got;
        }
        assert_eq!(refilled, 8);
        assert_eq!(shared.stats().keys, 0, "no shared state");
        assert!(gateways.iter().all(|g| g.stats().store_calls == 0));
    });
}

/// A gateway that does not know its number takes ⌊C/N⌋, so the parts add up to at most the
/// limit; a plain memory store (no fleet store) counts the part too.
#[test]
fn without_a_gateway_number_each_part_is_the_floor_in_any_store() {
    runtime().block_on(async {
        let (rule, key) = (RuleId::new("search").expect("valid"), Key::new("acme"));
        let quota = Quota::fixed_window(10, Duration::from_secs(60)).expect("valid");
        let item = Item::new(&rule, quota, &key).with_fleet_modes(
            FleetModes::new().with_counting(Counting::Split(SplitSettings::new(4))),
        );
        assert_eq!(item.whole_quota().limit(), 10);
        let memory = MemoryStore::new();
        assert_eq!(admitted(&memory, item, 10).await, 2);
        let fleet = FleetStore::new(MemoryStore::new());
        assert_eq!(admitted(&fleet, item, 10).await, 2);
    });
}

/// A quota that cannot be split that many ways (limit below N, or pacing) is counted whole and
/// exactly, in the shared store: never the whole limit on every gateway.
#[test]
fn an_unsplittable_quota_is_counted_whole_in_the_shared_store() {
    runtime().block_on(async {
        let (rule, key) = (RuleId::new("rare").expect("valid"), Key::new("acme"));
        let quota = Quota::fixed_window(3, Duration::from_secs(60)).expect("valid");
        let item = Item::new(&rule, quota, &key).with_fleet_modes(
            FleetModes::new().with_counting(Counting::Split(SplitSettings::new(4))),
        );
        assert_eq!(item.counting(), Counting::Exact);
        assert_eq!(item.quota().limit(), 3);
        let shared = MemoryStore::new();
        let gateways = [
            FleetStore::new(shared.clone()),
            FleetStore::new(shared.clone()),
        ];
        let mut total = 0;
        for gateway in &gateways {
            total += admitted(gateway, item, 5).await;
        }
        assert_eq!(total, 3, "counted once, in the shared store");
    });
}

/// One request with a split rule and an exact rule stays all-or-nothing: when the shared rule
/// refuses, the split part's charge is put back.
#[test]
fn a_split_charge_is_put_back_when_the_shared_rule_refuses() {
    runtime().block_on(async {
        let key = Key::new("acme");
        let (split_rule, shared_rule) = (
            RuleId::new("split-part").expect("valid"),
            RuleId::new("shared-cap").expect("valid"),
        );
        let split_quota = Quota::fixed_window(8, Duration::from_secs(60)).expect("valid");
        let cap = Quota::fixed_window(1, Duration::from_secs(60)).expect("valid");
        let fleet = FleetStore::new(MemoryStore::new());
        let split = Item::new(&split_rule, split_quota, &key).with_fleet_modes(
            FleetModes::new().with_counting(Counting::Split(SplitSettings::new(2).gateway(0))),
        );
        let exact = Item::new(&shared_rule, cap, &key);
        assert!(
            fleet
                .check(&[split, exact])
                .await
                .expect("answers")
                .is_allowed()
        );
        for _ in 0..3 {
            assert!(
                !fleet
                    .check(&[split, exact])
                    .await
                    .expect("answers")
                    .is_allowed()
            );
        }
        // The part (4) was charged once: three more fit.
        assert_eq!(admitted(&fleet, split, 10).await, 3);
    });
}
