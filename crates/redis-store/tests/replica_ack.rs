//! A rule that asks for a replica's acknowledgement (`FleetModes::with_replica_ack`): its
//! answer comes once a replica holds the count, so a failover right after it forgets nothing;
//! without a replica to answer, the answer stands unacknowledged and the master is not waited
//! on for a second. Real servers: a master with a replica, a lone server, a cluster.

mod common;

use std::time::{Duration, Instant};

use tollgate_core::{FleetModes, Item, Key, Quota, RuleId, Store};
use tollgate_redis::{RedisStore, ReplicaAckStats};
use tollgate_redis_harness::{RedisCluster, RedisServer};

/// Five logins an hour: a window no test outlives.
fn logins() -> Quota {
    Quota::fixed_window(5, Duration::from_secs(3_600)).expect("valid")
}

fn acknowledged(wait: Duration) -> FleetModes<'static> {
    FleetModes::new().with_replica_ack(wait)
}

/// Makes `replica` a replica of `master` and waits until their link is up.
fn replicate(master: &RedisServer, replica: &RedisServer) {
    let port = master.port().to_string();
    replica
        .cli(&["REPLICAOF", "127.0.0.1", &port])
        .expect("REPLICAOF");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = replica.cli(&["INFO", "replication"]).expect("INFO");
        let linked = master
            .cli(&["INFO", "replication"])
            .expect("INFO")
            .contains("state=online");
        if info.contains("master_link_status:up") && linked {
            // A write the replica acknowledges: the stream flows (a replica just synced can
            // take a while to take its first commands on a busy machine).
            master.cli(&["SET", "replication-probe", "1"]).expect("SET");
            let acknowledged = master.cli(&["WAIT", "1", "30000"]).expect("WAIT");
            assert_eq!(acknowledged.trim(), "1", "the replica acknowledges a write");
            master
                .cli(&["CONFIG", "RESETSTAT"])
                .expect("CONFIG RESETSTAT");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the replica did not link up:\n{info}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many `WAIT` commands `server` has run.
fn waits_run(server: &RedisServer) -> u64 {
    let stats = server
        .cli(&["INFO", "commandstats"])
        .expect("INFO commandstats");
    stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_wait:calls="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// Each acknowledged answer finds its count on the replica already: read there right after.
/// (On a starved machine a replica may lag past the longest wait; such an answer is counted
/// unacknowledged, and only acknowledged answers promise anything.)
#[test]
fn an_acknowledged_count_is_on_the_replica_when_the_answer_comes() {
    let master = RedisServer::start().expect("start redis-server (apt install redis-server)");
    let replica = RedisServer::start().expect("start a second redis-server");
    replicate(&master, &replica);
    common::block_on(async {
        let store = RedisStore::builder()
            .prefix(common::unique_prefix())
            .settings(tollgate_redis::ConnectionSettings {
                response_timeout: Duration::from_secs(5),
                ..tollgate_redis::ConnectionSettings::default()
            })
            .connect(&master.url())
            .await
            .expect("connect");
        let (rule, key) = (RuleId::new("login").expect("id"), Key::new("alice"));
        let item = Item::new(&rule, logins(), &key)
            .with_fleet_modes(acknowledged(tollgate_core::MAX_REPLICA_ACK));
        let stored = store
            .stored_key(&rule, &key, logins().algorithm())
            .expect("a stored key");
        for admitted in 1..=5u64 {
            let before = store.connection().replica_acks().acknowledged;
            let answer = store.check_one(&item).await.expect("answered");
            assert!(answer.decision().is_allowed());
            if store.connection().replica_acks().acknowledged == before {
                continue;
            }
            // Quoted (`--no-raw`): the value is binary, and raw bytes would be read lossily.
            let on_replica = replica
                .cli(&["--no-raw", "GET", &stored])
                .expect("read the replica");
            let on_master = master
                .cli(&["--no-raw", "GET", &stored])
                .expect("read the master");
            assert_eq!(
                on_replica, on_master,
                "admission {admitted}, acknowledged: the replica holds the master's count"
            );
        }
        assert!(
            !store
                .check_one(&item)
                .await
                .expect("answered")
                .decision()
                .is_allowed(),
            "the sixth login is refused"
        );
        let acks = store.connection().replica_acks();
        assert_eq!(acks.acknowledged + acks.unacknowledged, 6, "{acks:?}");
        assert!(
            acks.acknowledged >= 1,
            "a live replica acknowledges: {acks:?}"
        );
        let waits = waits_run(&master);
        assert!(
            (acks.acknowledged..=6).contains(&waits),
            "one WAIT per acknowledged check, on the master: {waits}"
        );
    });
}

/// A lone server has no replica: the acknowledged rule is answered (the wait runs out), counted
/// unacknowledged, and the server is not waited on again for a second; a rule that asks for no
/// acknowledgement on the same connection is never counted either way.
#[test]
fn without_a_replica_the_answer_stands_unacknowledged() {
    let server = RedisServer::start().expect("start redis-server (apt install redis-server)");
    common::block_on(async {
        let store = RedisStore::builder()
            .prefix(common::unique_prefix())
            .connect(&server.url())
            .await
            .expect("connect");
        let (rule, key) = (RuleId::new("login").expect("id"), Key::new("bob"));
        let item = Item::new(&rule, logins(), &key)
            .with_fleet_modes(acknowledged(Duration::from_millis(20)));
        for _ in 0..5 {
            let answer = store
                .check_one(&item)
                .await
                .expect("answered, not an error");
            assert!(answer.decision().is_allowed());
        }
        assert!(!store.check(&[item]).await.expect("answered").is_allowed());
        let plain_rule = RuleId::new("search").expect("id");
        let plain = Item::new(&plain_rule, logins(), &key);
        assert!(
            store
                .check_one(&plain)
                .await
                .expect("answered")
                .decision()
                .is_allowed()
        );
        assert_eq!(
            store.connection().replica_acks(),
            ReplicaAckStats {
                acknowledged: 0,
                unacknowledged: 6
            },
            "every acknowledged check counted, the plain one not"
        );
        // After a wait runs out, the server is not waited on for a second: one WAIT for the
        // six checks on any machine that runs them within that second, fewer than six on
        // any machine at all.
        let waits = waits_run(&server);
        assert!(
            (1..6).contains(&waits),
            "{waits} WAITs: a server that missed is not waited on again at once"
        );
    });
}

/// On a cluster: five logins admitted with acknowledgement, then the master holding the key is
/// killed at once. Once its replica is promoted, the same store refuses the sixth: the count
/// survived the failover.
#[test]
fn a_promoted_replica_holds_what_its_master_admitted() {
    let cluster = RedisCluster::start().expect("start a cluster of this test's own");
    let nodes = cluster.urls();
    common::block_on(async {
        let store = RedisStore::builder()
            .prefix(common::unique_prefix())
            .connect_cluster(&nodes)
            .await
            .expect("connect");
        let (rule, key) = (RuleId::new("login").expect("id"), Key::new("carol"));
        let item =
            Item::new(&rule, logins(), &key).with_fleet_modes(acknowledged(Duration::from_secs(1)));
        for _ in 0..5 {
            let answer = store.check_one(&item).await.expect("answered");
            assert!(answer.decision().is_allowed());
        }
        let master = cluster
            .master_of(store.slot(&rule, &key))
            .expect("the key's master");
        master.kill().expect("SIGKILL the key's master");
        let cluster_ref = &cluster;
        tokio::task::block_in_place(|| cluster_ref.wait_until_ok(Duration::from_secs(30)))
            .expect("the replica is promoted");
        // The same store answers again once its client has learned the new master.
        let deadline = Instant::now() + Duration::from_secs(30);
        let sixth = loop {
            match store.check_one(&item).await {
                Ok(answer) => break answer,
                Err(error) => assert!(
                    Instant::now() < deadline,
                    "the store did not answer after the failover: {error}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // Each acknowledged admission is on the promoted replica (on a starved machine one may
        // go unacknowledged, and only acknowledged ones promise anything).
        let acknowledged = store.connection().replica_acks().acknowledged;
        assert!(acknowledged >= 1, "a live replica acknowledges");
        assert!(
            sixth.decision().remaining() <= 5 - acknowledged,
            "the promoted replica holds the {acknowledged} acknowledged admissions: {:?}",
            sixth.decision()
        );
        if acknowledged == 5 {
            assert!(!sixth.decision().is_allowed(), "the sixth login is refused");
        }
    });
}

/// A wait longer than the `FallbackStore`'s deadline is cut to fit it: with no replica to
/// answer, every acknowledged check is still answered by Redis (never timed out into its
/// failure policy, which fails closed here), and a plain rule beside it is never held up.
#[test]
fn the_wait_is_cut_to_the_caller_s_deadline() {
    let server = RedisServer::start().expect("start redis-server (apt install redis-server)");
    common::block_on(async {
        let redis = RedisStore::builder()
            .prefix(common::unique_prefix())
            .connect(&server.url())
            .await
            .expect("connect");
        let store = tollgate_wrappers::FallbackStore::builder(redis.clone())
            .timeout(Duration::from_millis(200))
            .build();
        let (rule, key) = (RuleId::new("login").expect("id"), Key::new("dave"));
        let item = Item::new(&rule, logins(), &key)
            .with_fleet_modes(acknowledged(Duration::from_secs(1)))
            .with_store_failure(tollgate_core::OnStoreFailure::Closed);
        let plain_rule = RuleId::new("reads").expect("id");
        let plain = Item::new(&plain_rule, logins(), &key)
            .with_store_failure(tollgate_core::OnStoreFailure::Closed);
        for _ in 0..3 {
            let answer = store.check_one(&item).await.expect("answered by Redis");
            assert!(answer.decision().is_allowed());
            assert!(
                store
                    .check_one(&plain)
                    .await
                    .expect("answered")
                    .decision()
                    .is_allowed()
            );
        }
        assert_eq!(store.stats().primary_failures, 0, "{:?}", store.stats());
        assert_eq!(redis.connection().replica_acks().unacknowledged, 3);
    });
}

/// A replica stopped with SIGSTOP: sixteen acknowledged checks sent at once all answer; the
/// first wait runs out, and the checks queued behind it on the kept connection skip theirs
/// instead of each waiting in turn.
#[test]
fn checks_queued_behind_a_missed_wait_do_not_wait_in_turn() {
    let master = RedisServer::start().expect("start redis-server (apt install redis-server)");
    let replica = RedisServer::start().expect("start a second redis-server");
    replicate(&master, &replica);
    common::block_on(async {
        let store = RedisStore::builder()
            .prefix(common::unique_prefix())
            .connect(&master.url())
            .await
            .expect("connect");
        let rule = RuleId::new("login").expect("id");
        // The kept connection exists once a first acknowledged check has gone.
        let first = Key::new("warm-up");
        let warm = Item::new(&rule, logins(), &first)
            .with_fleet_modes(acknowledged(Duration::from_millis(100)));
        store.check_one(&warm).await.expect("answered");
        replica.pause().expect("SIGSTOP the replica");
        let keys: Vec<Key> = (0..16).map(|n| Key::new(format!("user-{n}"))).collect();
        let checks = keys.iter().map(|key| {
            let item = Item::new(&rule, logins(), key)
                .with_fleet_modes(acknowledged(Duration::from_millis(100)));
            let store = store.clone();
            async move { store.check_one(&item).await }
        });
        for answer in futures_util::future::join_all(checks).await {
            assert!(answer.expect("answered").decision().is_allowed());
        }
        replica.resume().expect("SIGCONT the replica");
        let waits = waits_run(&master);
        assert!(
            waits < 1 + 16,
            "{waits} WAITs: the checks queued behind the missed wait skipped theirs"
        );
        let acks = store.connection().replica_acks();
        assert_eq!(acks.acknowledged + acks.unacknowledged, 17);
        assert!(acks.unacknowledged >= 1);
    });
}
