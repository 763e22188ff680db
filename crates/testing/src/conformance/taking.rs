//! Conformance cases for the two other ways an item takes its cost ([`Take`]): **up to** (a
//! lease: as much as there is, saying how much) and **as debt** (all of it, past the limit, paid
//! back before anything else is granted). Every algorithm but pacing, which always takes
//! exactly.

use std::time::Duration;

use super::{START, check_one, one_of_each, peek, rule};
use crate::ManualClock;
use tollgate_core::{Algorithm, Item, ItemDecision, Key, Quota, Rate, Store, Take};

/// Every quota of [`one_of_each`] but pacing (limit 10).
pub(super) fn counted() -> impl Iterator<Item = Quota> {
    one_of_each()
        .into_iter()
        .filter(|quota| quota.algorithm() != Algorithm::LeakyBucket)
}

/// The store's answer to `item` checked alone.
pub(super) async fn answer<S: Store>(store: &S, item: Item<'_>) -> ItemDecision {
    check_one(store, item)
        .await
        .into_items()
        .next()
        .expect("one answer for one item")
}

/// Up to 7, up to 7, up to 7 of 10: 7, then the 3 left, then a refusal that says when one unit
/// is back; the granted units are what the count shows.
pub(crate) async fn up_to_takes_what_there_is_and_says_how_much<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (id, key) = (rule("lease"), Key::new("acme"));
    for quota in counted() {
        store.reset(&id, &key).await.expect("store resets");
        let lease = Item::new(&id, quota, &key)
            .with_cost(7)
            .with_take(Take::UpTo);
        let name = quota.algorithm();
        let first = answer(&store, lease).await;
        assert!(first.decision().is_allowed(), "{name:?}");
        assert_eq!(first.granted(&lease), 7, "{name:?}");
        assert_eq!(first.decision().remaining(), 3, "{name:?}");
        let second = answer(&store, lease).await;
        assert_eq!(second.granted(&lease), 3, "{name:?} gets what is left");
        assert_eq!(second.decision().remaining(), 0, "{name:?}");
        let third = answer(&store, lease).await;
        assert!(
            !third.decision().is_allowed(),
            "{name:?} refused when empty"
        );
        assert_eq!(third.granted(&lease), 0, "{name:?}");
        assert!(third.decision().retry_after() > Duration::ZERO, "{name:?}");
        assert!(third.charge().is_none(), "{name:?}");
        assert_eq!(third.debt(), 0, "{name:?}");
    }
}

/// A lease's receipt gives back the units it got: the count is as it was before.
pub(crate) async fn a_lease_given_back_by_its_receipt_restores_the_count<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (id, key) = (rule("lease"), Key::new("acme"));
    for quota in counted() {
        store.reset(&id, &key).await.expect("store resets");
        let exact = Item::new(&id, quota, &key);
        let lease = exact.with_cost(20).with_take(Take::UpTo);
        let first = answer(&store, exact.with_cost(4)).await;
        assert!(first.decision().is_allowed());
        let items = [lease];
        let taken = store.check(&items).await.expect("store answers");
        assert_eq!(
            taken.items()[0].granted(&lease),
            6,
            "{:?}",
            quota.algorithm()
        );
        let receipt = taken
            .into_receipts(&items)
            .pop()
            .expect("a lease has a receipt");
        store.refund(receipt).await.expect("store refunds");
        assert_eq!(
            peek(&store, exact).await.remaining(),
            5,
            "{:?}: the lease's units are back (6, less the one peeked at)",
            quota.algorithm()
        );
    }
}

