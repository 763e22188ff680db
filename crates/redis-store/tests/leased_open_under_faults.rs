//! Leased and synced rules under faults, stacked as a fleet runs them: three gateways, each a
//! `FleetStore` over a `FallbackStore` (50 ms timeout) over a Redis store on a connection of
//! its own, every one checking the same key of one redis-server. Tasks on every gateway check
//! the key before, during and after a fault: the server stalled (SIGSTOP), or killed (SIGKILL)
//! and restarted empty. Each check's outcome is counted by the phase it started and ended in.
//!
//! The fault lasts until every gateway's breaker has opened and one of its probes has failed
//! (state, not time: about the default cool-down of a second), and the run ends once every
//! gateway's breaker has closed again on a store that answers; every wait has a deadline and
//! every task a bounded number of checks.
//!
//! What each rule must do while the store cannot answer, whatever the check was doing (spending
//! its lease, waiting for the key's top-up or push in flight, making it): a rule failing `open`,
//! or `open_within` a local quota the test never reaches, answers no error and admits every
//! check (so does `local`, counted in the fallback's memory); a rule failing `closed` answers
//! an error for every check once the gateway's breaker is open and the store has failed the
//! rule (no lease or local copy left to decide on). Found by issue 40: the checks that waited
//! for a top-up in flight got that call's error instead of the rule's policy, and a leased
//! `open_within` rule was refused for a top-up period after each call its policy answered.
//!
//! And, one check at a time on a manual clock, a leased `open_within` rule while Redis is down
//! spends its local quota one check's cost at a time (not a lease's at a time).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tollgate_core::{
    Counting, FleetModes, Item, Key, LeaseSettings, OnStoreFailure, Quota, RuleId, Store,
    SyncSettings,
};
use tollgate_redis::{ConnectionSettings, RedisStore};
use tollgate_redis_harness::RedisServer;
use tollgate_wrappers::{FallbackStore, FleetStore};

const GATEWAYS: usize = 3;
/// Tasks per gateway and rule: enough that checks find the key's call in flight and wait.
const TASKS: usize = 4;
/// Each task checks once per `PACE` at most, and at most `MAX_CHECKS` times.
const PACE: Duration = Duration::from_millis(2);
const MAX_CHECKS: u64 = 30_000;
/// The fallback's timeout, as in the issue.
const TIMEOUT: Duration = Duration::from_millis(50);
/// How long any awaited state may take, however busy the machine.
const WITHIN: Duration = Duration::from_secs(60);

/// The phases of a run, in order.
const WARM: u8 = 0;
const FAULT: u8 = 1;
const BACK: u8 = 2;
const STOP: u8 = 3;

type Gateway = FleetStore<FallbackStore<RedisStore>>;

/// How the store fails.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGSTOP, then SIGCONT: a hung server, every call times out.
    Stall,
    /// SIGKILL, then a restart with nothing in it: refused connections, then an empty server.
    Kill,
}

/// The rules, by failure policy.
const POLICIES: [&str; 4] = ["open", "open_within", "local", "closed"];

fn policy(name: &str) -> OnStoreFailure {
    match name {
        "open" => OnStoreFailure::Open,
        // A local quota the test never reaches: every check is admitted by it.
        "open_within" => OnStoreFailure::OpenWithin(quota()),
        // Counted in the fallback's memory under the rule's own quota, never reached either.
        "local" => OnStoreFailure::Local,
        _ => OnStoreFailure::Closed,
    }
}

/// A limit the load never reaches, in Redis as in the fallback's memory.
fn quota() -> Quota {
    Quota::fixed_window(1 << 40, Duration::from_secs(86_400)).expect("a valid quota")
}

/// What one rule's checks did, counted by phase.
#[derive(Default)]
struct Tally {
    /// Every check made, and its errors.
    checks: AtomicU64,
    errors: AtomicU64,
    /// Checks made while the store was up, before the fault, and their errors.
    warm_checks: AtomicU64,
    warm_errors: AtomicU64,
    /// Checks that started and ended during the fault, and of them those admitted.
    fault_checks: AtomicU64,
    fault_admitted: AtomicU64,
    /// Checks that started and ended during the fault, once the gateway's breaker was open and
    /// the rule had answered an error on it (the store known down for it), and their errors.
    due_errors: AtomicU64,
    due_errors_answered: AtomicU64,
    /// Checks admitted after the store came back.
    back_admitted: AtomicU64,
    /// The first error's text.
    first_error: Mutex<Option<String>>,
}

