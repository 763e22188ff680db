//! Split allowances and sub-buckets: what an adversarial review found, kept as regressions.

use std::time::Duration;

use tollgate_core::{
    Counting, FleetModes, Item, Key, MemoryStore, Quota, Rate, RefusalReason, RuleId,
    SplitSettings, Store, Take, Timestamp,
};
use tollgate_testing::ManualClock;
use tollgate_wrappers::{FleetStore, SubBuckets};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

async fn admitted<S: Store>(store: &S, item: Item<'_>, attempts: u32) -> u64 {
    let mut admitted = 0;
    for _ in 0..attempts {
        if store.check(&[item]).await.expect("answers").is_allowed() {
            admitted += item.cost();
        }
    }
    admitted
}

/// A `FleetStore` peek of a split item reads the gateway's part where it is counted (the
/// shared store never sees it).
#[test]
fn a_fleet_peek_of_a_split_item_reads_the_gateway_s_part() {
    runtime().block_on(async {
        let (rule, key) = (RuleId::new("r15-d1").expect("valid"), Key::new("acme"));
        let quota = Quota::fixed_window(10, Duration::from_secs(60)).expect("valid");
        let item = Item::new(&rule, quota, &key).with_fleet_modes(
            FleetModes::new().with_counting(Counting::Split(SplitSettings::new(2).gateway(0))),
        );
        let fleet = FleetStore::new(MemoryStore::new());
        assert_eq!(admitted(&fleet, item, 10).await, 5, "the part is 5");
        assert!(!fleet.check(&[item]).await.expect("answers").is_allowed());
        let peek = fleet.peek(&item).await.expect("peeks");
        assert!(
            !peek.is_allowed() && peek.remaining() == 0,
            "peek says allowed={} remaining={} while every check is refused",
            peek.is_allowed(),
            peek.remaining()
        );
    });
}

/// A change of a rule's sub-buckets is a new layout, like a new rule id: the key starts
/// afresh in the new sub-buckets (documented; at most one more limit per change, once).
#[test]
fn changing_sub_buckets_starts_the_key_afresh_as_documented() {
    runtime().block_on(async {
        let clock = ManualClock::new(Timestamp::from_secs(1_000));
        let memory = MemoryStore::builder().clock(clock.clone()).build();
        let store = SubBuckets::new(memory);
        let (rule, key) = (RuleId::new("r15-d2").expect("valid"), Key::new("k"));
        let quota = Quota::fixed_window(100, Duration::from_secs(3600)).expect("valid");
        let mut admitted_per_layout = Vec::new();
        for spread in [1, 4, 8, 4] {
            let item = Item::new(&rule, quota, &key)
                .with_fleet_modes(FleetModes::new().with_sub_buckets(spread));
            admitted_per_layout.push(admitted(&store, item, 200).await);
        }
        assert_eq!(
            admitted_per_layout,
            [100, 100, 100, 0],
            "back to 4: its state is there"
        );
    });
}

/// An up-to item is never spread: with a cost above ⌈C/S⌉ it is granted as on a plain store.
#[test]
fn an_up_to_item_is_never_spread() {
    runtime().block_on(async {
        let (rule, key) = (RuleId::new("r15-d4").expect("valid"), Key::new("k"));
        let quota = Quota::fixed_window(100, Duration::from_secs(3600)).expect("valid");
        let item = Item::new(&rule, quota, &key)
            .with_cost(30)
            .with_take(Take::UpTo)
            .with_fleet_modes(FleetModes::new().with_sub_buckets(4));
        let plain = MemoryStore::new();
        let plain_answer = plain.check_one(&item).await.expect("answers");
        assert!(
            plain_answer.decision().is_allowed(),
            "the plain store grants it"
        );
        let store = SubBuckets::new(MemoryStore::new());
        let answer = store.check(&[item]).await.expect("answers");
        assert!(
            answer.is_allowed(),
            "refused: {:?}",
            answer.items()[0].decision().refusal()
        );
    });
}

