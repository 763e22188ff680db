//! Concurrency rules across a fleet, on a real redis-server over real HTTP: ten gateways (each
//! an axum server with its own `RedisStore` connection) with fifty client tasks each never let
//! more than the limit run at once, counted by the handler itself; and a gateway process killed
//! with SIGKILL mid-request holds its slot no longer than the slot ttl after its last renewal.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use tollgate::Quota;
use tollgate::redis::RedisStore;
use tollgate::tower::key::Global;
use tollgate::tower::{RateLimitLayer, Rule};
use tollgate_redis_harness::{RedisServer, redis_cli};

const GATEWAYS: usize = 10;
const TASKS_PER_GATEWAY: usize = 50;
const LIMIT: usize = 20;

/// Calls running in the handlers of every gateway, and the most at once.
#[derive(Default)]
struct Running {
    now: AtomicUsize,
    most: AtomicUsize,
}

async fn gateway(
    redis_url: &str,
    prefix: &str,
    limit: u64,
    ttl: Duration,
    running: Arc<Running>,
) -> String {
    let store = RedisStore::builder()
        .prefix(prefix)
        .connect(redis_url)
        .await
        .expect("connect to redis-server");
    let quota = Quota::concurrency_with(limit, Duration::from_secs(1), ttl).expect("valid");
    let rule = Rule::new("in-flight", quota, Global).expect("valid id");
    let work = move || {
        let running = Arc::clone(&running);
        async move {
            let now = running.now.fetch_add(1, Ordering::SeqCst) + 1;
            running.most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(2)).await;
            running.now.fetch_sub(1, Ordering::SeqCst);
            "done"
        }
    };
    let app = Router::new()
        .route("/work", get(work))
        .route("/hold", get(std::future::pending::<&'static str>))
        .layer(RateLimitLayer::new(store).rule(rule));
    common::serve(app).await
}

fn cli(server: &RedisServer, args: &[&str]) -> String {
    redis_cli(server.port(), args, Duration::from_secs(5)).expect("redis-cli answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_gateways_never_run_more_than_the_limit_at_once() {
    let server = RedisServer::start().expect("start redis-server");
    let running = Arc::new(Running::default());
    let mut gateways = Vec::new();
    for _ in 0..GATEWAYS {
        let url = gateway(
            &server.url(),
            "fleet",
            LIMIT as u64,
            Duration::from_secs(60),
            Arc::clone(&running),
        )
        .await;
        gateways.push(url);
    }
    let client = common::client();
    let mut tasks = tokio::task::JoinSet::new();
    for (index, url) in gateways.iter().enumerate() {
        for _ in 0..TASKS_PER_GATEWAY {
            let (client, url) = (client.clone(), format!("{url}/work"));
            tasks.spawn(async move {
                let mut statuses = Vec::new();
                for _ in 0..4 {
                    let response = client.get(&url).send().await.expect("the gateway answers");
                    statuses.push(response.status());
                }
                (index, statuses)
            });
        }
    }
    let (mut allowed, mut refused) = (0, 0);
    while let Some(done) = tasks.join_next().await {
        for status in done.expect("the client task ends").1 {
            match status {
                StatusCode::OK => allowed += 1,
                StatusCode::TOO_MANY_REQUESTS => refused += 1,
                other => panic!("unexpected {other}"),
            }
        }
    }
    let most = running.most.load(Ordering::SeqCst);
    assert!(
        most <= LIMIT,
        "{most} ran at once, over the limit of {LIMIT}"
    );
    assert!(
        allowed >= LIMIT && refused > 0,
        "allowed {allowed}, refused {refused}"
    );
    // Every hold was given back: the sorted set is gone.
    let mut keys = cli(&server, &["DBSIZE"]);
    for _ in 0..1_000 {
        if keys.trim() == "0" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        keys = cli(&server, &["DBSIZE"]);
    }
    assert_eq!(keys.trim(), "0", "holds left in redis");
}

/// Set in the child process this test starts: the Redis URL its gateway counts in.
const CHILD_REDIS: &str = "TOLLGATE_TEST_CHILD_GATEWAY_REDIS";
const CHILD_TEST: &str = "a_gateway_killed_mid_request_holds_its_slot_no_longer_than_the_slot_ttl";
const READY: &str = "child gateway listening on ";
const TTL: Duration = Duration::from_secs(1);

/// The child's part: a gateway with a one-slot rule that announces its address and runs until
/// it is killed.
async fn run_child_gateway(redis_url: &str) {
    let url = gateway(redis_url, "killed", 1, TTL, Arc::default()).await;
    // The parent reads this line from the child's standard output.
    use std::io::Write as _;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{READY}{url}").expect("the parent reads the child's output");
    stdout.flush().expect("the parent reads the child's output");
    std::future::pending::<()>().await;
}

/// The server's clock in µs (`TIME`).
fn server_micros(server: &RedisServer) -> u64 {
    let time = cli(server, &["TIME"]);
    let mut parts = time
        .split_whitespace()
        .map(|part| part.parse::<u64>().expect("a number"));
    let (secs, micros) = (
        parts.next().expect("seconds"),
        parts.next().expect("micros"),
    );
    secs * 1_000_000 + micros
}

/// The expiry scores of the holds in the one slots key under prefix `killed`.
fn hold_expiries(server: &RedisServer) -> Vec<u64> {
    let keys = cli(server, &["KEYS", "killed:c1:*"]);
    let Some(key) = keys.lines().next().filter(|key| !key.is_empty()) else {
        return Vec::new();
    };
    let members = cli(server, &["ZRANGE", key, "0", "-1", "WITHSCORES"]);
    members
        .lines()
        .skip(1)
        .step_by(2)
        .map(|score| score.parse::<f64>().expect("a score") as u64)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_killed_mid_request_holds_its_slot_no_longer_than_the_slot_ttl() {
    if let Ok(redis_url) = std::env::var(CHILD_REDIS) {
        return run_child_gateway(&redis_url).await;
    }
    let server = RedisServer::start().expect("start redis-server");
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args([CHILD_TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_REDIS, server.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the child gateway");
    let stdout = child.stdout.take().expect("piped");
    let child_url = BufReader::new(stdout)
        .lines()
        .map(|line| line.expect("the child's output"))
        .find_map(|line| line.split_once(READY).map(|(_, url)| url.to_owned()))
        .expect("the child gateway announces its address");

    // A request holds the child's one slot, and never ends.
    let client = common::client();
    let held = {
        let (client, url) = (client.clone(), format!("{child_url}/hold"));
        tokio::spawn(async move { client.get(url).send().await })
    };
    let mut expiries = hold_expiries(&server);
    for _ in 0..1_000 {
        if !expiries.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        expiries = hold_expiries(&server);
    }
    assert_eq!(expiries.len(), 1, "the slot is held in redis");

    child.kill().expect("SIGKILL the child gateway");
    child.wait().expect("the child is gone");
    let killed_at = server_micros(&server);
    let _ = held.await;

    // The hold lapses no later than a slot ttl after the kill (its last renewal came before).
    let ttl = u64::try_from(TTL.as_micros()).expect("small");
    for expiry in hold_expiries(&server) {
        assert!(
            expiry <= killed_at + ttl,
            "a hold outlives the ttl: {expiry} > {killed_at} + {ttl}"
        );
    }
    // Another gateway on the same count is refused while it holds, and admitted once it lapses.
    let survivor = gateway(&server.url(), "killed", 1, TTL, Arc::default()).await;
    let mut status = client
        .get(format!("{survivor}/work"))
        .send()
        .await
        .expect("the gateway answers")
        .status();
    for _ in 0..1_000 {
        if status == StatusCode::OK {
            break;
        }
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        tokio::time::sleep(Duration::from_millis(10)).await;
        status = client
            .get(format!("{survivor}/work"))
            .send()
            .await
            .expect("the gateway answers")
            .status();
    }
    assert_eq!(status, StatusCode::OK, "the dead gateway's slot came back");
}
