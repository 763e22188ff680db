//! From publish to enforced: how long a rule change published on one gateway takes to be the
//! rules in force on another, against a bare Redis pub/sub round trip measured in the same run.
//!
//! The bench starts its own `redis-server` (via `tollgate-redis-harness`, on a free loopback
//! port, killed at the end) and two gateways: each a `RateLimitLayer` over its own
//! `RedisStore` connection, a `RuleWatcher` on its own rule file, and a `PublishedRules` follower
//! with its poll set to an hour, so only the pub/sub announcement can carry a change. Then, N
//! times (default 20): gateway A publishes a document changing the one rule's limit, and the
//! clock runs until gateway B's layer holds the new limit (checked after every yield of the
//! runtime). Baseline, N times: a plain redis-rs `PUBLISH` until a plain subscriber has the
//! message. Both print the median and the maximum; the target is B enforcing within 2 s (the
//! issue's bound), and the ratio of medians says what tollgate adds to the bare round trip
//! (reading the version, fetching and checking the document, swapping the rules).
//!
//! Run: `cargo bench -p tollgate-published --bench propagation -- [--times N]`.

#![allow(clippy::print_stdout, reason = "a bench binary prints its table")]

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tollgate_config::{Extractors, RuleWatcher};
use tollgate_published::PublishedRules;
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_redis_harness::RedisServer;
use tollgate_tower::RateLimitLayer;

fn rules(limit: u64) -> String {
    format!(
        "[[rule]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1d\"\nkey = \"global\"\n"
    )
}

struct Gateway {
    layer: RateLimitLayer<RedisStore>,
    fleet: PublishedRules,
    _watcher: RuleWatcher,
    _dir: tempfile::TempDir,
}

async fn gateway(url: &str) -> Result<Gateway, Box<dyn std::error::Error>> {
    let connection = RedisConnection::connect(url).await?;
    let store = RedisStore::builder()
        .prefix("fleet-bench")
        .build(connection.clone())?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, rules(1))?;
    let layer = RateLimitLayer::new(store);
    let watcher = RuleWatcher::start(&path, Extractors::new(), &layer)?;
    let fleet = PublishedRules::builder("bench")
        .poll_every(Duration::from_secs(3_600))
        .follow(&connection, watcher.overlay())
        .await?;
    Ok(Gateway {
        layer,
        fleet,
        _watcher: watcher,
        _dir: dir,
    })
}

fn limit_in_force(layer: &RateLimitLayer<RedisStore>) -> u64 {
    layer
        .handle()
        .rules()
        .rules()
        .next()
        .map_or(0, |rule| rule.quota().limit())
}

/// Median and maximum.
fn summary(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    let middle = times.len() / 2;
    let median = if times.len() % 2 == 1 {
        times[middle]
    } else {
        (times[middle - 1] + times[middle]) / 2
    };
    (median, times.last().copied().unwrap_or_default())
}

async fn tollgate(url: &str, times: usize) -> Result<Vec<Duration>, Box<dyn std::error::Error>> {
    let (a, b) = (gateway(url).await?, gateway(url).await?);
    while !b.fleet.status().subscribed {
        tokio::task::yield_now().await;
    }
    let mut taken = Vec::with_capacity(times);
    for round in 0..times {
        let limit = 100 + round as u64;
        let started = Instant::now();
        a.fleet.publish(&rules(limit)).await?;
        while limit_in_force(&b.layer) != limit {
            if started.elapsed() > Duration::from_secs(30) {
                return Err(format!("gateway B never enforced limit {limit}").into());
            }
            tokio::task::yield_now().await;
        }
        taken.push(started.elapsed());
        assert_eq!(limit_in_force(&a.layer), limit, "applied where published");
    }
    Ok(taken)
}

async fn baseline(url: &str, times: usize) -> Result<Vec<Duration>, Box<dyn std::error::Error>> {
    let client = redis::Client::open(url)?;
    let mut subscriber = client.get_async_pubsub().await?;
    subscriber.subscribe("bench-baseline").await?;
    let mut messages = subscriber.into_on_message();
    let mut publisher = client.get_multiplexed_async_connection().await?;
    let mut taken = Vec::with_capacity(times);
    for round in 0..times {
        let started = Instant::now();
        let _: i64 = redis::cmd("PUBLISH")
            .arg("bench-baseline")
            .arg(round)
            .query_async(&mut publisher)
            .await?;
        messages.next().await.ok_or("the subscription ended")?;
        taken.push(started.elapsed());
    }
    Ok(taken)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let times = args
        .iter()
        .position(|arg| arg == "--times")
        .and_then(|at| args.get(at + 1)?.parse().ok())
        .unwrap_or(20);
    let server = RedisServer::start()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (ours, theirs) = runtime.block_on(async {
        let ours = tollgate(&server.url(), times).await?;
        let theirs = baseline(&server.url(), times).await?;
        Ok::<_, Box<dyn std::error::Error>>((ours, theirs))
    })?;
    let (our_median, our_max) = summary(ours);
    let (their_median, their_max) = summary(theirs);
    println!("{:<34} {:>12} {:>12}", "", "median", "max");
    println!(
        "{:<34} {:>12.3?} {:>12.3?}",
        "publish -> enforced on gateway B", our_median, our_max
    );
    println!(
        "{:<34} {:>12.3?} {:>12.3?}",
        "bare PUBLISH -> subscriber", their_median, their_max
    );
    let verdict = if our_max <= Duration::from_secs(2) {
        "meets target"
    } else {
        "MISSES target"
    };
    println!(
        "\nratio of medians (tollgate / bare): {:.1}; max {our_max:.3?} (target <= 2 s) {verdict}",
        our_median.as_secs_f64() / their_median.as_secs_f64().max(1e-9)
    );
    println!("{times} changes each, one redis-server on loopback");
    Ok(())
}
