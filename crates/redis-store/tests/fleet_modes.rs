//! Leases and local-then-sync over real Redis: 10 gateways (store instances, each with its own
//! connection) × 50 tasks on one hot key, time from one manual clock (the Redis store's test
//! time source), so every run sees the same timeline. Each mode's admitted count is measured
//! against the exact limiter's worst case in every interval, next to the bound it states.

mod common;

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{
    Counting, FleetModes, Item, Key, LeaseSettings, Quota, Rate, RuleId, Store, SyncSettings,
};
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_testing::ManualClock;
use tollgate_wrappers::FleetStore;

const GATEWAYS: usize = 10;
const TASKS: usize = 50;
/// The hot key's quota: a bucket of 100, refilled 100 a second.
const CAPACITY: u64 = 100;
const RATE: u64 = 100;
/// The timeline: 150 steps of 10 ms.
const STEPS: u64 = 150;
const STEP: Duration = Duration::from_millis(10);

type Gateway = FleetStore<RedisStore, ManualClock>;

/// `GATEWAYS` gateways sharing one prefix (so one key), each its own store and connection.
fn gateways(clock: &ManualClock, connect: impl Fn() -> RedisConnection) -> Vec<Gateway> {
    let prefix = common::unique_prefix();
    (0..GATEWAYS)
        .map(|_| {
            let store = RedisStore::builder()
                .prefix(prefix.clone())
                .test_clock(clock.clone())
                .build(connect())
                .expect("a valid prefix");
            FleetStore::with_clock(store, clock.clone())
        })
        .collect()
}

fn standalone_connection() -> RedisConnection {
    let url = common::server().url();
    std::thread::spawn(move || common::block_on(RedisConnection::connect(&url)))
        .join()
        .expect("connecting does not panic")
        .expect("connect to redis-server")
}

fn cluster_connection() -> RedisConnection {
    let nodes = common::cluster().urls();
    std::thread::spawn(move || common::block_on(RedisConnection::connect_cluster(&nodes)))
        .join()
        .expect("connecting does not panic")
        .expect("connect to the cluster")
}

fn quota() -> Quota {
    Quota::token_bucket(CAPACITY, Rate::per_second(RATE)).expect("valid quota")
}

/// What one run measured.
#[derive(Debug)]
struct Measured {
    /// Admitted checks per step.
    admitted: Vec<u64>,
    /// The most units other gateways held at any refusal.
    held_by_others_at_refusal: u64,
    /// Checks made.
    checks: u64,
}

impl Measured {
    fn total(&self) -> u64 {
        self.admitted.iter().sum()
    }

    /// The most admitted beyond the exact limiter's worst case (B + R·t) in any interval of
    /// whole steps: the over-admission.
    fn over_admission(&self) -> i64 {
        let per_step = RATE * u64::try_from(STEP.as_millis()).unwrap_or(0) / 1_000;
        let mut worst = i64::MIN;
        for start in 0..self.admitted.len() {
            let mut admitted = 0;
            for (steps, count) in self.admitted[start..].iter().enumerate() {
                admitted += count;
                let exact = CAPACITY + per_step * steps as u64;
                worst = worst.max(admitted as i64 - exact as i64);
            }
        }
        worst
    }

    /// What the exact limiter admits from a full bucket under this flood over the run, less
    /// what was admitted (negative: admitted more).
    fn under_admission(&self) -> i64 {
        let per_step = RATE * u64::try_from(STEP.as_millis()).unwrap_or(0) / 1_000;
        let exact = CAPACITY + per_step * (STEPS - 1);
        exact as i64 - self.total() as i64
    }
}

