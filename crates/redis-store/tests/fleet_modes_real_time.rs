//! Fleet modes as a user runs them (see `common/fleet_flood.rs`): 1, 4 and 10 gateways × 50
//! tasks on one hot key for a second of real time on a real `redis-server`, beside the exact
//! limiter; store calls counted by Redis itself.
//!
//! Each shape asserts what the guide's table of fleet modes (`docs/guide/src/fleet-modes.md`) states: the admitted count within
//! [exact − under-bound, exact + over-bound] and the store calls within the stated rate.

mod common;
#[path = "common/fleet_flood.rs"]
mod fleet_flood;

use std::time::Duration;

use tollgate_core::{Counting, FleetModes, Item, Key, LeaseSettings, Quota, Rate, RuleId, Store};
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_redis_harness::RedisServer;
use tollgate_wrappers::FleetStore;

use crate::fleet_flood::Outcome;

const TASKS: usize = 50;
const RUN: Duration = Duration::from_secs(1);

fn run(gateways: usize, quota: Quota, counting: Counting) -> Outcome {
    fleet_flood::run(gateways, TASKS, quota, counting, RUN)
}

/// The guide's `partner-api` rule: a bucket of 200 refilled 200 a second, leased 20 units at a
/// time, topped up every 100 ms, leases living at most a second.
fn partner_lease() -> LeaseSettings {
    LeaseSettings::new()
        .max_units(20)
        .top_up_every(Duration::from_millis(100))
        .lifetime(Duration::from_secs(1))
}

/// A runtime on this one thread, where a yield lets every ready task run once.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The algorithms of the matrix, each allowing 200 a second at most.
fn algorithms() -> Vec<(&'static str, Quota)> {
    let second = Duration::from_secs(1);
    vec![
        (
            "token bucket",
            Quota::token_bucket(200, Rate::per_second(200)).expect("valid"),
        ),
        (
            "gcra",
            Quota::gcra(Rate::per_second(200), 200).expect("valid"),
        ),
        (
            "fixed window",
            Quota::fixed_window(200, second).expect("valid"),
        ),
        (
            "sliding counter",
            Quota::sliding_window_counter(200, second).expect("valid"),
        ),
        (
            "sliding log",
            Quota::sliding_window_log(200, second).expect("valid"),
        ),
    ]
}

/// What a quota lets back in one second (its rate, or a window's limit per window length).
const PER_SECOND: u64 = 200;

/// Windows a one-second run can touch: two for one-second windows, one for the buckets (whose
/// debt carries over).
fn windows(quota: &Quota) -> u64 {
    if quota.window().is_some() { 2 } else { 1 }
}

/// The slack for two counts taken side by side on a busy machine: 2 %, and 2 units.
fn slack(exact: u64) -> u64 {
    exact / 50 + 2
}

#[test]
fn leases_admit_within_their_bounds_at_one_call_per_gateway_per_period() {
    let settings = partner_lease();
    let period = settings.top_up_period().as_secs_f64();
    let refilled_per_period = (PER_SECOND as f64 * period) as u64;
    for gateways in [1u64, 4, 10] {
        for (name, quota) in algorithms() {
            let outcome = run(gateways as usize, quota, Counting::Lease(settings));
            eprintln!("lease {name:16} G={gateways:2} {outcome:?}");
            let Outcome {
                admitted,
                exact,
                calls,
                seconds,
                ..
            } = outcome;
            // Leased units are the shared count's own: never more than the exact limiter.
            assert!(
                admitted <= exact + slack(exact),
                "lease {name}, G={gateways}: {outcome:?}"
            );
            // Under: what the gateways hold at the end (G·H) and one period's refill.
            let under = gateways * settings.held_at_most() + refilled_per_period;
            assert!(
                admitted + under + slack(exact) >= exact,
                "lease {name}, G={gateways}: {admitted} of {exact}, bound {under} under"
            );
            // About one call per gateway per period, and what a full bucket or window takes in
            // leases of at most U.
            let periods = (seconds / period).ceil() as u64;
            let most = gateways * (periods + 3) + exact / settings.max_lease();
            assert!(
                calls <= most,
                "lease {name}, G={gateways}: {calls} calls, bound {most}"
            );
        }
    }
}

#[test]
fn sync_admits_within_a_tenth_of_the_limit_by_default() {
    let settings = tollgate_core::SyncSettings::new();
    let interval = settings.interval().as_secs_f64();
    for gateways in [1u64, 4, 10] {
        for (name, quota) in algorithms() {
            let outcome = run(gateways as usize, quota, Counting::Sync(settings));
            eprintln!("sync {name:16} G={gateways:2} {outcome:?}");
            let Outcome {
                admitted,
                exact,
                calls,
                seconds,
                ..
            } = outcome;
            // Over: G·M ≤ max(L / 10, G) in any window (a bucket's debt carries over).
            let over = (quota.limit() / 10).max(gateways) * windows(&quota);
            assert!(
                admitted <= exact + over + slack(exact),
                "sync {name}, G={gateways}: {admitted} of {exact}, bound {over} over"
            );
            // Under: a copy up to an interval old refuses what the shared count freed meanwhile.
            let under = 2 * (PER_SECOND as f64 * interval) as u64 * windows(&quota);
            assert!(
                admitted + under + slack(exact) >= exact,
                "sync {name}, G={gateways}: {admitted} of {exact}, bound {under} under"
            );
            // One push per gateway per interval, and one per M units admitted (M = 1 for a
            // gateway's first two intervals, while it learns the fleet).
            let intervals = (seconds / interval).ceil() as u64;
            let most = gateways * (intervals + 3) + admitted;
            assert!(
                calls <= most,
                "sync {name}, G={gateways}: {calls} calls, bound {most}"
            );
        }
    }
}

