//! A cluster master killed under load (on a cluster of this binary's own): the replica is
//! promoted, checks keep answering (what the dead master cannot answer, open rules allow),
//! nothing panics, and afterwards every slot is counted in Redis again.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate_core::{Item, Key, Quota, RuleId, Store};
use tollgate_redis::{ConnectionSettings, RedisStore};
use tollgate_redis_harness::RedisCluster;
use tollgate_wrappers::FallbackStore;

const TIMEOUT: Duration = Duration::from_millis(100);
const TASKS: u64 = 8;
/// Enough keys that every master serves some.
const KEYS: u64 = 64;

fn quota() -> Quota {
    Quota::fixed_window(1 << 40, Duration::from_secs(86_400)).expect("valid")
}

#[test]
fn checks_continue_through_a_master_failover_without_panics() {
    let cluster = RedisCluster::start().expect("start a cluster of this test's own");
    let nodes = cluster.urls();
    common::block_on(async {
        let settings = ConnectionSettings {
            connect_timeout: Duration::from_millis(300),
            response_timeout: Duration::from_millis(300),
        };
        let redis = RedisStore::builder()
            .prefix(common::unique_prefix())
            .settings(settings)
            .connect_cluster(&nodes)
            .await
            .expect("connect");
        let store = Arc::new(
            FallbackStore::builder(redis.clone())
                .timeout(TIMEOUT)
                .failure_threshold(5)
                .cool_down(Duration::from_millis(200))
                .build(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
                tokio::spawn(async move {
                    let rule = RuleId::new("failover").expect("id");
                    let mut allowed = 0u64;
                    let mut n = task;
                    while !stop.load(Ordering::Relaxed) {
                        let key = Key::new(format!("k{}", n % KEYS));
                        n += TASKS;
                        let answer = store.check_one(&Item::new(&rule, quota(), &key)).await;
                        allowed +=
                            u64::from(answer.expect("open rules answer").decision().is_allowed());
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    allowed
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;

        // The dead master's replica is held back (paused) until checks have been answered
        // without it, so those answers came while no node served its slots: checks are not
        // left waiting for the promotion.
        let heir = cluster.replicas().expect("replicas")[0];
        heir.pause().expect("pause the replica");
        let killed = cluster.kill_master(0).expect("kill a master");
        let before = store.stats().fallback_checks;
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.stats().fallback_checks < before + 2 * TASKS {
            assert!(
                Instant::now() < deadline,
                "checks stopped answering while the master was dead: {:?}",
                store.stats()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        heir.resume().expect("resume the replica");
        let cluster_ref = &cluster;
        tokio::task::block_in_place(|| cluster_ref.wait_until_ok(Duration::from_secs(30)))
            .expect("the replica is promoted");
        assert!(!killed.is_running());

        // Every slot answers from Redis again, directly (no fallback), within a few seconds.
        let rule = RuleId::new("after-failover").expect("id");
        let deadline = Instant::now() + Duration::from_secs(10);
        for k in 0..KEYS {
            let key = Key::new(format!("k{k}"));
            loop {
                match redis.check_one(&Item::new(&rule, quota(), &key)).await {
                    Ok(answer) => {
                        assert!(answer.decision().is_allowed());
                        break;
                    }
                    Err(error) => {
                        assert!(Instant::now() < deadline, "k{k} still failing: {error}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }

        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            assert!(task.await.expect("no check panicked") > 0);
        }
        let stats = store.stats();
        assert!(
            stats.primary_failures >= 1,
            "the failover was noticed: {stats:?}"
        );
    });
}

/// A store on the cluster at `nodes`, and a `FallbackStore` around it (timeout 100 ms, a
/// breaker opening after 5 failures for 200 ms).
async fn fallback_over(nodes: &[String]) -> (RedisStore, Arc<FallbackStore<RedisStore>>) {
    let redis = RedisStore::builder()
        .prefix(common::unique_prefix())
        .connect_cluster(nodes)
        .await
        .expect("connect");
    let store = FallbackStore::builder(redis.clone())
        .timeout(TIMEOUT)
        .failure_threshold(5)
        .cool_down(Duration::from_millis(200))
        .build();
    (redis, Arc::new(store))
}

/// An item of `rule` for `key` that fails closed.
fn closed<'a>(rule: &'a RuleId, key: &'a Key) -> Item<'a> {
    Item::new(rule, quota(), key).with_store_failure(tollgate_core::OnStoreFailure::Closed)
}

/// The shape: a `FallbackStore` around one cluster store (timeout 100 ms, rules failing
/// closed), tasks checking 200 keys spread over every slot, a master killed with SIGKILL. The
/// breaker is per master: checks whose keys live on the two healthy masters never fail, those on
/// the dead master's slots are answered by their policy (an error, never a protocol error) and
/// succeed again on the same store once the replica is promoted.
#[test]
fn a_dead_master_fails_only_its_own_keys() {
    let cluster = RedisCluster::start().expect("start a cluster of this test's own");
    let nodes = cluster.urls();
    common::block_on(async {
        let (redis, store) = fallback_over(&nodes).await;
        let rule = RuleId::new("failover").expect("id");
        let keys: Vec<Key> = (0..200).map(|k| Key::new(format!("k{k}"))).collect();
        // The slot map is read in the background: wait until every key has its master.
        let deadline = Instant::now() + Duration::from_secs(10);
        while keys.iter().any(|key| {
            redis
                .connection()
                .node_serving(redis.slot(&rule, key))
                .is_none()
        }) {
            assert!(Instant::now() < deadline, "the slot map was never read");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Which keys the killed master serves, by the cluster's own slot ownership.
        let doomed = cluster.masters().expect("masters")[0].port();
        let on_doomed = |key: &Key| {
            cluster
                .master_of(redis.slot(&rule, key))
                .is_ok_and(|master| master.port() == doomed)
        };
        let (healthy, dying): (Vec<Key>, Vec<Key>) =
            keys.iter().cloned().partition(|k| !on_doomed(k));
        assert!(
            !dying.is_empty() && !healthy.is_empty(),
            "keys on every master"
        );

        let stop = Arc::new(AtomicBool::new(false));
        let healthy = Arc::new(healthy);
        let tasks: Vec<_> = (0..4)
            .map(|task| {
                let (store, stop, healthy) =
                    (Arc::clone(&store), Arc::clone(&stop), Arc::clone(&healthy));
                let rule = rule.clone();
                tokio::spawn(async move {
                    let (mut checks, mut errors) = (0u64, Vec::new());
                    let mut n = task;
                    while !stop.load(Ordering::Relaxed) {
                        let key = &healthy[n % healthy.len()];
                        n += 4;
                        let item = Item::new(&rule, quota(), key)
                            .with_store_failure(tollgate_core::OnStoreFailure::Closed);
                        checks += 1;
                        if let Err(error) = store.check_one(&item).await {
                            errors.push(error.to_string());
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    (checks, errors)
                })
            })
            .collect();
        // The dead master's keys, checked meanwhile by as many tasks, without pause: answered by
        // their policy, never a protocol error — and enough failures in a row to open a breaker.
        let dying_checkers: Vec<_> = (0..4)
            .map(|task| {
                let (store, stop, rule) = (Arc::clone(&store), Arc::clone(&stop), rule.clone());
                let dying = dying.clone();
                tokio::spawn(async move {
                    let mut kinds = Vec::new();
                    let mut n = task;
                    while !stop.load(Ordering::Relaxed) {
                        let item = closed(&rule, &dying[n % dying.len()]);
                        n += 4;
                        if let Err(error) = store.check_one(&item).await {
                            kinds.push(error.kind());
                        }
                        tokio::task::yield_now().await;
                    }
                    kinds
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        cluster.kill_master(0).expect("kill a master");
        // Its breaker opens, and the store names it.
        let deadline = Instant::now() + Duration::from_secs(5);
        while store.failing_nodes().is_empty() {
            assert!(
                Instant::now() < deadline,
                "the dead master's breaker never opened"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let failing = store.failing_nodes();
        assert!(
            failing.len() == 1 && failing[0].ends_with(&format!(":{doomed}")),
            "the failing node is the dead master (port {doomed}): {failing:?}"
        );
        // The dead master's keys answer again on the same store once its replica took over.
        let deadline = Instant::now() + Duration::from_secs(30);
        for key in &dying {
            while store.check_one(&closed(&rule, key)).await.is_err() {
                assert!(Instant::now() < deadline, "{key:?} never answered again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let mut total = 0;
        for task in tasks {
            let (checks, errors) = task.await.expect("no panic");
            total += checks;
            assert!(
                errors.is_empty(),
                "{} of {checks} checks of a healthy master's keys failed, first: {:?}",
                errors.len(),
                errors.first()
            );
        }
        assert!(
            total > 100,
            "the healthy keys were checked throughout: {total}"
        );
        let mut kinds = Vec::new();
        for checker in dying_checkers {
            kinds.extend(checker.await.expect("no panic"));
        }
        assert!(
            kinds
                .iter()
                .all(|kind| *kind != tollgate_core::StoreErrorKind::Protocol),
            "a failover is never a protocol error: {kinds:?}"
        );
        assert!(
            !store.failing_nodes().is_empty()
                || store.stats().breaker_opened > 0
                || !kinds.is_empty()
        );
    });
}

/// A manual `CLUSTER FAILOVER` under load (the replica of the key's master takes over, the old
/// master steps down in step): no check fails, and the count stays exact across it.
#[test]
fn a_manual_failover_loses_no_check_and_no_count() {
    let cluster = RedisCluster::start().expect("start a cluster of this test's own");
    let nodes = cluster.urls();
    common::block_on(async {
        let redis = RedisStore::builder()
            .prefix(common::unique_prefix())
            .connect_cluster(&nodes)
            .await
            .expect("connect");
        let rule = RuleId::new("manual").expect("id");
        let key = Key::new("hot");
        let limited = Quota::fixed_window(100, Duration::from_secs(3_600)).expect("valid");
        let slot = redis.slot(&rule, &key);
        let master = cluster.master_of(slot).expect("a master").port();
        let masters = cluster.masters().expect("masters");
        let index = masters
            .iter()
            .position(|node| node.port() == master)
            .expect("listed");
        let replica = cluster.replicas().expect("replicas")[index];
        let stop = Arc::new(AtomicBool::new(false));
        // Set once the replica serves the slot; refusals of checks sent after that are counted.
        let switched = Arc::new(AtomicBool::new(false));
        let refused_after = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let (redis, stop, rule, key) =
                    (redis.clone(), Arc::clone(&stop), rule.clone(), key.clone());
                let (switched, refused_after) = (Arc::clone(&switched), Arc::clone(&refused_after));
                tokio::spawn(async move {
                    let (mut allowed, mut errors) = (0u64, Vec::new());
                    while !stop.load(Ordering::Relaxed) {
                        let after = switched.load(Ordering::SeqCst);
                        match redis.check_one(&Item::new(&rule, limited, &key)).await {
                            Ok(answer) if answer.decision().is_allowed() => allowed += 1,
                            Ok(_) => {
                                _ = refused_after.fetch_add(u64::from(after), Ordering::SeqCst)
                            }
                            Err(error) => errors.push(error.to_string()),
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    (allowed, errors)
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        replica
            .cli(&["CLUSTER", "FAILOVER"])
            .expect("CLUSTER FAILOVER on the replica");
        let deadline = Instant::now() + Duration::from_secs(20);
        while cluster
            .master_of(slot)
            .map_or(true, |now| now.port() != replica.port())
        {
            assert!(Instant::now() < deadline, "the replica never took over");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Checks go on after the switch, past the limit: until the new master refuses one.
        switched.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(20);
        while refused_after.load(Ordering::SeqCst) == 0 {
            assert!(
                Instant::now() < deadline,
                "no check sent after the switch was refused"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.store(true, Ordering::Relaxed);
        let mut allowed = 0;
        for task in tasks {
            let (admitted, errors) = task.await.expect("no panic");
            assert!(
                errors.is_empty(),
                "a check failed across the failover: {errors:?}"
            );
            allowed += admitted;
        }
        assert_eq!(allowed, 100, "exactly the limit, across the failover");
    });
}

/// Ten masters killed one after another under load (each brought back as a replica before the
/// next): every error a check meets is a timeout or `Unavailable` — never a protocol error — and
/// after each failover every key answers again on the same store.
#[test]
fn ten_kills_in_a_row_never_surface_a_protocol_error() {
    let cluster = RedisCluster::start().expect("start a cluster of this test's own");
    let nodes = cluster.urls();
    common::block_on(async {
        let (_, store) = fallback_over(&nodes).await;
        let rule = RuleId::new("kills").expect("id");
        let keys: Arc<Vec<Key>> = Arc::new((0..KEYS).map(|k| Key::new(format!("k{k}"))).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..4)
            .map(|task| {
                let (store, stop, rule, keys) = (
                    Arc::clone(&store),
                    Arc::clone(&stop),
                    rule.clone(),
                    Arc::clone(&keys),
                );
                tokio::spawn(async move {
                    let mut kinds = Vec::new();
                    let mut n = task;
                    while !stop.load(Ordering::Relaxed) {
                        let item = closed(&rule, &keys[n % keys.len()]);
                        n += 4;
                        if let Err(error) = store.check_one(&item).await {
                            kinds.push(error.kind());
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    kinds
                })
            })
            .collect();
        for round in 0..10 {
            let killed = cluster.kill_master(round % 3).expect("kill a master");
            let cluster_ref = &cluster;
            tokio::task::block_in_place(|| cluster_ref.wait_until_ok(Duration::from_secs(30)))
                .expect("the replica is promoted");
            killed.restart().expect("the killed node comes back");
            tokio::task::block_in_place(|| cluster_ref.wait_until_ok(Duration::from_secs(30)))
                .expect("it rejoins as a replica");
            let deadline = Instant::now() + Duration::from_secs(10);
            for key in keys.iter() {
                while store.check_one(&closed(&rule, key)).await.is_err() {
                    assert!(
                        Instant::now() < deadline,
                        "round {round}: {key:?} never answered"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            let kinds = task.await.expect("no panic");
            assert!(
                kinds
                    .iter()
                    .all(|kind| *kind != tollgate_core::StoreErrorKind::Protocol),
                "a failover surfaced as a protocol error: {kinds:?}"
            );
        }
    });
}
