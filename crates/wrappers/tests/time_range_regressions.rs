//! A wrapper's own clock past `Timestamp::MAX_SUPPORTED` (found by the issue-40 review): what a
//! wrapper keeps in its own memory — a synced copy and the time of its last push, a split's
//! part, a fallback's local count — is never written at a time no store can represent. Such a
//! call answers the stores' error, and the wrapper answers as before once its clock is back.

use std::time::Duration;

use tollgate_core::{
    Counting, FleetModes, Item, Key, MemoryStore, OnStoreFailure, Quota, RuleId, SplitSettings,
    Store, SyncSettings, Timestamp,
};
use tollgate_testing::ManualClock;
use tollgate_wrappers::{FallbackStore, FleetStore};

mod common;
use common::Down;

const PAST: Timestamp = Timestamp::from_micros(Timestamp::MAX_SUPPORTED.as_micros() + 1);

fn start() -> Timestamp {
    tollgate_testing::conformance::START
}

/// `seconds` after the start.
fn after(seconds: u64) -> Timestamp {
    Timestamp::from_micros(start().as_micros() + seconds * 1_000_000)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
}

fn five_a_minute() -> Quota {
    Quota::fixed_window(5, Duration::from_secs(60)).expect("a valid quota")
}

/// A synced rule checked past the range and then back: its checks answer the range error, and
/// back in range it counts as a rule that never left (five a minute), pushed to the shared store
/// as before — not stuck behind a push "made" in 2112.
#[test]
fn a_synced_rule_answers_as_before_once_its_clock_is_back() {
    let clock = ManualClock::new(start());
    let shared = MemoryStore::builder().clock(clock.clone()).build();
    let fleet = FleetStore::with_clock(shared.clone(), clock.clone());
    let (id, key) = (RuleId::new("posts").expect("valid"), Key::new("alice"));
    let modes = FleetModes::new().with_counting(Counting::Sync(SyncSettings::new()));
    let item = Item::new(&id, five_a_minute(), &key).with_fleet_modes(modes);
    runtime().block_on(async {
        assert!(
            fleet
                .check_one(&item)
                .await
                .expect("in range")
                .decision()
                .is_allowed()
        );
        clock.set(PAST);
        for _ in 0..3 {
            let error = fleet.check_one(&item).await.expect_err("past the range");
            assert!(error.is_time_out_of_range(), "{error}");
        }
        fleet.tick().await;
        clock.set(start());
        let mut allowed = 0;
        for minute in 1..=10u64 {
            clock.set(after(60 * minute));
            for _ in 0..10 {
                let answer = fleet.check_one(&item).await.expect("back in range");
                allowed += u64::from(answer.decision().is_allowed());
            }
            fleet.tick().await;
            fleet.background_done().await;
        }
        assert!(
            (45..=55).contains(&allowed),
            "about five a minute over ten minutes, as a rule that never left: {allowed}"
        );
        // The shared store saw the spend: it was pushed, not held up for good.
        let shared_left = shared
            .peek(&Item::new(&id, five_a_minute(), &key))
            .await
            .expect("peek");
        assert!(
            shared_left.remaining() < 5,
            "the last minute's spend reached the shared store: {shared_left:?}"
        );
    });
}

/// A split rule's part past the range is the range error, and its part is as it was once the
/// clock is back (a fixed window not frozen until 2112).
#[test]
fn a_split_rule_answers_the_range_error_and_keeps_its_part() {
    let clock = ManualClock::new(start());
    let fleet = FleetStore::with_clock(
        MemoryStore::builder().clock(clock.clone()).build(),
        clock.clone(),
    );
    let (id, key) = (RuleId::new("reads").expect("valid"), Key::new("bob"));
    let modes = FleetModes::new().with_counting(Counting::Split(SplitSettings::new(1)));
    let item = Item::new(&id, five_a_minute(), &key).with_fleet_modes(modes);
    runtime().block_on(async {
        assert!(
            fleet
                .check_one(&item)
                .await
                .expect("in range")
                .decision()
                .is_allowed()
        );
        clock.set(PAST);
        let error = fleet.check_one(&item).await.expect_err("past the range");
        assert!(error.is_time_out_of_range(), "{error}");
        let error = fleet.peek(&item).await.expect_err("past the range");
        assert!(error.is_time_out_of_range(), "{error}");
        let now = fleet.check_now(std::slice::from_ref(&item));
        assert!(
            matches!(now, Some(Err(ref error)) if error.is_time_out_of_range()),
            "{now:?}"
        );
        clock.set(after(120));
        let answer = fleet.check_one(&item).await.expect("back in range");
        assert!(answer.decision().is_allowed(), "a new window: {answer:?}");
    });
}

/// A fallback whose own clock reads past the range counts nothing in its local memory (a
/// `local` rule answers the range error), so an outage later, back in range, finds the local
/// count as it was: five a minute, not a window frozen until 2112.
#[test]
fn a_fallback_past_the_range_counts_nothing_locally() {
    let clock = ManualClock::new(start());
    let store = FallbackStore::builder(Down).clock(clock.clone()).build();
    let (id, key) = (RuleId::new("logins").expect("valid"), Key::new("carol"));
    let item = Item::new(&id, five_a_minute(), &key).with_store_failure(OnStoreFailure::Local);
    runtime().block_on(async {
        clock.set(PAST);
        for _ in 0..5 {
            let error = store.check_one(&item).await.expect_err("past the range");
            assert!(error.is_time_out_of_range(), "{error}");
        }
        clock.set(after(3600));
        let mut allowed = 0;
        for _ in 0..10 {
            let answer = store.check_one(&item).await.expect("answered locally");
            allowed += u32::from(answer.decision().is_allowed());
        }
        assert_eq!(allowed, 5, "the local count starts afresh in range");
    });
}