/// 50 tasks on one gateway find a lease short at once, while the store cannot answer (the
/// server stopped with SIGSTOP): one store call is on its way and the others wait for it;
/// once the server runs again every task is decided, none of them in error.
#[test]
fn one_call_at_a_time_per_key_however_many_tasks_find_the_lease_short() {
    let server = RedisServer::start().expect("start redis-server");
    current_thread().block_on(async {
        let gateway = fleet_flood::gateways(&server, 1, "one").await.remove(0);
        let rule = RuleId::new("partner-api").expect("valid");
        let quota = Quota::token_bucket(200, Rate::per_second(200)).expect("valid");
        server.pause().expect("SIGSTOP the server");
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let (gateway, rule) = (gateway.clone(), rule.clone());
                tokio::spawn(async move {
                    let key = Key::new("acme");
                    let item = Item::new(&rule, quota, &key).with_fleet_modes(
                        FleetModes::new().with_counting(Counting::Lease(partner_lease())),
                    );
                    gateway
                        .check(&[item])
                        .await
                        .map(|answer| answer.is_allowed())
                })
            })
            .collect();
        // Every task runs until it waits (on this one thread, a yield lets each ready task
        // run once).
        for _ in 0..4 * TASKS {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            gateway.stats().store_calls,
            1,
            "one call on its way for the key, the other tasks waiting for it"
        );
        server.resume().expect("SIGCONT the server");
        let mut admitted = 0;
        for task in tasks {
            if task.await.expect("no panic").expect("the store answers") {
                admitted += 1;
            }
        }
        assert_eq!(admitted, TASKS, "a full bucket admits every task");
    });
}

/// A key checked every 5 s takes the one unit each check needs and holds none between them:
/// quiet keys strand nothing.
#[test]
fn a_quiet_key_leases_one_unit_and_holds_none() {
    let server = RedisServer::start().expect("start redis-server");
    let clock =
        tollgate_testing::ManualClock::new(tollgate_core::Timestamp::from_secs(1_800_000_000));
    current_thread().block_on(async {
        let connection = RedisConnection::connect(&server.url())
            .await
            .expect("connect to redis-server");
        let store = RedisStore::builder()
            .prefix(common::unique_prefix())
            .test_clock(clock.clone())
            .build(connection)
            .expect("a valid prefix");
        let gateway = FleetStore::with_clock(store.clone(), clock.clone());
        let rule = RuleId::new("partner-api").expect("valid");
        let key = Key::new("acme");
        let quota = Quota::fixed_window(200, Duration::from_secs(3_600)).expect("valid");
        let item = Item::new(&rule, quota, &key)
            .with_fleet_modes(FleetModes::new().with_counting(Counting::Lease(partner_lease())));
        for checks in 1..=5u64 {
            assert!(gateway.check(&[item]).await.expect("answers").is_allowed());
            gateway.background_done().await;
            assert_eq!(
                gateway.leased(&rule, &key),
                0,
                "nothing held after check {checks}"
            );
            let left = store
                .peek(&Item::new(&rule, quota, &key).with_cost(0))
                .await
                .expect("peeks")
                .remaining();
            assert_eq!(left, 200 - checks, "one unit taken per check");
            clock.advance(Duration::from_secs(5));
        }
    });
}