/// Floods the hot key: at every step each gateway's 50 tasks check once, concurrently; then each
/// gateway ticks and the clock moves one step.
async fn flood(gateways: &[Gateway], clock: &ManualClock, counting: Counting) -> Measured {
    let gateways: Arc<Vec<Gateway>> = Arc::new(gateways.to_vec());
    let rule = RuleId::new("partner").expect("valid rule");
    let key = Key::new("acme");
    let mut measured = Measured {
        admitted: Vec::new(),
        held_by_others_at_refusal: 0,
        checks: 0,
    };
    for _ in 0..STEPS {
        let mut tasks = Vec::new();
        for gateway in 0..GATEWAYS {
            for _ in 0..TASKS {
                let gateways = Arc::clone(&gateways);
                let (rule, key) = (rule.clone(), key.clone());
                tasks.push(tokio::spawn(async move {
                    let item = Item::new(&rule, quota(), &key)
                        .with_fleet_modes(FleetModes::new().with_counting(counting));
                    let answer = gateways[gateway]
                        .check(&[item])
                        .await
                        .expect("the store answers");
                    if answer.is_allowed() {
                        return (true, 0);
                    }
                    let others: u64 = (0..GATEWAYS)
                        .filter(|other| *other != gateway)
                        .map(|other| gateways[other].leased(&rule, &key))
                        .sum();
                    (false, others)
                }));
            }
        }
        let mut admitted = 0;
        for task in tasks {
            let (allowed, others) = task.await.expect("a check task does not panic");
            admitted += u64::from(allowed);
            measured.checks += 1;
            measured.held_by_others_at_refusal = measured.held_by_others_at_refusal.max(others);
        }
        measured.admitted.push(admitted);
        for gateway in gateways.iter() {
            gateway.tick().await;
        }
        clock.advance(STEP);
    }
    for gateway in gateways.iter() {
        gateway.give_back().await;
    }
    measured
}

fn lease_settings() -> LeaseSettings {
    LeaseSettings::new()
        .max_units(10)
        .top_up_every(Duration::from_millis(100))
        .lifetime(Duration::from_millis(500))
}

fn report(mode: &str, measured: &Measured, over_bound: u64, under_bound: u64) {
    eprintln!(
        "{mode}: {} checks, {} admitted; over-admission {} (bound {over_bound}); \
         under-admission over the run {} (at a refusal, bound {under_bound}: most held elsewhere {})",
        measured.checks,
        measured.total(),
        measured.over_admission(),
        measured.under_admission(),
        measured.held_by_others_at_refusal,
    );
}

fn leases_keep_their_bounds(connect: fn() -> RedisConnection) {
    common::block_on(async {
        let clock = ManualClock::new(tollgate_testing::conformance::START);
        let gateways = gateways(&clock, connect);
        let settings = lease_settings();
        let measured = flood(&gateways, &clock, Counting::Lease(settings)).await;
        let held = settings.held_at_most();
        let rate_times_lifetime = RATE * 500 / 1_000;
        let over_bound = rate_times_lifetime.min(GATEWAYS as u64 * held);
        let under_bound = (GATEWAYS as u64 - 1) * held;
        report("lease", &measured, over_bound, under_bound);
        assert!(
            measured.over_admission() <= over_bound as i64,
            "leases admitted {} over the exact limiter in some interval; the bound is {over_bound}",
            measured.over_admission()
        );
        assert!(
            measured.held_by_others_at_refusal <= under_bound,
            "a refusal left {} units held by other gateways; the bound is {under_bound}",
            measured.held_by_others_at_refusal
        );
        assert!(measured.total() > 0, "the flood got something through");
    });
}

#[test]
fn leases_over_redis_admit_within_their_bounds() {
    leases_keep_their_bounds(standalone_connection);
}

#[test]
fn leases_over_the_cluster_admit_within_their_bounds() {
    leases_keep_their_bounds(cluster_connection);
}

#[test]
fn local_then_sync_over_redis_admits_within_g_times_m() {
    common::block_on(async {
        let clock = ManualClock::new(tollgate_testing::conformance::START);
        let gateways = gateways(&clock, standalone_connection);
        let settings = SyncSettings::new()
            .every(Duration::from_millis(50))
            .max_unsynced(10);
        let measured = flood(&gateways, &clock, Counting::Sync(settings)).await;
        let bound = GATEWAYS as u64
            * settings
                .unsynced_at_most(&quota(), Some(GATEWAYS as u64))
                .unwrap_or(1);
        report("sync", &measured, bound, 0);
        assert!(
            measured.over_admission() <= bound as i64,
            "sync admitted {} over the exact limiter in some interval; the bound is {bound}",
            measured.over_admission()
        );
        assert!(measured.total() > 0, "the flood got something through");
        let unsynced: u64 = gateways.iter().map(|g| g.stats().unsynced_units).sum();
        assert_eq!(unsynced, 0, "settling pushed every unit");
    });
}

