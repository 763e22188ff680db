//! Conformance cases for a cost settled after the work is done ([`Estimate`]): an estimate
//! taken up front after the caller's debt ([`Take::AfterDebt`]), then the difference charged as
//! debt or given back. Every algorithm but pacing and concurrency, which always take exactly.

use std::time::Duration;

use super::taking::{answer, counted};
use super::{START, peek, rule};
use crate::ManualClock;
use tollgate_core::{Algorithm, Estimate, Item, Key, Quota, Rate, Settlement, Store, Take};

/// An estimate admitted on `item`, settled at `actual`.
async fn settle<S: Store>(store: &S, item: Item<'_>, actual: u64) -> Settlement {
    let admitted = answer(store, item).await;
    assert!(
        admitted.decision().is_allowed(),
        "{:?}",
        item.quota().algorithm()
    );
    Estimate::new(&item, admitted)
        .settle(store, actual)
        .await
        .expect("store settles")
}

/// 15 spent on a bucket of 10 refilled 1 a second leaves 5 owed: an estimate of 2 is refused
/// until the 5 and the 2 fit (7 s), is still refused once the 5 are paid but the 2 are not back,
/// and is admitted once they are.
pub(crate) async fn an_estimate_waits_until_the_debt_and_its_cost_fit<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("tokens"), Key::new("acme"));
    let quota = Quota::token_bucket(10, Rate::per_second(1)).expect("valid quota");
    let spent = Item::new(&id, quota, &key)
        .with_cost(15)
        .with_take(Take::AsDebt);
    assert_eq!(answer(&store, spent).await.debt(), 5);
    let estimate = Item::new(&id, quota, &key)
        .with_cost(2)
        .with_take(Take::AfterDebt);

    let refused = answer(&store, estimate).await;
    assert!(!refused.decision().is_allowed(), "refused while 5 are owed");
    assert!(refused.charge().is_none());
    assert_eq!(refused.debt(), 5);
    assert_eq!(refused.decision().retry_after(), Duration::from_secs(7));

    clock.advance(Duration::from_secs(6)); // the 5 paid, 1 of the 2 back
    let still = answer(&store, estimate).await;
    assert!(!still.decision().is_allowed(), "the 2 are not back yet");
    assert_eq!(still.debt(), 0, "the debt is paid");

    clock.advance(Duration::from_secs(1));
    let admitted = answer(&store, estimate).await;
    assert!(admitted.decision().is_allowed());
    assert_eq!(admitted.decision().remaining(), 0);
}

/// For every algorithm: once the allowance is whole again the debt is paid first, and the
/// estimate is charged exactly from what is left.
pub(crate) async fn an_estimate_is_charged_exactly_once_the_debt_is_paid<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("tokens"), Key::new("acme"));
    for quota in counted() {
        store.reset(&id, &key).await.expect("store resets");
        let name = quota.algorithm();
        let spent = Item::new(&id, quota, &key)
            .with_cost(14)
            .with_take(Take::AsDebt);
        assert_eq!(answer(&store, spent).await.debt(), 4, "{name:?}");
        let estimate = Item::new(&id, quota, &key)
            .with_cost(3)
            .with_take(Take::AfterDebt);
        assert!(
            !answer(&store, estimate).await.decision().is_allowed(),
            "{name:?}: refused while owing"
        );
        let whole = match name {
            Algorithm::SlidingWindowCounter => 2 * quota.replenish_time(),
            _ => quota.replenish_time(),
        };
        clock.advance(whole);
        let admitted = answer(&store, estimate).await;
        assert!(admitted.decision().is_allowed(), "{name:?}");
        assert_eq!(admitted.debt(), 0, "{name:?}");
        assert_eq!(
            admitted.decision().remaining(),
            3,
            "{name:?}: 10 back, 4 paid, 3 charged"
        );
        assert!(
            !answer(&store, estimate.with_cost(4))
                .await
                .decision()
                .is_allowed(),
            "{name:?}: all or nothing: 4 do not fit in 3"
        );
    }
}

/// Estimate 2, actual 15, limit 10: the 8 left are charged and 5 are owed; the next estimate
/// is refused until they are paid.
pub(crate) async fn settling_above_the_estimate_charges_the_difference_as_debt<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (id, key) = (rule("tokens"), Key::new("acme"));
    for quota in counted() {
        store.reset(&id, &key).await.expect("store resets");
        let name = quota.algorithm();
        let estimate = Item::new(&id, quota, &key)
            .with_cost(2)
            .with_take(Take::AfterDebt);
        assert_eq!(
            settle(&store, estimate, 15).await,
            Settlement::Charged { units: 13, debt: 5 },
            "{name:?}"
        );
        let next = answer(&store, estimate.with_cost(1)).await;
        assert!(
            !next.decision().is_allowed(),
            "{name:?}: the debt comes first"
        );
        assert_eq!(next.debt(), 5, "{name:?}");
    }
}

/// Estimate 8, actual 3: 5 come back, the count is as if 3 had been charged.
pub(crate) async fn settling_below_the_estimate_gives_back_the_difference<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (id, key) = (rule("tokens"), Key::new("acme"));
    for quota in counted() {
        store.reset(&id, &key).await.expect("store resets");
        let name = quota.algorithm();
        let estimate = Item::new(&id, quota, &key)
            .with_cost(8)
            .with_take(Take::AfterDebt);
        assert_eq!(
            settle(&store, estimate, 3).await,
            Settlement::Refunded { units: 5 },
            "{name:?}"
        );
        let left = peek(&store, Item::new(&id, quota, &key).with_cost(0)).await;
        assert_eq!(left.remaining(), 7, "{name:?}: 10 - 3");
        assert_eq!(
            settle(&store, estimate.with_cost(2), 2).await,
            Settlement::Unchanged,
            "{name:?}"
        );
    }
}

/// An estimate that was never charged (cost 0) settles from nothing: the whole actual cost is
/// charged.
pub(crate) async fn an_estimate_of_zero_charges_the_whole_actual_cost<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (id, key) = (rule("tokens"), Key::new("acme"));
    let quota = Quota::token_bucket(10, Rate::per_second(1)).expect("valid quota");
    let estimate = Item::new(&id, quota, &key)
        .with_cost(0)
        .with_take(Take::AfterDebt);
    assert_eq!(
        settle(&store, estimate, 4).await,
        Settlement::Charged { units: 4, debt: 0 }
    );
    let left = peek(&store, Item::new(&id, quota, &key).with_cost(0)).await;
    assert_eq!(left.remaining(), 6);
}