/// A debt item is never spread: above ⌈C/S⌉ it is taken as on a plain store.
#[test]
fn a_debt_item_is_never_spread() {
    runtime().block_on(async {
        let (rule, key) = (RuleId::new("r15-d4b").expect("valid"), Key::new("k"));
        let quota = Quota::fixed_window(100, Duration::from_secs(3600)).expect("valid");
        let item = Item::new(&rule, quota, &key)
            .with_cost(60)
            .with_take(Take::AsDebt)
            .with_fleet_modes(FleetModes::new().with_sub_buckets(4));
        let plain = MemoryStore::new();
        assert!(
            plain
                .check_one(&item)
                .await
                .expect("answers")
                .decision()
                .is_allowed(),
            "the plain store takes it"
        );
        let store = SubBuckets::new(MemoryStore::new());
        let answer = store.check(&[item]).await.expect("answers");
        assert!(
            answer.is_allowed(),
            "refused: {:?}",
            answer.items()[0].decision().refusal()
        );
    });
}

/// Debt stays on the rule's whole key (debt items are never spread), so a caller who owes C
/// is granted nothing for a whole refill of C, as on a plain store.
#[test]
fn debt_on_the_whole_key_stops_every_sub_bucket() {
    runtime().block_on(async {
        let mut worst = 0;
        for trial in 0..40 {
            let clock = ManualClock::new(Timestamp::from_secs(1_000));
            let memory = MemoryStore::builder().clock(clock.clone()).build();
            let store = SubBuckets::new(memory);
            let rule = RuleId::new("r15-d5").expect("valid");
            let key = Key::new(format!("k{trial}"));
            let quota = Quota::token_bucket(8, Rate::per_second(8)).expect("valid");
            let debt = Item::new(&rule, quota, &key)
                .with_cost(4)
                .with_take(Take::AsDebt)
                .with_fleet_modes(FleetModes::new().with_sub_buckets(2));
            // 16 units spent: 8 of allowance, 8 owed.
            assert_eq!(admitted(&store, debt, 4).await, 16);
            // Half a second refills 4: a plain store still owes 4, so grants nothing.
            clock.advance(Duration::from_millis(500));
            let lease = Item::new(&rule, quota, &key)
                .with_cost(4)
                .with_take(Take::UpTo)
                .with_fleet_modes(FleetModes::new().with_sub_buckets(2));
            let answer = store.check(&[lease]).await.expect("answers");
            worst += u64::from(answer.is_allowed());
        }
        let plain_clock = ManualClock::new(Timestamp::from_secs(1_000));
        let plain = MemoryStore::builder().clock(plain_clock.clone()).build();
        let (rule, key) = (RuleId::new("r15-d5p").expect("valid"), Key::new("k"));
        let quota = Quota::token_bucket(8, Rate::per_second(8)).expect("valid");
        let debt = Item::new(&rule, quota, &key)
            .with_cost(4)
            .with_take(Take::AsDebt);
        assert_eq!(admitted(&plain, debt, 4).await, 16);
        plain_clock.advance(Duration::from_millis(500));
        let lease = Item::new(&rule, quota, &key)
            .with_cost(4)
            .with_take(Take::UpTo);
        let plain_granted = plain
            .check_one(&lease)
            .await
            .expect("answers")
            .granted(&lease);
        assert_eq!(
            plain_granted, 0,
            "the plain store makes the debtor pay first"
        );
        assert_eq!(
            worst, 0,
            "with sub-buckets a debtor still owing was granted units in {worst} of 40 trials"
        );
    });
}

/// A peek of a cost no sub-bucket can hold says what the check says: never fits.
#[test]
fn a_peek_of_a_never_fitting_cost_says_what_check_says() {
    runtime().block_on(async {
        let (rule, key) = (RuleId::new("r15-d6").expect("valid"), Key::new("k"));
        let quota = Quota::fixed_window(100, Duration::from_secs(3600)).expect("valid");
        let item = Item::new(&rule, quota, &key)
            .with_cost(30)
            .with_fleet_modes(FleetModes::new().with_sub_buckets(4));
        let store = SubBuckets::new(MemoryStore::new());
        let check = store.check(&[item]).await.expect("answers");
        let checked = check.items()[0].decision().refusal();
        let peek = store.peek(&item).await.expect("peeks");
        assert_eq!(checked, Some(RefusalReason::CostExceedsLimit));
        assert_eq!(
            peek.refusal(),
            checked,
            "peek: remaining {} retry {:?}",
            peek.remaining(),
            peek.retry_after()
        );
    });
}