/// A gateway that goes quiet gives its lease back: the shared count shows the units again.
#[test]
fn a_quiet_gateway_gives_its_lease_back() {
    common::block_on(async {
        let clock = ManualClock::new(tollgate_testing::conformance::START);
        let gateway = gateways(&clock, standalone_connection).remove(0);
        let (rule, key) = (RuleId::new("partner").expect("valid"), Key::new("quiet"));
        let item = Item::new(&rule, quota(), &key)
            .with_fleet_modes(FleetModes::new().with_counting(Counting::Lease(lease_settings())));
        for _ in 0..30 {
            assert!(gateway.check(&[item]).await.expect("answers").is_allowed());
        }
        // Let the background top-ups land, then read what is held and what the store shows.
        gateway.background_done().await;
        let exact = Item::new(&rule, quota(), &key).with_cost(0);
        let shown = gateway
            .shared()
            .peek(&exact)
            .await
            .expect("peeks")
            .remaining();
        let held = gateway.leased(&rule, &key);
        assert_eq!(
            shown,
            CAPACITY - 30 - held,
            "the store counts the lease as taken"
        );
        clock.advance(Duration::from_millis(200)); // two top-up periods of quiet
        gateway.tick().await;
        assert_eq!(gateway.leased(&rule, &key), 0);
        let back = gateway
            .shared()
            .peek(&exact)
            .await
            .expect("peeks")
            .remaining();
        assert!(
            back >= CAPACITY - 30,
            "the {held} unspent units are back (the store shows {back} of {CAPACITY} remaining)"
        );
    });
}

/// A gateway killed mid-lease (dropped without settling) strands at most H units, and only
/// until the bucket refills them.
#[test]
fn a_gateway_killed_mid_lease_strands_at_most_h_units() {
    common::block_on(async {
        let clock = ManualClock::new(tollgate_testing::conformance::START);
        let mut gateways = gateways(&clock, standalone_connection);
        let (rule, key) = (RuleId::new("partner").expect("valid"), Key::new("killed"));
        let settings = lease_settings();
        let item = Item::new(&rule, quota(), &key)
            .with_fleet_modes(FleetModes::new().with_counting(Counting::Lease(settings)));
        let doomed = gateways.remove(0);
        for _ in 0..25 {
            assert!(doomed.check(&[item]).await.expect("answers").is_allowed());
        }
        doomed.background_done().await;
        let survivor = gateways.remove(0);
        drop(doomed);
        let exact = Item::new(&rule, quota(), &key).with_cost(0);
        let shown = survivor
            .shared()
            .peek(&exact)
            .await
            .expect("peeks")
            .remaining();
        let stranded = CAPACITY - 25 - shown;
        assert!(
            stranded <= settings.held_at_most(),
            "{stranded} units stranded; H is {}",
            settings.held_at_most()
        );
        clock.advance(quota().replenish_time());
        let refilled = survivor
            .shared()
            .peek(&exact)
            .await
            .expect("peeks")
            .remaining();
        assert_eq!(
            refilled, CAPACITY,
            "the stranded units come back with the refill"
        );
    });
}

