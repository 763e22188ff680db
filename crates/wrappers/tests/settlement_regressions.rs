//! What an estimate that cannot be settled does: it stands. A refused answer (the work never
//! ran) and a split rule's local count (which keeps no receipt) settle nothing.

use futures_executor::block_on;
use tollgate_core::{
    Counting, Estimate, FleetModes, Item, Key, MemoryStore, Quota, Rate, RuleId, Settlement,
    SplitSettings, Store, Take,
};
use tollgate_wrappers::FleetStore;

fn quota() -> Quota {
    Quota::token_bucket(10, Rate::per_hour(10)).expect("valid")
}

#[test]
fn a_refused_estimate_settles_nothing() {
    let store = MemoryStore::new();
    let (rule, key) = (RuleId::new("tokens").expect("valid"), Key::new("acct"));
    let item = Item::new(&rule, quota(), &key)
        .with_cost(11)
        .with_take(Take::AfterDebt);
    let refused = block_on(store.check_one(&item)).expect("memory answers");
    assert!(!refused.decision().is_allowed());
    let settled = block_on(Estimate::new(&item, refused).settle(&store, 11)).expect("settles");
    assert_eq!(settled, Settlement::Unchanged);
    let left = block_on(store.peek(&item.with_cost(0))).expect("memory answers");
    assert_eq!(
        left.remaining(),
        10,
        "nothing charged for work that never ran"
    );
}

#[test]
fn a_split_rules_estimate_stands() {
    let store = FleetStore::new(MemoryStore::new());
    let (rule, key) = (RuleId::new("tokens").expect("valid"), Key::new("acct"));
    let quota = Quota::token_bucket(400, Rate::per_hour(400)).expect("valid");
    let split = FleetModes::new().with_counting(Counting::Split(SplitSettings::new(4).gateway(0)));
    let item = Item::new(&rule, quota, &key)
        .with_fleet_modes(split)
        .with_cost(50)
        .with_take(Take::AfterDebt);
    for _ in 0..2 {
        let answer = block_on(store.check_one(&item)).expect("answers");
        assert!(answer.decision().is_allowed());
        let settled = block_on(Estimate::new(&item, answer).settle(&store, 50)).expect("settles");
        assert_eq!(settled, Settlement::Unchanged, "never charged twice");
    }
    let third = block_on(store.check_one(&item)).expect("answers");
    assert!(
        !third.decision().is_allowed(),
        "this gateway's 100: two estimates of 50"
    );
}