/// `ItemDecision::granted` of an up-to item reports the units taken.
#[test]
fn granted_reports_the_units_taken() {
    runtime().block_on(async {
        let clock = ManualClock::new(Timestamp::from_secs(1_000));
        let memory = MemoryStore::builder().clock(clock.clone()).build();
        let store = SubBuckets::new(memory);
        let (rule, key) = (RuleId::new("r15-d7").expect("valid"), Key::new("k"));
        let quota = Quota::token_bucket(100, Rate::per_second(100)).expect("valid");
        let lease = Item::new(&rule, quota, &key)
            .with_cost(10)
            .with_take(Take::UpTo)
            .with_fleet_modes(FleetModes::new().with_sub_buckets(4));
        let answer = store.check(&[lease]).await.expect("answers");
        assert!(answer.is_allowed());
        assert_eq!(
            answer.items()[0].granted(&lease),
            10,
            "10 units were asked and taken"
        );
    });
}

/// A bucket whose whole span fits but whose largest part's span does not.
fn edge_quota() -> Quota {
    // One unit a (leap) year, the slowest rate accepted; 142 units: 142 years fit in 2^52 µs,
    // but part 0 of 4 (36 units at a quarter of the rate) would need 144 years.
    Quota::token_bucket(142, Rate::every(Duration::from_secs(31_622_400))).expect("valid")
}

/// A quota whose largest part cannot be made (its span out of range) is not spread at all,
/// and never admits more than C.
#[test]
fn a_quota_whose_largest_part_cannot_be_made_is_not_spread() {
    runtime().block_on(async {
        let quota = edge_quota();
        // Its largest part's span is out of range, so no part is made and it is never spread.
        assert!(quota.part(0, 4).is_err() && quota.part(3, 4).is_err());
        let clock = ManualClock::new(Timestamp::from_secs(1_000));
        let memory = MemoryStore::builder().clock(clock.clone()).build();
        let store = SubBuckets::new(memory);
        let (rule, key) = (RuleId::new("r15-d8").expect("valid"), Key::new("k"));
        let item =
            Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_sub_buckets(4));
        assert_eq!(item.sub_buckets(), 1);
        let got = admitted(&store, item, 400).await;
        assert!(got <= 142, "admitted {got} of a limit of 142");
    });
}

/// The same quota split over 4 gateways: no gateway takes a part, all count the whole limit
/// exactly in the shared store, and the fleet never admits more than C.
#[test]
fn a_split_whose_largest_part_cannot_be_made_is_counted_whole() {
    runtime().block_on(async {
        let quota = edge_quota();
        let clock = ManualClock::new(Timestamp::from_secs(1_000));
        let shared = MemoryStore::builder().clock(clock.clone()).build();
        let (rule, key) = (RuleId::new("r15-d8b").expect("valid"), Key::new("k"));
        let mut total = 0;
        for index in 0..4 {
            let gateway = FleetStore::with_clock(shared.clone(), clock.clone());
            let item = Item::new(&rule, quota, &key).with_fleet_modes(
                FleetModes::new()
                    .with_counting(Counting::Split(SplitSettings::new(4).gateway(index))),
            );
            total += admitted(&gateway, item, 200).await;
        }
        assert!(total <= 142, "the fleet admitted {total} of a limit of 142");
    });
}

/// A split rule over a store the gateways share, without a `FleetStore`, counts every part in
/// the one shared key: the fleet admits one part in all (documented: stricter, never looser).
#[test]
fn a_split_over_a_shared_plain_store_admits_one_part_in_all() {
    runtime().block_on(async {
        let shared = MemoryStore::new();
        let (rule, key) = (RuleId::new("r15-d9").expect("valid"), Key::new("k"));
        let quota = Quota::fixed_window(10, Duration::from_secs(3600)).expect("valid");
        let mut total = 0;
        for index in 0..2 {
            let item = Item::new(&rule, quota, &key).with_fleet_modes(
                FleetModes::new()
                    .with_counting(Counting::Split(SplitSettings::new(2).gateway(index))),
            );
            total += admitted(&shared, item, 20).await;
        }
        assert_eq!(total, 5, "one part, counted in the shared key");
    });
}