/// A debt item is charged in full, past the limit: 15 of 10 leaves 5 owed, reported as such;
/// leases are refused until the allowance that comes back has paid the 5, and get units only
/// after that.
pub(crate) async fn a_debt_is_charged_in_full_and_refuses_leases_until_paid<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("synced"), Key::new("acme"));
    let quota = Quota::token_bucket(10, Rate::per_second(1)).expect("valid quota");
    let spent = Item::new(&id, quota, &key)
        .with_cost(15)
        .with_take(Take::AsDebt);
    let lease = Item::new(&id, quota, &key)
        .with_cost(3)
        .with_take(Take::UpTo);
    let pushed = answer(&store, spent).await;
    assert!(
        pushed.decision().is_allowed(),
        "a debt item is never refused"
    );
    assert_eq!((pushed.granted(&spent), pushed.debt()), (15, 5));
    assert_eq!(pushed.decision().remaining(), 0);
    assert!(
        pushed.charge().is_none(),
        "spend that happened has no receipt"
    );

    let refused = answer(&store, lease).await;
    assert!(!refused.decision().is_allowed(), "refused while 5 are owed");
    assert_eq!(refused.debt(), 5);
    assert_eq!(refused.decision().retry_after(), Duration::from_secs(6));

    clock.advance(Duration::from_secs(5)); // 5 back: the debt, exactly
    let paid = answer(&store, lease).await;
    assert!(!paid.decision().is_allowed(), "the 5 back paid the debt");
    assert_eq!(paid.debt(), 0);

    clock.advance(Duration::from_secs(2));
    let after = answer(&store, lease).await;
    assert_eq!(after.granted(&lease), 2, "then what comes back is granted");
    assert_eq!(after.debt(), 0);
}

/// A window's debt is paid by the next window's allowance, for every algorithm that counts.
pub(crate) async fn a_debt_carries_into_the_next_window<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("synced"), Key::new("acme"));
    for quota in counted() {
        store.reset(&id, &key).await.expect("store resets");
        let name = quota.algorithm();
        let spent = Item::new(&id, quota, &key)
            .with_cost(14)
            .with_take(Take::AsDebt);
        assert_eq!(answer(&store, spent).await.debt(), 4, "{name:?}");
        // Once the caller's allowance is whole again (a refill, the next window; the sliding
        // counter's old window fades over one more), the first thing it does is pay the 4.
        let whole = match name {
            Algorithm::SlidingWindowCounter => 2 * quota.replenish_time(),
            _ => quota.replenish_time(),
        };
        clock.advance(whole);
        let report = answer(&store, spent.with_cost(0)).await;
        assert_eq!(report.debt(), 0, "{name:?}");
        assert_eq!(
            report.decision().remaining(),
            6,
            "{name:?}: 10 back, 4 paid"
        );
    }
}

/// Spend pushed as debt stays charged when another item refuses the batch: the spend happened,
/// and refusing something else does not undo it.
pub(crate) async fn debt_stays_charged_when_the_batch_is_refused<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (synced, strict, key) = (rule("synced"), rule("strict"), Key::new("acme"));
    for quota in counted() {
        store.reset(&synced, &key).await.expect("store resets");
        store.reset(&strict, &key).await.expect("store resets");
        let spent = Item::new(&synced, quota, &key)
            .with_cost(3)
            .with_take(Take::AsDebt);
        let never_fits = Item::new(&strict, quota, &key).with_cost(11);
        let batch = store
            .check(&[spent, never_fits])
            .await
            .expect("store answers");
        assert!(!batch.is_allowed(), "{:?}", quota.algorithm());
        assert_eq!(
            peek(&store, Item::new(&synced, quota, &key))
                .await
                .remaining(),
            6,
            "{:?}: the 3 stay charged (10 - 3, less the one peeked at)",
            quota.algorithm()
        );
    }
}

/// Nobody checking for as long as the allowance takes to come back and pay a debt: the debt
/// lapses, since the allowance that would have paid it went unused.
pub(crate) async fn a_debt_lapses_once_the_allowance_could_have_paid_it<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("synced"), Key::new("acme"));
    let quota = Quota::token_bucket(10, Rate::per_second(1)).expect("valid quota");
    let spent = Item::new(&id, quota, &key)
        .with_cost(25)
        .with_take(Take::AsDebt);
    assert_eq!(answer(&store, spent).await.debt(), 15);
    // Whole again after 10 s, then 15 owed: two more replenish times of 10 s.
    clock.advance(Duration::from_secs(31));
    let lease = Item::new(&id, quota, &key)
        .with_cost(10)
        .with_take(Take::UpTo);
    let after = answer(&store, lease).await;
    assert_eq!((after.granted(&lease), after.debt()), (10, 0));
}