/// While Redis hangs, a synced rule's spend stays unsynced (never dropped) and each rule follows
/// its failure policy: a fail-closed rule answers an error (the layer's 503), a fail-open one
/// goes on deciding here. Once Redis answers again, every unit is pushed.
#[test]
fn while_redis_is_down_synced_spend_waits_and_each_rule_fails_as_planned() {
    let server = tollgate_redis_harness::RedisServer::start().expect("start redis-server");
    common::block_on(async {
        let clock = ManualClock::new(tollgate_testing::conformance::START);
        let settings = tollgate_redis::ConnectionSettings {
            response_timeout: Duration::from_millis(100),
            ..tollgate_redis::ConnectionSettings::default()
        };
        let connection = RedisConnection::connect_with(&server.url(), settings)
            .await
            .expect("connect to redis-server");
        let store = RedisStore::builder()
            .prefix(common::unique_prefix())
            .test_clock(clock.clone())
            .build(connection)
            .expect("a valid prefix");
        let gateway = FleetStore::with_clock(store, clock.clone());
        let sync = Counting::Sync(SyncSettings::new().every(Duration::from_millis(50)));
        let (open_rule, closed_rule) = (
            RuleId::new("reads").expect("valid"),
            RuleId::new("logins").expect("valid"),
        );
        let key = Key::new("acme");
        // Slow to refill, so the shared count shows every unit spent in this test.
        let hourly = Quota::token_bucket(CAPACITY, Rate::per_hour(CAPACITY)).expect("valid");
        let open = Item::new(&open_rule, hourly, &key)
            .with_fleet_modes(FleetModes::new().with_counting(sync));
        let closed = Item::new(&closed_rule, hourly, &key)
            .with_fleet_modes(FleetModes::new().with_counting(sync))
            .with_store_failure(tollgate_core::OnStoreFailure::Closed);
        for item in [open, closed] {
            assert!(gateway.check(&[item]).await.expect("answers").is_allowed());
        }
        gateway.give_back().await;

        server.pause().expect("SIGSTOP redis-server");
        clock.advance(Duration::from_millis(60));
        gateway.tick().await; // both keys are due; the push times out
        assert!(gateway.stats().failed_pushes >= 1);
        for _ in 0..5 {
            assert!(
                gateway
                    .check(&[open])
                    .await
                    .expect("decided here")
                    .is_allowed(),
                "a fail-open rule goes on"
            );
        }
        assert!(
            gateway.check(&[closed]).await.is_err(),
            "a fail-closed rule answers an error while the store is down"
        );
        let never = gateway
            .check(&[open.with_cost(u64::MAX)])
            .await
            .expect("decided here");
        assert_eq!(
            never.items()[0].decision().refusal(),
            Some(tollgate_core::RefusalReason::CostExceedsLimit),
            "a cost that never fits is refused even while failing open"
        );
        let newcomer_key = Key::new("newcomer");
        let newcomer = Item::new(&open_rule, hourly, &newcomer_key)
            .with_fleet_modes(FleetModes::new().with_counting(sync));
        assert!(
            gateway
                .check(&[newcomer])
                .await
                .expect("a fail-open rule answers a new key while the store is down")
                .is_allowed()
        );
        assert_eq!(gateway.stats().unsynced_units, 6, "the spend is kept");

        server.resume().expect("SIGCONT redis-server");
        clock.advance(Duration::from_millis(60));
        // The first push after the outage only asks (the push that failed may still have
        // landed); once the store has answered, the next one carries the spend.
        gateway.tick().await;
        gateway.tick().await;
        assert_eq!(
            gateway.stats().unsynced_units,
            0,
            "every unit pushed once Redis is back"
        );
        let probe = Item::new(&open_rule, hourly, &key).with_cost(0);
        let shown = gateway
            .shared()
            .peek(&probe)
            .await
            .expect("peeks")
            .remaining();
        // A push that timed out may still have reached Redis (a paused server runs the
        // commands that waited once it resumes), and its units are pushed again: the count can
        // come out stricter by what went out during the outage, never looser.
        assert!(
            (CAPACITY - 6 - 5..=CAPACITY - 6).contains(&shown),
            "the first check and the five made while down: {shown} remaining"
        );
        let newcomer_probe = Item::new(&open_rule, hourly, &newcomer_key).with_cost(0);
        let newcomer_shown = gateway
            .shared()
            .peek(&newcomer_probe)
            .await
            .expect("peeks")
            .remaining();
        assert!(
            (CAPACITY - 2..=CAPACITY - 1).contains(&newcomer_shown),
            "the newcomer's check made while down: {newcomer_shown} remaining"
        );
        let mut admitted = 0;
        for _ in 0..200 {
            admitted += u64::from(gateway.check(&[open]).await.expect("answers").is_allowed());
        }
        assert_eq!(admitted, shown, "the rule limits again once Redis is back");
        assert!(
            gateway
                .check(&[closed])
                .await
                .expect("answers")
                .is_allowed()
        );
    });
}