/// A shadow item with a split allowance never refuses a request, past its part too, on the
/// one-item path and in a mixed batch.
#[test]
fn a_shadow_split_item_never_refuses_the_request() {
    runtime().block_on(async {
        let (rule, key) = (RuleId::new("r15-d11").expect("valid"), Key::new("k"));
        let quota = Quota::fixed_window(10, Duration::from_secs(3600)).expect("valid");
        let shadow = Item::new(&rule, quota, &key)
            .with_mode(tollgate_core::Mode::Shadow)
            .with_fleet_modes(
                FleetModes::new().with_counting(Counting::Split(SplitSettings::new(2).gateway(0))),
            );
        let plain = MemoryStore::new();
        for _ in 0..10 {
            assert!(plain.check(&[shadow]).await.expect("answers").is_allowed());
        }
        let fleet = FleetStore::new(MemoryStore::new());
        let mut refused_alone = 0;
        for _ in 0..10 {
            refused_alone +=
                u32::from(!fleet.check(&[shadow]).await.expect("answers").is_allowed());
        }
        let other_rule = RuleId::new("r15-d11-other").expect("valid");
        let other = Item::new(&other_rule, quota, &key);
        let mut refused_mixed = 0;
        for _ in 0..10 {
            refused_mixed += u32::from(
                !fleet
                    .check(&[shadow, other])
                    .await
                    .expect("answers")
                    .is_allowed(),
            );
        }
        assert_eq!(
            (refused_alone, refused_mixed),
            (0, 0),
            "requests refused by a shadow item"
        );
    });
}

/// A primary that is down (in production, Redis during an outage).
struct Down;

impl Store for Down {
    async fn check(
        &self,
        _: &[Item<'_>],
    ) -> Result<tollgate_core::BatchDecision, tollgate_core::StoreError> {
        Err(tollgate_core::StoreError::unavailable("connection refused"))
    }
    async fn peek(
        &self,
        _: &Item<'_>,
    ) -> Result<tollgate_core::Decision, tollgate_core::StoreError> {
        Err(tollgate_core::StoreError::unavailable("connection refused"))
    }
    async fn refund(&self, r: tollgate_core::Receipt) -> Result<(), tollgate_core::RefundError> {
        Err(tollgate_core::RefundError::new(
            tollgate_core::StoreError::unavailable("connection refused"),
            r,
        ))
    }
    async fn reset(&self, _: &RuleId, _: &Key) -> Result<(), tollgate_core::StoreError> {
        Err(tollgate_core::StoreError::unavailable("connection refused"))
    }
}

/// During an outage an `OpenWithin(local)` item with sub-buckets shares the local quota out
/// too: a gateway admits the local quota once, not once per sub-bucket.
#[test]
fn open_within_during_an_outage_admits_the_local_quota_once() {
    runtime().block_on(async {
        let (rule, key) = (RuleId::new("r15-d12").expect("valid"), Key::new("k"));
        let quota = Quota::fixed_window(100, Duration::from_secs(3600)).expect("valid");
        let local = Quota::fixed_window(4, Duration::from_secs(3600)).expect("valid");
        let item = Item::new(&rule, quota, &key)
            .with_store_failure(tollgate_core::OnStoreFailure::OpenWithin(local))
            .with_fleet_modes(FleetModes::new().with_sub_buckets(4));
        let plain = tollgate_wrappers::FallbackStore::builder(Down)
            .timeout(Duration::from_millis(5))
            .build();
        let plain_item = Item::new(&rule, quota, &key)
            .with_store_failure(tollgate_core::OnStoreFailure::OpenWithin(local));
        assert_eq!(
            admitted(&plain, plain_item, 40).await,
            4,
            "without sub-buckets"
        );
        let store = FleetStore::new(
            tollgate_wrappers::FallbackStore::builder(Down)
                .timeout(Duration::from_millis(5))
                .build(),
        );
        let got = admitted(&store, item, 40).await;
        assert!(
            got <= 4,
            "with 4 sub-buckets an outage admitted {got} (local quota 4)"
        );
    });
}
