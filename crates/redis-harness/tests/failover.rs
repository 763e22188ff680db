//! A failover on a cluster of this binary's own (the shared one in `harness.rs` must not lose a
//! master under other tests).

use std::time::Duration;

use tollgate_redis_harness::{RedisCluster, redis_cli};

#[test]
fn kill_master_fails_over_the_old_master_rejoins_and_drop_stops_all() {
    let cluster = RedisCluster::start().unwrap();
    let before = cluster.masters().unwrap();
    assert_eq!(before.len(), 3);
    // The killed master's replica (replicas are listed in their masters' order).
    let heir = cluster.replicas().unwrap()[0].port();

    let killed = cluster.kill_master(0).unwrap();
    assert!(!killed.is_running());
    cluster.wait_until_ok(Duration::from_secs(30)).unwrap();
    // `wait_until_ok` really waited for the failover: the replica serves the killed master's
    // slots (slot 0 among them), and says it is a master.
    assert_eq!(cluster.master_of(0).unwrap().port(), heir);
    let role = redis_cli(heir, &["role"], Duration::from_secs(5)).unwrap();
    assert_eq!(role.lines().next(), Some("master"), "{role}");

    let after = cluster.masters().unwrap();
    assert_eq!(after.len(), 3);
    assert!(after.iter().all(|master| master.port() != killed.port()));

    killed.restart().unwrap();
    cluster.wait_until_ok(Duration::from_secs(30)).unwrap();
    let replicas = cluster.replicas().unwrap();
    assert!(
        replicas
            .iter()
            .any(|replica| replica.port() == killed.port())
    );

    assert!(cluster.kill_master(3).unwrap_err().is_cluster());

    // Dropping the cluster stops every node.
    let ports: Vec<u16> = cluster.nodes().iter().map(|node| node.port()).collect();
    drop(cluster);
    for port in ports {
        let error = redis_cli(port, &["ping"], Duration::from_secs(2)).unwrap_err();
        assert!(error.is_command_failed(), "{port}: {error}");
    }
}
