//! The harness against real `redis-server` processes.
//!
//! Every wait is bounded; the one cluster of this binary is `RedisCluster::shared()`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use tollgate_redis_harness::{HarnessError, RedisCluster, RedisServer, redis_cli};

const INSTALL_HINT: &str = "redis-server not found: install it with \
                            `apt-get install redis-server redis-tools` \
                            (or run scripts/test, which does)";

/// Whether something answers `PING` on `port` (bounded: a hung server counts as not answering).
fn answers_ping(port: u16) -> bool {
    redis_cli(port, &["ping"], Duration::from_secs(2)).is_ok_and(|answer| answer.trim() == "PONG")
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
fn eventually(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_server_starts_and_answers_ping() {
    let server = RedisServer::start().unwrap();

    assert_eq!(server.cli(&["ping"]).unwrap().trim(), "PONG");
    assert_eq!(
        server.url(),
        format!("redis://127.0.0.1:{}/", server.port())
    );
    assert!(server.pid().is_some());
    assert!(server.is_running());
    assert!(
        server.log().contains("Ready to accept connections"),
        "log:\n{}",
        server.log()
    );
    // The config the harness wrote is the one in force: loopback only, nothing persisted.
    assert_eq!(
        server.cli(&["config", "get", "bind"]).unwrap().trim(),
        "bind\n127.0.0.1"
    );
    assert_eq!(
        server.cli(&["config", "get", "save"]).unwrap().trim(),
        "save"
    );
    assert_eq!(
        server.cli(&["config", "get", "appendonly"]).unwrap().trim(),
        "appendonly\nno"
    );
    let dir = server.cli(&["config", "get", "dir"]).unwrap();
    assert_eq!(
        PathBuf::from(dir.lines().nth(1).unwrap())
            .canonicalize()
            .unwrap(),
        server.dir().canonicalize().unwrap()
    );
}

#[test]
fn set_and_get_round_trip() {
    let server = RedisServer::start().unwrap();

    assert_eq!(
        server
            .cli(&["set", "greeting", "hello, tollgate"])
            .unwrap()
            .trim(),
        "OK"
    );
    assert_eq!(
        server.cli(&["get", "greeting"]).unwrap().trim(),
        "hello, tollgate"
    );
    // An error reply is an error, not an output to misread.
    let error = server.cli(&["incr", "greeting"]).unwrap_err();
    assert!(error.is_command_failed(), "{error}");
    assert!(error.to_string().contains("not an integer"), "{error}");
}

#[test]
fn kill_stops_it_and_restart_brings_it_back_on_the_same_port() {
    let server = RedisServer::start().unwrap();
    let port = server.port();
    let first_pid = server.pid().unwrap();
    server.cli(&["set", "k", "v"]).unwrap();

    server.kill().unwrap();
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
    let error = redis_cli(port, &["ping"], Duration::from_secs(2)).unwrap_err();
    assert!(error.is_command_failed(), "{error}");
    server.kill().unwrap(); // killing a dead server is harmless

    server.restart().unwrap();
    assert_eq!(server.port(), port);
    assert!(answers_ping(port));
    assert_ne!(server.pid(), Some(first_pid));
    // Nothing was persisted: the restarted server is empty.
    assert_eq!(server.cli(&["exists", "k"]).unwrap().trim(), "0");
    assert_eq!(
        server.log().matches("Ready to accept connections").count(),
        2
    );
}

#[test]
fn pause_makes_ping_time_out_and_resume_restores_it() {
    let server = RedisServer::start().unwrap();

    server.pause().unwrap();
    assert!(server.is_paused());
    let error = server
        .cli_with_timeout(&["ping"], Duration::from_millis(300))
        .unwrap_err();
    assert!(error.is_timeout(), "{error}");
    // It gave up at the deadline it was given (not the default one), with the server still
    // paused: the call ended on its own deadline, not on an answer.
    assert!(error.to_string().contains("within 300ms"), "{error}");
    assert!(server.is_paused());

    server.resume().unwrap();
    assert!(!server.is_paused());
    assert_eq!(server.cli(&["ping"]).unwrap().trim(), "PONG");

    // A paused server can still be killed (and dropped).
    server.pause().unwrap();
    server.kill().unwrap();
    assert!(!answers_ping(server.port()));
    assert!(server.pause().unwrap_err().is_exited());
}

#[test]
fn a_missing_redis_server_says_how_to_install_it() {
    let error = RedisServer::start_with("tollgate-no-such-redis-server").unwrap_err();
    assert!(error.is_not_installed(), "{error}");
    assert!(error.to_string().starts_with(INSTALL_HINT), "{error}");

    let error = RedisCluster::start_with("tollgate-no-such-redis-server").unwrap_err();
    assert!(error.is_not_installed(), "{error}");
    assert!(error.to_string().starts_with(INSTALL_HINT), "{error}");
}

#[test]
fn a_server_that_dies_at_start_shows_its_output_in_the_error() {
    let scripts = tempfile::tempdir().unwrap();
    let fake = scripts.path().join("fake-redis-server");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho \"fake redis: cannot use $1\" >&2\nexit 3\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    // Another test's fork may briefly hold the script's write handle open ("text file busy").
    let mut error = None;
    for _ in 0..50 {
        match RedisServer::start_with(fake.to_str().unwrap()) {
            Err(e) if e.is_io() && e.to_string().contains("busy") => {
                thread::sleep(Duration::from_millis(20));
            }
            other => {
                error = Some(other.unwrap_err());
                break;
            }
        }
    }
    let error: HarnessError = error.unwrap();
    assert!(error.is_exited(), "{error}");
    let message = error.to_string();
    assert!(message.contains("exited"), "{message}");
    assert!(message.contains("fake redis: cannot use"), "{message}");
    assert!(message.contains("redis.conf"), "{message}");
}

#[test]
fn drop_kills_the_process_and_removes_its_dir() {
    let server = RedisServer::start().unwrap();
    let port = server.port();
    let dir = server.dir().to_owned();
    assert!(answers_ping(port));

    drop(server);

    let error = redis_cli(port, &["ping"], Duration::from_secs(2)).unwrap_err();
    assert!(error.is_command_failed(), "{error}");
    assert!(!dir.exists());
}

/// Set by [`the_watchdog_stops_the_server_when_its_owner_dies`] for the process it spawns.
const HELPER_ENV: &str = "TOLLGATE_REDIS_HARNESS_WATCHDOG_HELPER";

/// Not a test on its own, so ignored (never counted as passing): in a child process that the
/// watchdog test starts with `--ignored --exact`, starts a server, says where it is, and waits
/// to be killed. Run any other way (without the variable), it fails saying so.
#[test]
#[ignore = "the child process of the_watchdog_stops_the_server_when_its_owner_dies, not a test"]
fn watchdog_helper_holds_a_server() {
    assert!(
        std::env::var_os(HELPER_ENV).is_some(),
        "not a test: the_watchdog_stops_the_server_when_its_owner_dies runs it as its child"
    );
    let server = RedisServer::start().unwrap();
    println!(
        "HELPER port={} dir={}",
        server.port(),
        server.dir().display()
    );
    thread::sleep(Duration::from_secs(60));
}

#[test]
fn the_watchdog_stops_the_server_when_its_owner_dies() {
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "watchdog_helper_holds_a_server",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = helper.stdout.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest prints "test NAME ... " on the same line first.
            if let Some((_, rest)) = line.split_once("HELPER ") {
                let _ = sender.send(rest.to_owned());
                return;
            }
        }
    });
    let announced = receiver.recv_timeout(Duration::from_secs(30));
    // The test process dies without running any destructor.
    helper.kill().unwrap();
    helper.wait().unwrap();
    let announced = announced.expect("the helper did not start a server");
    let (port, dir) = announced.split_once(' ').unwrap();
    let port: u16 = port.strip_prefix("port=").unwrap().parse().unwrap();
    let dir = PathBuf::from(dir.strip_prefix("dir=").unwrap());

    assert!(
        eventually(Duration::from_secs(5), || !answers_ping(port)),
        "the orphaned server on port {port} still answers"
    );
    assert!(
        eventually(Duration::from_secs(5), || !dir.exists()),
        "the orphaned server's dir {} was not removed",
        dir.display()
    );
}