/// A reset forgives a debt with the count.
pub(crate) async fn reset_forgives_a_debt<S: Store>(make: &impl Fn(ManualClock) -> S) {
    let store = make(ManualClock::new(START));
    let (id, key) = (rule("synced"), Key::new("acme"));
    for quota in counted() {
        store.reset(&id, &key).await.expect("store resets");
        let spent = Item::new(&id, quota, &key)
            .with_cost(30)
            .with_take(Take::AsDebt);
        assert_eq!(
            answer(&store, spent).await.debt(),
            20,
            "{:?}",
            quota.algorithm()
        );
        store.reset(&id, &key).await.expect("store resets");
        let lease = Item::new(&id, quota, &key)
            .with_cost(10)
            .with_take(Take::UpTo);
        let after = answer(&store, lease).await;
        assert_eq!(after.granted(&lease), 10, "{:?}", quota.algorithm());
    }
}

/// Shadow items and pacing quotas take exactly, whatever take they were given: a shadow lease
/// of 20 of 10 is a would-be refusal for the cost, and pacing books every slot it was asked.
pub(crate) async fn shadow_and_pacing_items_take_exactly<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (id, key) = (rule("watch"), Key::new("acme"));
    let bucket = Quota::token_bucket(10, Rate::per_second(1)).expect("valid quota");
    let shadow = Item::new(&id, bucket, &key)
        .with_cost(20)
        .with_mode(tollgate_core::Mode::Shadow)
        .with_take(Take::UpTo);
    assert_eq!(shadow.take(), Take::Exact);
    let would = answer(&store, shadow).await;
    assert!(!would.decision().is_allowed());
    assert_eq!(would.granted(&shadow), 0);

    let pacing =
        Quota::leaky_bucket(Rate::per_second(10), Duration::from_millis(900)).expect("valid quota");
    let paced = Item::new(&id, pacing, &key)
        .with_cost(3)
        .with_take(Take::AsDebt);
    assert_eq!(paced.take(), Take::Exact);
    let booked = answer(&store, paced).await;
    assert!(booked.decision().is_allowed());
    assert_eq!(booked.granted(&paced), 3);
    assert_eq!(booked.debt(), 0);
}

/// Spend far past any allowance is recorded as a debt of at most 1,024 limits, in every store,
/// and never fails a batch (another caller's debt in the same batch is settled as usual).
pub(crate) async fn a_huge_debt_is_capped_and_never_fails<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let id = rule("synced");
    let (a, b) = (Key::new("a"), Key::new("b"));
    for quota in counted() {
        store.reset(&id, &a).await.expect("store resets");
        store.reset(&id, &b).await.expect("store resets");
        let name = quota.algorithm();
        let huge = Item::new(&id, quota, &b)
            .with_cost(u64::MAX)
            .with_take(Take::AsDebt);
        assert_eq!(answer(&store, huge).await.debt(), 10 * 1_024, "{name:?}");
        let owing = Item::new(&id, quota, &a)
            .with_cost(15)
            .with_take(Take::AsDebt);
        assert_eq!(answer(&store, owing).await.debt(), 5, "{name:?}");
        let batch = [
            owing.with_cost(0),
            Item::new(&id, quota, &b)
                .with_cost(1_000_000_000_000_000)
                .with_take(Take::AsDebt),
        ];
        let settled = store
            .check(&batch)
            .await
            .expect("a huge debt never fails a batch");
        assert_eq!(settled.items()[0].debt(), 5, "{name:?}");
        assert_eq!(settled.items()[1].debt(), 10 * 1_024, "{name:?}");
        let lease = Item::new(&id, quota, &b).with_cost(1).with_take(Take::UpTo);
        let refused = answer(&store, lease).await;
        assert!(!refused.decision().is_allowed(), "{name:?}");
    }
}
