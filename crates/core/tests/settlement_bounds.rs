//! The bounds a settled cost keeps ([`Estimate`]): with `K` requests in flight, a caller gets at
//! most `K × (max actual − estimate)` past what its quota allows over any run, and whatever it
//! owes is always paid — the next request is admitted once the allowance has come back for the
//! debt and its estimate, never before the debt is paid.

use std::time::Duration;

use futures_executor::block_on;
use proptest::prelude::*;
use tollgate_core::{Estimate, Item, Key, MemoryStore, Quota, Rate, RuleId, Store, Take};
use tollgate_testing::ManualClock;

const LIMIT: u64 = 100;
/// 10 units a second.
const PER_SECOND: u64 = 10;

/// One round: how many requests try to start at once, what each one's work actually cost, and
/// how long passes before the next round.
#[derive(Debug, Clone)]
struct Round {
    actuals: Vec<u64>,
    pause_ms: u64,
}

fn rounds(in_flight: usize, max_actual: u64) -> impl Strategy<Value = Vec<Round>> {
    let round = (
        prop::collection::vec(0..=max_actual, 1..=in_flight),
        0u64..3_000,
    )
        .prop_map(|(actuals, pause_ms)| Round { actuals, pause_ms });
    prop::collection::vec(round, 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn k_in_flight_overshoot_at_most_k_times_the_excess_and_always_pay(
        in_flight in 1usize..8,
        estimate in 1u64..=20,
        excess in 0u64..=200,
        plan in (1usize..8, 0u64..=220).prop_flat_map(|(k, max)| rounds(k, max)),
    ) {
        let max_actual = estimate + excess;
        let clock = ManualClock::new(tollgate_testing::conformance::START);
        let store = MemoryStore::builder().clock(clock.clone()).build();
        let (rule, key) = (RuleId::new("tokens").expect("valid"), Key::new("acct"));
        let quota = Quota::token_bucket(LIMIT, Rate::per_second(PER_SECOND)).expect("valid");
        let item = Item::new(&rule, quota, &key)
            .with_cost(estimate)
            .with_take(Take::AfterDebt);

        let (mut consumed, mut elapsed_ms) = (0u64, 0u64);
        for round in plan {
            // Up to `in_flight` requests start at once (each admitted on its estimate), then
            // all finish and settle.
            let mut running = Vec::new();
            for &actual in round.actuals.iter().take(in_flight) {
                let answer = block_on(store.check_one(&item)).expect("memory answers");
                if answer.decision().is_allowed() {
                    running.push((Estimate::new(&item, answer), actual.min(max_actual)));
                }
            }
            for (estimate, actual) in running {
                consumed += actual;
                block_on(estimate.settle(&store, actual)).expect("memory settles");
            }
            clock.advance(Duration::from_millis(round.pause_ms));
            elapsed_ms += round.pause_ms;
            let allowed = LIMIT + PER_SECOND * elapsed_ms / 1_000 + 1;
            let bound = allowed + in_flight as u64 * excess;
            prop_assert!(
                consumed <= bound,
                "consumed {consumed} past the bound {bound} ({in_flight} in flight)"
            );
        }

        // Whatever is owed is paid: a caller that keeps trying when told to is refused until
        // the allowance has come back for the debt and its estimate (it pays the debt as the
        // allowance comes back, at most a bucketful a check), then admitted owing nothing.
        let owed = block_on(store.check_one(&item.with_cost(0).with_take(Take::AsDebt)))
            .expect("memory answers")
            .debt();
        prop_assert!(owed <= in_flight as u64 * excess);
        let mut waited = Duration::ZERO;
        let admitted = loop {
            let answer = block_on(store.check_one(&item)).expect("memory answers");
            if answer.decision().is_allowed() {
                break answer;
            }
            prop_assert!(waited < Duration::from_secs(3_600), "never admitted");
            let wait = answer.decision().retry_after();
            prop_assert!(wait > Duration::ZERO);
            clock.advance(wait);
            waited += wait;
        };
        prop_assert_eq!(admitted.debt(), 0);
        let per_unit = Duration::from_millis(1_000 / PER_SECOND);
        // Owing, nothing was left: the debt and the estimate had to come back (to a unit).
        if owed > 0 {
            let earliest = per_unit * u32::try_from(owed + estimate).expect("small");
            prop_assert!(
                waited + per_unit >= earliest,
                "admitted after {waited:?} while owing {owed}"
            );
        }
    }
}