/// `GATEWAYS` gateways on one prefix (so one key), each its own connection to `server` with a
/// fallback of [`TIMEOUT`] (other settings the defaults: a breaker that opens after five
/// failures in a row and probes once a second).
async fn gateways(server: &RedisServer) -> Vec<Gateway> {
    let prefix = common::unique_prefix();
    let mut gateways = Vec::new();
    for _ in 0..GATEWAYS {
        let redis = RedisStore::builder()
            .prefix(prefix.clone())
            .settings(ConnectionSettings {
                connect_timeout: Duration::from_millis(200),
                response_timeout: Duration::from_millis(200),
            })
            .connect(&server.url())
            .await
            .expect("connect to redis-server");
        let fallback = FallbackStore::builder(redis).timeout(TIMEOUT).build();
        gateways.push(FleetStore::new(fallback));
    }
    gateways
}

/// Waits until `done` holds, checking every few milliseconds; panics naming `what` after
/// [`WITHIN`].
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WITHIN;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {WITHIN:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One run: the rules counted by `counting` on three gateways, through `fault`. Answers
/// each rule's tally, in [`POLICIES`]' order.
fn run(counting: Counting, fault: Fault) -> Vec<Arc<Tally>> {
    let server = RedisServer::start().expect("start redis-server");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let gateways = gateways(&server).await;
        let tickers: Vec<_> = gateways
            .iter()
            .map(|gateway| gateway.spawn_ticker(Duration::from_millis(50)))
            .collect();
        let phase = Arc::new(AtomicU8::new(WARM));
        let tallies: Vec<Arc<Tally>> = POLICIES.iter().map(|_| Arc::default()).collect();
        // Per gateway and rule: the rule has answered an error there during the fault.
        let down: Arc<Vec<AtomicBool>> = Arc::new(
            (0..GATEWAYS * POLICIES.len())
                .map(|_| AtomicBool::new(false))
                .collect(),
        );
        let mut tasks = Vec::new();
        for (g, gateway) in gateways.iter().enumerate() {
            for (p, name) in POLICIES.iter().enumerate() {
                for _ in 0..TASKS {
                    let (gateway, phase, down) =
                        (gateway.clone(), Arc::clone(&phase), Arc::clone(&down));
                    let tally = Arc::clone(&tallies[p]);
                    let flag = g * POLICIES.len() + p;
                    let policy = policy(name);
                    tasks.push(tokio::spawn(async move {
                        let rule = RuleId::new(&format!("faulty-{}", name.replace('_', "-")))
                            .expect("a valid rule id");
                        let key = Key::new("acme");
                        let item = Item::new(&rule, quota(), &key)
                            .with_fleet_modes(FleetModes::new().with_counting(counting))
                            .with_store_failure(policy);
                        let mut pace = tokio::time::interval(PACE);
                        pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                        for _ in 0..MAX_CHECKS {
                            pace.tick().await;
                            let started = phase.load(Ordering::Acquire);
                            if started == STOP {
                                break;
                            }
                            let breaker_open = gateway.shared().stats().breaker_open;
                            let known_down = down[flag].load(Ordering::Acquire);
                            // As the layer asks: decided now when it can be, else awaited.
                            let answer = match gateway.check_now(&[item]) {
                                Some(answer) => answer,
                                None => gateway.check(&[item]).await,
                            };
                            let ended = phase.load(Ordering::Acquire);
                            tally.record(started, ended, breaker_open && known_down, &answer);
                            if answer.is_err() && started == FAULT && ended == FAULT {
                                down[flag].store(true, Ordering::Release);
                            }
                        }
                    }));
                }
            }
        }

        let warm = |tallies: &[Arc<Tally>]| {
            tallies
                .iter()
                .all(|tally| tally.warm_checks.load(Ordering::Relaxed) >= 100)
        };
        wait_for("every rule checked while the store is up", || {
            warm(&tallies)
        })
        .await;

        match fault {
            Fault::Stall => server.pause().expect("SIGSTOP redis-server"),
            Fault::Kill => server.kill().expect("SIGKILL redis-server"),
        }
        phase.store(FAULT, Ordering::Release);
        wait_for(
            "every gateway's breaker opened and one probe failed",
            || {
                gateways.iter().all(|gateway| {
                    let stats = gateway.shared().stats();
                    stats.breaker_opened >= 1 && stats.failed_probes >= 1
                })
            },
        )
        .await;

        match fault {
            Fault::Stall => server.resume().expect("SIGCONT redis-server"),
            Fault::Kill => server.restart().expect("restart redis-server"),
        }
        phase.store(BACK, Ordering::Release);
        wait_for("every gateway's breaker closed again", || {
            gateways.iter().all(|gateway| {
                let stats = gateway.shared().stats();
                stats.breaker_closed >= 1 && !stats.breaker_open
            })
        })
        .await;
        wait_for("every rule admitted once the store is back", || {
            tallies
                .iter()
                .all(|tally| tally.back_admitted.load(Ordering::Relaxed) >= 10)
        })
        .await;

        phase.store(STOP, Ordering::Release);
        for task in tasks {
            task.await.expect("a checking task does not panic");
        }
        for ticker in tickers {
            ticker.abort();
        }
        for gateway in &gateways {
            eprintln!("{:?}", gateway.shared().stats());
        }
        tallies
    })
}