/// Ten syncing gateways learn from the shared store that they are ten: a rule whose limit keeps
/// a tenth within reach (200: M = 2) stays synced; one whose limit cannot (50 < 10 × 10) is
/// counted exactly from then on, says so, and admits exactly its limit.
#[test]
fn gateways_learn_the_fleet_and_a_limit_too_small_for_it_is_counted_exactly() {
    common::block_on(async {
        let clock = ManualClock::new(tollgate_testing::conformance::START);
        let fleet = gateways(&clock, standalone_connection);
        let sync = Counting::Sync(SyncSettings::new().every(Duration::from_millis(100)));
        let (roomy, tight) = (
            RuleId::new("roomy").expect("valid"),
            RuleId::new("tight").expect("valid"),
        );
        let key = Key::new("acme");
        let hourly = |limit| Quota::fixed_window(limit, Duration::from_secs(3_600)).expect("valid");
        let item = |rule, limit| {
            Item::new(rule, hourly(limit), &key)
                .with_fleet_modes(FleetModes::new().with_counting(sync))
        };
        // Three intervals of a check on every gateway, each ticking: every gateway pushes and
        // is counted, and reads the count back.
        for _ in 0..3 {
            for gateway in &fleet {
                for probe in [item(&roomy, 200), item(&tight, 50)] {
                    let _ = gateway.check(&[probe]).await.expect("answers");
                }
            }
            clock.advance(Duration::from_millis(100));
            for gateway in &fleet {
                gateway.tick().await;
            }
        }
        for gateway in &fleet {
            assert_eq!(
                gateway.counted_exactly(),
                vec![(tight.clone(), GATEWAYS as u64)],
                "ten gateways, and only the tight rule counted exactly"
            );
            assert_eq!(gateway.stats().rules_counted_exactly, 1);
        }
        // Counted exactly: the rest of the limit and not one more, across the fleet.
        let mut admitted = 0;
        for _ in 0..10 {
            for gateway in &fleet {
                let answer = gateway.check(&[item(&tight, 50)]).await.expect("answers");
                admitted += u64::from(answer.is_allowed());
            }
        }
        for gateway in &fleet {
            gateway.give_back().await;
        }
        let left = fleet[0]
            .shared()
            .peek(&Item::new(&tight, hourly(50), &key).with_cost(0))
            .await
            .expect("peeks")
            .remaining();
        assert_eq!(
            left, 0,
            "the limit is used up: {admitted} admitted after warming up"
        );
        assert!(admitted <= 50, "never more than the limit: {admitted}");
    });
}

/// The first number after `prefix` on the line of `INFO section` that starts with it (0 when
/// the server has no such line yet).
fn info_number(server: &tollgate_redis_harness::RedisServer, section: &str, prefix: &str) -> u64 {
    let info = server.cli(&["INFO", section]).expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix(prefix))
        .and_then(|rest| rest.split(',').next()?.trim().parse().ok())
        .unwrap_or(0)
}

/// How many scripts `server` declined as late (`TOLLGATE_LATE`: started after their caller
/// stopped waiting).
fn declined_late(server: &tollgate_redis_harness::RedisServer) -> u64 {
    info_number(server, "errorstats", "errorstat_TOLLGATE_LATE:count=")
}

/// How many scripts `server` has run (`EVALSHA` calls).
fn script_calls(server: &tollgate_redis_harness::RedisServer) -> u64 {
    info_number(server, "commandstats", "cmdstat_evalsha:calls=")
}

/// A gateway on a connection of its own to `server`, which waits `response_timeout` for each
/// answer.
async fn gateway_on(
    server: &tollgate_redis_harness::RedisServer,
    response_timeout: Duration,
) -> FleetStore<RedisStore> {
    let settings = tollgate_redis::ConnectionSettings {
        response_timeout,
        ..tollgate_redis::ConnectionSettings::default()
    };
    let connection = RedisConnection::connect_with(&server.url(), settings)
        .await
        .expect("connect to redis-server");
    let store = RedisStore::builder()
        .prefix(common::unique_prefix())
        .build(connection)
        .expect("a valid prefix");
    FleetStore::new(store)
}