/// While the server is stopped (SIGSTOP), a leased key spends what it holds, then its check
/// fails as an exact rule's would (the rule's failure policy decides, in the layer or a
/// `FallbackStore`) after the connection's timeout, with one call on its way at a time; once the
/// server runs again (SIGCONT) the key leases again.
#[test]
fn while_the_store_is_stopped_a_lease_spends_what_it_holds_then_fails_as_planned() {
    let server = RedisServer::start().expect("start redis-server");
    fleet_flood::runtime().block_on(async {
        let settings = tollgate_redis::ConnectionSettings {
            response_timeout: Duration::from_millis(100),
            ..tollgate_redis::ConnectionSettings::default()
        };
        let connection = RedisConnection::connect_with(&server.url(), settings)
            .await
            .expect("connect to redis-server");
        let store = RedisStore::builder()
            .prefix(common::unique_prefix())
            .build(connection)
            .expect("a valid prefix");
        let gateway = FleetStore::new(store);
        let rule = RuleId::new("partner-api").expect("valid");
        let key = Key::new("acme");
        let quota = Quota::token_bucket(200, Rate::per_hour(200)).expect("valid");
        let item = Item::new(&rule, quota, &key)
            .with_fleet_modes(FleetModes::new().with_counting(Counting::Lease(partner_lease())));
        // A busy key: its lease grows with its demand, and a top-up is asked for at half.
        for _ in 0..30 {
            assert!(gateway.check(&[item]).await.expect("answers").is_allowed());
        }
        gateway.background_done().await;
        let held = gateway.leased(&rule, &key);
        assert!(held > 0, "a busy key holds units");

        server.pause().expect("SIGSTOP the server");
        for spent in 0..held {
            let answer = gateway.check_now(&[item]).expect("decided from the lease");
            assert!(
                answer.expect("answers").is_allowed(),
                "unit {spent} of {held} held"
            );
        }
        // A top-up asked for at half a lease fails after the connection's timeout.
        gateway.background_done().await;
        let calls = gateway.stats().store_calls;
        let failed = gateway.check(&[item]).await;
        assert!(
            failed.is_err(),
            "nothing held and the store silent: {failed:?}"
        );
        assert_eq!(
            gateway.stats().store_calls,
            calls + 1,
            "one call, then the error"
        );

        server.resume().expect("SIGCONT the server");
        assert!(
            gateway
                .check(&[item])
                .await
                .expect("answers again")
                .is_allowed()
        );
    });
}

/// 50 tasks check a cold synced key at once while the store cannot answer yet: one push is on
/// its way (the key's first sync) and the others wait for it, not one push per task.
#[test]
fn a_cold_synced_key_is_pushed_once_not_once_per_task() {
    let server = RedisServer::start().expect("start redis-server");
    current_thread().block_on(async {
        let gateway = fleet_flood::gateways(&server, 1, "cold").await.remove(0);
        let rule = RuleId::new("partner-api").expect("valid");
        let quota = Quota::token_bucket(200, Rate::per_second(200)).expect("valid");
        let sync = Counting::Sync(tollgate_core::SyncSettings::new());
        server.pause().expect("SIGSTOP the server");
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let (gateway, rule) = (gateway.clone(), rule.clone());
                tokio::spawn(async move {
                    let key = Key::new("acme");
                    let item = Item::new(&rule, quota, &key)
                        .with_fleet_modes(FleetModes::new().with_counting(sync));
                    gateway
                        .check(&[item])
                        .await
                        .map(|answer| answer.is_allowed())
                })
            })
            .collect();
        for _ in 0..4 * TASKS {
            tokio::task::yield_now().await;
        }
        assert_eq!(gateway.stats().store_calls, 1, "one first sync on its way");
        server.resume().expect("SIGCONT the server");
        let mut admitted = 0;
        for task in tasks {
            admitted += u64::from(task.await.expect("no panic").expect("the store answers"));
        }
        // After the first sync, while the gateway learns the fleet (its first two
        // intervals), it pushes each unit it admits (M = 1): never more.
        let calls = gateway.stats().store_calls;
        assert!(
            calls <= 1 + admitted,
            "one first sync, then at most a push per unit admitted: {calls} calls, \
                 {admitted} admitted"
        );
    });
}

/// A check that stops waiting (its client gone) while it is the one making a key's call: for a
/// lease, the checks waiting on that call ask again rather than fail; for sync, the key is not
/// left marked as being pushed (it would never be pushed again, and refuse for ever).
#[test]
fn a_caller_that_stops_waiting_mid_call_leaves_nothing_stuck() {
    let server = RedisServer::start().expect("start redis-server");
    current_thread().block_on(async {
        let gateway = fleet_flood::gateways(&server, 1, "gone").await.remove(0);
        let quota = Quota::token_bucket(200, Rate::per_second(200)).expect("valid");
        let modes = [
            ("leased", Counting::Lease(partner_lease())),
            ("synced", Counting::Sync(tollgate_core::SyncSettings::new())),
        ];
        for (name, counting) in modes {
            let rule = RuleId::new(name).expect("valid");
            let check = |gateway: FleetStore<RedisStore>, rule: RuleId| async move {
                let key = Key::new("acme");
                let item = Item::new(&rule, quota, &key)
                    .with_fleet_modes(FleetModes::new().with_counting(counting));
                gateway
                    .check(&[item])
                    .await
                    .map(|answer| answer.is_allowed())
            };
            server.pause().expect("SIGSTOP the server");
            let caller = tokio::spawn(check(gateway.clone(), rule.clone()));
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            let waiters: Vec<_> = (0..5)
                .map(|_| tokio::spawn(check(gateway.clone(), rule.clone())))
                .collect();
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            caller.abort();
            let _ = caller.await;
            server.resume().expect("SIGCONT the server");
            for waiter in waiters {
                let answer = waiter.await.expect("no panic");
                assert_eq!(
                    answer.ok(),
                    Some(true),
                    "{name}: a waiter is decided, allowed"
                );
            }
            assert_eq!(
                check(gateway.clone(), rule.clone()).await.ok(),
                Some(true),
                "{name}: the key is checked as usual afterwards"
            );
        }
    });
}