impl Tally {
    fn record(
        &self,
        started: u8,
        ended: u8,
        store_known_down: bool,
        answer: &Result<tollgate_core::BatchDecision, tollgate_core::StoreError>,
    ) {
        self.checks.fetch_add(1, Ordering::Relaxed);
        let admitted = matches!(answer, Ok(batch) if batch.is_allowed());
        if let Err(error) = answer {
            self.errors.fetch_add(1, Ordering::Relaxed);
            self.first_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert_with(|| error.to_string());
        }
        match (started, ended) {
            (WARM, WARM) => {
                self.warm_checks.fetch_add(1, Ordering::Relaxed);
                if answer.is_err() {
                    self.warm_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            (FAULT, FAULT) => {
                self.fault_checks.fetch_add(1, Ordering::Relaxed);
                if admitted {
                    self.fault_admitted.fetch_add(1, Ordering::Relaxed);
                }
                if store_known_down {
                    self.due_errors.fetch_add(1, Ordering::Relaxed);
                    if answer.is_err() {
                        self.due_errors_answered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            (BACK, BACK) if admitted => {
                self.back_admitted.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    fn summary(&self) -> String {
        format!(
            "{} checks, {} errors (first: {:?}); while up: {} checks, {} errors; during the \
             fault: {} checks, {} admitted, {} due an error, {} answered one",
            self.checks.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
            self.first_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            self.warm_checks.load(Ordering::Relaxed),
            self.warm_errors.load(Ordering::Relaxed),
            self.fault_checks.load(Ordering::Relaxed),
            self.fault_admitted.load(Ordering::Relaxed),
            self.due_errors.load(Ordering::Relaxed),
            self.due_errors_answered.load(Ordering::Relaxed),
        )
    }
}

/// What every run asserts, for each rule.
fn assert_policies_held(mode: &str, fault: Fault, tallies: &[Arc<Tally>]) {
    for (name, tally) in POLICIES.iter().zip(tallies) {
        eprintln!("{mode}, {fault:?}, {name}: {}", tally.summary());
    }
    for (name, tally) in POLICIES.iter().zip(tallies) {
        let summary = tally.summary();
        assert_eq!(
            tally.warm_errors.load(Ordering::Relaxed),
            0,
            "{mode} {name}: no error while the store is up: {summary}"
        );
        let fault_checks = tally.fault_checks.load(Ordering::Relaxed);
        assert!(
            fault_checks > 0,
            "{mode} {name}: checked during the fault: {summary}"
        );
        match *name {
            "open" | "open_within" | "local" => {
                assert_eq!(
                    tally.errors.load(Ordering::Relaxed),
                    0,
                    "{mode} {name}: a rule failing open never answers an error: {summary}"
                );
                assert_eq!(
                    tally.fault_admitted.load(Ordering::Relaxed),
                    fault_checks,
                    "{mode} {name}: its policy admits every check during the fault: {summary}"
                );
            }
            _ => {
                let due = tally.due_errors.load(Ordering::Relaxed);
                assert!(
                    due > 0,
                    "{mode} {name}: checks made once the breaker was open: {summary}"
                );
                assert_eq!(
                    tally.due_errors_answered.load(Ordering::Relaxed),
                    due,
                    "{mode} {name}: a rule failing closed answers an error for every check \
                     once the breaker is open and its store has failed it: {summary}"
                );
            }
        }
    }
}

fn lease() -> Counting {
    Counting::Lease(LeaseSettings::new())
}

fn sync() -> Counting {
    Counting::Sync(SyncSettings::new())
}

#[test]
fn a_leased_rule_follows_its_policy_while_redis_is_stalled() {
    let tallies = run(lease(), Fault::Stall);
    assert_policies_held("leased", Fault::Stall, &tallies);
}

#[test]
fn a_leased_rule_follows_its_policy_while_redis_is_killed_and_restarted_empty() {
    let tallies = run(lease(), Fault::Kill);
    assert_policies_held("leased", Fault::Kill, &tallies);
}

#[test]
fn a_synced_rule_follows_its_policy_while_redis_is_stalled() {
    let tallies = run(sync(), Fault::Stall);
    assert_policies_held("synced", Fault::Stall, &tallies);
}

#[test]
fn a_synced_rule_follows_its_policy_while_redis_is_killed_and_restarted_empty() {
    let tallies = run(sync(), Fault::Kill);
    assert_policies_held("synced", Fault::Kill, &tallies);
}

/// A leased `open_within` rule while Redis is down (killed), one check at a time on a manual
/// clock: the checks that find no lease are answered by the policy, each counted in the local
/// quota at its own cost, so they admit the local quota's limit less at most one lease (the one
/// call made for a lease's worth when the store failed), then the local count refuses — never an
/// error. (Before, each call the policy answered was remembered as the store's refusal for a
/// top-up period, and each asked for a lease's worth of the local quota.)
#[test]
fn a_leased_open_within_rule_spends_its_local_quota_a_check_at_a_time_while_redis_is_down() {
    const LOCAL_LIMIT: u64 = 50;
    const LEASE: u64 = 5;
    let server = RedisServer::start().expect("start redis-server");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let clock = tollgate_testing::ManualClock::new(tollgate_testing::conformance::START);
        let redis = RedisStore::builder()
            .prefix(common::unique_prefix())
            .test_clock(clock.clone())
            .settings(ConnectionSettings {
                connect_timeout: Duration::from_millis(200),
                response_timeout: Duration::from_millis(200),
            })
            .connect(&server.url())
            .await
            .expect("connect to redis-server");
        let fallback = FallbackStore::builder(redis)
            .timeout(TIMEOUT)
            .clock(clock.clone())
            .build();
        let gateway = FleetStore::with_clock(fallback, clock.clone());
        let (rule, key) = (RuleId::new("search").expect("valid"), Key::new("acme"));
        let local = Quota::fixed_window(LOCAL_LIMIT, Duration::from_secs(86_400)).expect("valid");
        let lease = Counting::Lease(LeaseSettings::new().max_units(LEASE));
        let item = Item::new(&rule, quota(), &key)
            .with_fleet_modes(FleetModes::new().with_counting(lease))
            .with_store_failure(OnStoreFailure::OpenWithin(local));
        for _ in 0..20 {
            let answer = gateway.check(&[item]).await.expect("Redis answers");
            assert!(answer.is_allowed());
            clock.advance(Duration::from_millis(10));
        }
        gateway.background_done().await;
        let held = gateway.leased(&rule, &key);

        server.kill().expect("SIGKILL redis-server");
        let (mut admitted, mut refused) = (0, 0);
        for _ in 0..LOCAL_LIMIT * 2 {
            let answer = gateway
                .check(&[item])
                .await
                .expect("a rule failing open within a local quota answers no error");
            if answer.is_allowed() {
                admitted += 1;
            } else {
                refused += 1;
            }
            clock.advance(Duration::from_millis(1));
        }
        gateway.background_done().await;
        let by_policy = admitted - held.min(admitted);
        eprintln!(
            "held {held}, admitted {admitted} (by the policy {by_policy}), refused {refused}"
        );
        assert!(
            (LOCAL_LIMIT - LEASE..=LOCAL_LIMIT).contains(&by_policy),
            "the local quota admits its limit less at most one lease: {by_policy} admitted by \
             the policy ({admitted} in all, {held} from the lease held), {refused} refused"
        );
        assert!(refused > 0, "then the local count refuses");
    });
}