/// On the server's clock, a push that timed out while Redis was stalled (SIGSTOP) never lands
/// when the server wakes up: its script starts after the connection stopped waiting and
/// declines. The spend it carried is pushed again once Redis answers, so the shared count comes
/// out exactly what the gateway admitted, not stricter by the lost push.
#[test]
fn a_push_that_timed_out_never_lands_late_so_synced_spend_counts_once() {
    let server = tollgate_redis_harness::RedisServer::start().expect("start redis-server");
    common::block_on(async {
        let gateway = gateway_on(&server, Duration::from_millis(100)).await;
        let sync = Counting::Sync(SyncSettings::new().every(Duration::from_millis(50)));
        let (rule, key) = (RuleId::new("reads").expect("valid"), Key::new("acme"));
        let limit = 100_000;
        let daily = Quota::fixed_window(limit, Duration::from_secs(86_400)).expect("valid");
        let item =
            Item::new(&rule, daily, &key).with_fleet_modes(FleetModes::new().with_counting(sync));
        // Check until the gateway decides here and holds unsynced spend (while it learns the
        // fleet, each check is pushed at once).
        let mut admitted = 0u64;
        loop {
            assert!(gateway.check(&[item]).await.expect("answers").is_allowed());
            admitted += 1;
            assert!(admitted < limit / 2, "the gateway never decided here");
            // No push of this spend still on its way when it is counted.
            gateway.background_done().await;
            if gateway.stats().unsynced_units >= 3 {
                break;
            }
        }

        server.pause().expect("SIGSTOP redis-server");
        gateway.give_back().await; // the push of the unsynced spend times out
        assert!(gateway.stats().failed_pushes >= 1);
        assert!(gateway.stats().unsynced_units >= 3, "the spend is kept");
        server.resume().expect("SIGCONT redis-server");

        // The stalled push runs when the server wakes, and declines.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while declined_late(&server) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the stalled push never ran"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The first push after the outage only asks; the next carries the spend.
        for _ in 0..10 {
            if gateway.stats().unsynced_units == 0 {
                break;
            }
            gateway.give_back().await;
        }
        assert_eq!(gateway.stats().unsynced_units, 0, "the spend is pushed");
        let probe = Item::new(&rule, daily, &key).with_cost(0);
        let left = gateway
            .shared()
            .peek(&probe)
            .await
            .expect("peeks")
            .remaining();
        assert_eq!(
            left,
            limit - admitted,
            "every admitted unit counted once, the lost push not counted"
        );
    });
}

/// A check that must push first (its key's M unsynced units are spent) whose caller stops
/// waiting while Redis is stalled (SIGSTOP): the push was written to the connection, whose
/// deadline is far off, so it lands when Redis wakes. The push runs to its end on the runtime
/// and its answer is applied, so its units are not pushed a second time: the shared count
/// comes out exactly what the gateway admitted. (Before, the dropped check gave the push up and
/// the same units went out again, counted twice; found by the review of issue 25.)
#[test]
fn a_push_whose_caller_stops_waiting_still_lands_once() {
    let server = tollgate_redis_harness::RedisServer::start().expect("start redis-server");
    common::block_on(async {
        let gateway = gateway_on(&server, Duration::from_secs(30)).await;
        let sync = Counting::Sync(
            SyncSettings::new()
                .every(Duration::from_secs(3_600))
                .max_unsynced(5),
        );
        let (rule, key) = (RuleId::new("reads").expect("valid"), Key::new("acme"));
        let limit = 100_000;
        let daily = Quota::fixed_window(limit, Duration::from_secs(86_400)).expect("valid");
        let item =
            Item::new(&rule, daily, &key).with_fleet_modes(FleetModes::new().with_counting(sync));
        let mut admitted = 0u64;
        loop {
            assert!(gateway.check(&[item]).await.expect("answers").is_allowed());
            admitted += 1;
            assert!(admitted < 50, "the gateway never held unsynced spend");
            gateway.background_done().await;
            if gateway.stats().unsynced_units >= 2 {
                break;
            }
        }
        let calls_before = script_calls(&server);

        server.pause().expect("SIGSTOP redis-server");
        // What is unsynced and this cost pass M (5): the check pushes before it decides.
        let waited = tokio::time::timeout(
            Duration::from_millis(100),
            gateway.check(&[item.with_cost(4)]),
        )
        .await;
        assert!(waited.is_err(), "the caller stopped waiting");
        server.resume().expect("SIGCONT redis-server");

        // The stalled push runs, well inside its deadline, and is answered.
        gateway.background_done().await;
        assert!(script_calls(&server) > calls_before, "the push ran");
        assert_eq!(declined_late(&server), 0, "inside its deadline");

        assert!(gateway.check(&[item]).await.expect("answers").is_allowed());
        admitted += 1;
        gateway.background_done().await;
        gateway.give_back().await;
        assert_eq!(gateway.stats().unsynced_units, 0, "the spend is pushed");
        let probe = Item::new(&rule, daily, &key).with_cost(0);
        let left = gateway
            .shared()
            .peek(&probe)
            .await
            .expect("peeks")
            .remaining();
        assert_eq!(limit - left, admitted, "every admitted unit counted once");
    });
}