#[test]
fn the_cluster_reaches_ok_with_three_masters() {
    let cluster = RedisCluster::shared().unwrap();

    assert_eq!(cluster.nodes().len(), 6);
    let urls = cluster.urls();
    assert_eq!(urls.len(), 6);
    for node in cluster.nodes() {
        assert!(urls.contains(&node.url()));
        let info = node.cli(&["cluster", "info"]).unwrap();
        assert!(info.contains("cluster_state:ok"), "{}: {info}", node.port());
        assert!(
            info.contains("cluster_slots_assigned:16384"),
            "{}: {info}",
            node.port()
        );
    }
    let masters = cluster.masters().unwrap();
    assert_eq!(masters.len(), 3);
    let replicas = cluster.replicas().unwrap();
    assert_eq!(replicas.len(), 3);
    assert!(
        masters
            .iter()
            .all(|m| replicas.iter().all(|r| r.port() != m.port()))
    );
    // Ordered by slot: the first master serves slot 0.
    let owner = masters[0].cli(&["cluster", "countkeysinslot", "0"]);
    assert!(owner.is_ok(), "{owner:?}");
}

#[test]
fn the_shared_cluster_is_started_once_and_serves_keys_in_every_slot() {
    let cluster = RedisCluster::shared().unwrap();
    assert!(std::ptr::eq(cluster, RedisCluster::shared().unwrap()));

    // `-c` follows MOVED redirections: writes through any node land on the slot's master.
    let entry = cluster.nodes()[0].port();
    for key in [
        "{alpha}:count",
        "{beta}:count",
        "{gamma}:count",
        "{delta}:count",
    ] {
        assert_eq!(
            redis_cli(entry, &["-c", "set", key, "7"], Duration::from_secs(5))
                .unwrap()
                .trim(),
            "OK"
        );
        assert_eq!(
            redis_cli(entry, &["-c", "get", key], Duration::from_secs(5))
                .unwrap()
                .trim(),
            "7"
        );
    }
}
