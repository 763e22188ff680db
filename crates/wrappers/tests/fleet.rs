//! The fleet store over the in-memory store: what it keeps stays bounded whatever keys arrive,
//! and a lease's units go back when it ends.

use tollgate_core::{
    Counting, FleetModes, Item, Key, LeaseSettings, MemoryStore, Quota, Rate, RuleId, Store,
    SyncSettings,
};
use tollgate_wrappers::FleetStore;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

/// 100,000 distinct keys through leased and synced rules: the fleet store's tables stay at or
/// below their bound, and every key's lease gave back what it did not spend.
#[test]
fn a_flood_of_keys_keeps_the_fleet_tables_bounded() {
    runtime().block_on(async {
        let shared = MemoryStore::new();
        let fleet = FleetStore::new(shared.clone());
        let (leased, synced) = (
            RuleId::new("partner").expect("valid"),
            RuleId::new("reads").expect("valid"),
        );
        let quota = Quota::token_bucket(10, Rate::per_hour(10)).expect("valid");
        let lease = Counting::Lease(LeaseSettings::new().max_units(5));
        let sync = Counting::Sync(SyncSettings::new());
        for caller in 0..100_000u32 {
            let key = Key::new(caller.to_be_bytes());
            for item in [
                Item::new(&leased, quota, &key)
                    .with_fleet_modes(FleetModes::new().with_counting(lease)),
                Item::new(&synced, quota, &key)
                    .with_fleet_modes(FleetModes::new().with_counting(sync)),
            ] {
                assert!(fleet.check(&[item]).await.expect("answers").is_allowed());
            }
        }
        fleet.background_done().await;
        let stats = fleet.stats();
        assert!(stats.leased_keys <= 1 << 16, "{stats:?}");
        assert!(stats.synced_keys <= (1 << 16) + 1, "{stats:?}");
        fleet.give_back().await;
        let first_key = Key::new(0u32.to_be_bytes());
        let first = Item::new(&leased, quota, &first_key).with_cost(0);
        assert_eq!(
            shared.peek(&first).await.expect("peeks").remaining(),
            9,
            "the first caller's lease ended and gave back all but the unit spent"
        );
    });
}

fn partner() -> (RuleId, Key, Quota) {
    (
        RuleId::new("partner").expect("valid"),
        Key::new("acme"),
        Quota::token_bucket(100, Rate::per_hour(100)).expect("valid"),
    )
}

/// A leased request that can never fit is refused as such, and takes nothing from the shared
/// count (no gateway hoards the bucket).
#[test]
fn a_leased_cost_above_the_limit_is_refused_and_takes_nothing() {
    runtime().block_on(async {
        let shared = MemoryStore::new();
        let (a, b) = (
            FleetStore::new(shared.clone()),
            FleetStore::new(shared.clone()),
        );
        let (rule, key, quota) = partner();
        let lease = Counting::Lease(LeaseSettings::new().max_units(10));
        let huge = Item::new(&rule, quota, &key)
            .with_cost(u64::MAX)
            .with_fleet_modes(FleetModes::new().with_counting(lease));
        let answer = a.check(&[huge]).await.expect("answers");
        assert_eq!(
            answer.items()[0].decision().refusal(),
            Some(tollgate_core::RefusalReason::CostExceedsLimit)
        );
        assert_eq!(a.leased(&rule, &key), 0);
        let one =
            Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_counting(lease));
        assert!(b.check(&[one]).await.expect("answers").is_allowed());
        b.background_done().await;
        // Partly drained (b took one): a request for more than is left gets nothing, and
        // holds nothing.
        let most = Item::new(&rule, quota, &key)
            .with_cost(100)
            .with_fleet_modes(FleetModes::new().with_counting(lease));
        let refused = a.check(&[most]).await.expect("answers");
        assert!(!refused.is_allowed());
        a.background_done().await;
        assert_eq!(
            a.leased(&rule, &key),
            0,
            "what was granted went straight back"
        );
    });
}

/// A request whose leased rule spent from the lease but whose exact rule refused puts the
/// spend back, even when it emptied the lease.
#[test]
fn a_refused_mixed_request_puts_its_leased_spend_back() {
    runtime().block_on(async {
        let shared = MemoryStore::new();
        let fleet = FleetStore::new(shared.clone());
        let (rule, key, quota) = partner();
        let lease = Counting::Lease(LeaseSettings::new().max_units(10));
        let leased =
            Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_counting(lease));
        for _ in 0..5 {
            assert!(fleet.check(&[leased]).await.expect("answers").is_allowed());
        }
        fleet.background_done().await;
        let held = fleet.leased(&rule, &key);
        assert!(held > 0);
        let strict = RuleId::new("strict").expect("valid");
        let spent = Quota::fixed_window(1, std::time::Duration::from_secs(3_600)).expect("valid");
        let exhausted = Item::new(&strict, spent, &key);
        assert!(
            fleet
                .check(&[exhausted])
                .await
                .expect("answers")
                .is_allowed()
        );
        let both = [leased.with_cost(held), exhausted];
        assert!(!fleet.check(&both).await.expect("answers").is_allowed());
        assert_eq!(fleet.leased(&rule, &key), held, "the spend went back");
    });
}

/// Many threads on one synced key with a small M: every check is answered (allowed or
/// refused), never an error, while the store is up.
#[test]
fn a_busy_synced_key_never_errors_while_the_store_is_up() {
    let fleet = FleetStore::new(MemoryStore::new());
    let sync = Counting::Sync(SyncSettings::new().max_unsynced(1));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let fleet = fleet.clone();
            std::thread::spawn(move || {
                runtime().block_on(async {
                    let (rule, key) = (RuleId::new("reads").expect("valid"), Key::new("acme"));
                    let quota =
                        Quota::token_bucket(1_000_000, Rate::per_second(1_000_000)).expect("valid");
                    let item = Item::new(&rule, quota, &key)
                        .with_fleet_modes(FleetModes::new().with_counting(sync));
                    let mut errors = 0;
                    for _ in 0..500 {
                        errors += u32::from(fleet.check(&[item]).await.is_err());
                    }
                    errors
                })
            })
        })
        .collect();
    let errors: u32 = threads
        .into_iter()
        .map(|thread| thread.join().expect("no thread panics"))
        .sum();
    assert_eq!(errors, 0);
}

/// Settings at their extremes tick without overflowing.
#[test]
fn extreme_settings_tick_without_overflow() {
    runtime().block_on(async {
        let fleet = FleetStore::new(MemoryStore::new());
        let (rule, key, quota) = partner();
        let forever = std::time::Duration::MAX;
        for counting in [
            Counting::Lease(
                LeaseSettings::new()
                    .top_up_every(forever)
                    .lifetime(forever)
                    .max_units(u64::MAX),
            ),
            Counting::Sync(SyncSettings::new().every(forever).max_unsynced(u64::MAX)),
        ] {
            let item = Item::new(&rule, quota, &key)
                .with_fleet_modes(FleetModes::new().with_counting(counting));
            let answer = fleet.check(&[item]).await.expect("answers");
            assert!(answer.is_allowed(), "{counting:?}: {answer:?}");
            fleet.tick().await;
            fleet.give_back().await;
            assert_eq!(fleet.stats().leased_keys, 0, "settling ended every lease");
        }
    });
}

/// `check_now` with no Tokio runtime (a caller on a plain thread): leased checks are still
/// decided from the lease, and a spend that would start a top-up (with nowhere to run it) is
/// left to the async check, which makes the call itself; nothing is lost or stuck.
#[test]
fn check_now_without_a_runtime_answers_from_the_lease_and_leaves_top_ups_to_check() {
    use futures_util::FutureExt;
    let shared = MemoryStore::new();
    let fleet = FleetStore::new(shared.clone());
    let (rule, key, _) = partner();
    let quota = Quota::token_bucket(1000, Rate::per_hour(1000)).expect("valid");
    let lease = Counting::Lease(LeaseSettings::new().max_units(10));
    let item =
        Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_counting(lease));
    let items = [item];
    let answered_now = std::cell::Cell::new(0);
    let check = |fleet: &FleetStore<MemoryStore>| {
        match fleet.check_now(&items) {
            Some(answer) => {
                answered_now.set(answered_now.get() + 1);
                answer
            }
            None => futures_executor::block_on(fleet.check(&items)),
        }
        .expect("the in-memory store answers")
        .is_allowed()
    };
    // The key's demand grows until leases of more than one unit are taken and topped up.
    let admitted = (0..100).filter(|_| check(&fleet)).count();
    assert_eq!(admitted, 100, "every check fits in a quota of 1,000");
    futures_executor::block_on(fleet.give_back());
    let stats = fleet.stats();
    assert!(
        answered_now.get() > 50,
        "most checks were decided from the lease at once, without a runtime: {} of 100 ({stats:?})",
        answered_now.get()
    );
    // Nothing was lost or left on its way: once the gateway gives back what it holds, the shared count holds
    // exactly the 100 units spent.
    let remaining = shared
        .peek(&Item::new(&rule, quota, &key).with_cost(0))
        .now_or_never()
        .expect("ready")
        .expect("peeks")
        .remaining();
    assert_eq!(remaining, 900, "{stats:?}");
}
