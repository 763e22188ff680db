//! A hello-world axum server for `scripts/bench-http`: bare, behind tollgate, or behind
//! tower_governor.
//!
//! `cargo run --release --features axum,config,metrics --example bench_server -- MODE` with MODE one of
//! `bare`, `bare-headers` (no limiter, but the very `RateLimit` and `RateLimit-Policy` fields
//! `tollgate` writes, as fixed text: what the fields alone cost), `tollgate` (in-memory store, two rules: per client IP and per account from the
//! `x-account` header, RateLimit headers on), `tollgate-lean` (one per-IP rule, no rate-limit
//! headers: like for like with governor), `tollgate-escalating` (`tollgate` with escalation on
//! the per-IP rule), `tollgate-reloadable` (`tollgate`'s rules read from a rule file that a
//! `RuleWatcher` watches while the server runs), `tollgate-metrics` (`tollgate` counting each
//! decision into a Prometheus recorder), `tollgate-stats` (`tollgate` with the per-rule counters
//! the admin API reads), `tollgate-full` (`tollgate-reloadable` with the Prometheus recorder and
//! the admin counters too: everything a production gateway turns on), `attack` /
//! `attack-untracked` (a per-IP rule that refuses
//! about nine requests in ten, with and without the top-refused feed), `governor`
//! (tower_governor per peer IP) or `governor-headers` (the same with its rate-limit headers). Except in the attack modes, every
//! quota allows a million requests a second per key, so the benchmark measures overhead, not
//! refusals. The server listens on 127.0.0.1 on a free port and prints `listening on PORT`.

#![allow(clippy::print_stdout)] // The port is the example's output.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tollgate::config::{Extractors, RuleWatcher};
use tollgate::tower::headers::HeaderStyle;
use tollgate::tower::key::{HeaderKey, PeerIp};
use tollgate::tower::{Escalation, RateLimitLayer, Rule};
use tollgate::{MemoryStore, Quota, Rate};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

/// Requests per second each key may make in every mode.
const PER_SECOND: u64 = 1_000_000;

/// The `RateLimit-Policy` field `tollgate` answers with, byte for byte.
const POLICY_FIELD: &str = r#""per-ip";q=1000000;w=1, "per-account";q=1000000;w=1"#;
/// A `RateLimit` field as long as the ones `tollgate` answers with.
const RATE_LIMIT_FIELD: &str = r#""per-ip";r=999999;t=1, "per-account";r=999999;t=1"#;

/// `tollgate`'s two rules as a rule file.
const RULE_FILE: &str = r#"
[[rule]]
id = "per-ip"
algorithm = "token_bucket"
capacity = 1000000
refill = { amount = 1000000, per = "1s" }
key = "peer_ip"

[[rule]]
id = "per-account"
algorithm = "token_bucket"
capacity = 1000000
refill = { amount = 1000000, per = "1s" }
key = { header = "x-account" }
"#;

/// What must live as long as the server: the watched file and its watcher.
type Keep = Option<(tempfile::TempDir, RuleWatcher)>;

/// `tollgate`'s layer: a per-IP and a per-account rule.
fn two_rules() -> Result<RateLimitLayer<MemoryStore>, Box<dyn std::error::Error>> {
    let quota = Quota::token_bucket(PER_SECOND, Rate::per_second(PER_SECOND))?;
    let account = HeaderKey::new(axum::http::HeaderName::from_static("x-account"));
    Ok(RateLimitLayer::new(MemoryStore::new())
        .rule(Rule::new("per-ip", quota, PeerIp::new())?)
        .rule(Rule::new("per-account", quota, account)?))
}

fn app(mode: &str) -> Result<(Router, Keep), Box<dyn std::error::Error>> {
    let hello = Router::new().route("/", get(|| async { "Hello, world!" }));
    if mode == "tollgate-metrics" {
        // `tollgate` with each decision counted into a Prometheus recorder.
        metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
        return Ok((hello.layer(two_rules()?.metrics()), None));
    }
    if mode == "tollgate-stats" {
        // `tollgate` with the per-rule counters the admin API reads (`track_stats`).
        return Ok((hello.layer(two_rules()?.track_stats()), None));
    }
    if let Some(tracked) = match mode {
        "attack" => Some(true),
        "attack-untracked" => Some(false),
        _ => None,
    } {
        // Most requests refused: the per-IP rule (the load generator is one peer) allows 5,000 a
        // second, about a tenth of what it sends; `attack` also feeds the top refused callers.
        let quota = Quota::token_bucket(5_000, Rate::per_second(5_000))?;
        let mut layer = RateLimitLayer::new(MemoryStore::new()).rule(Rule::new(
            "per-ip",
            quota,
            PeerIp::new(),
        )?);
        if tracked {
            layer = layer.track_top_refused(100);
        }
        return Ok((hello.layer(layer), None));
    }
    if mode == "tollgate-reloadable" || mode == "tollgate-full" {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("rules.toml");
        std::fs::write(&path, RULE_FILE)?;
        let mut layer = RateLimitLayer::new(MemoryStore::new());
        if mode == "tollgate-full" {
            // Everything a production gateway turns on: the rule file watched, each decision
            // counted into a Prometheus recorder, the admin API's per-rule counters.
            metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
            layer = layer.metrics().track_stats();
        }
        let watcher = RuleWatcher::start(&path, Extractors::new(), &layer)?;
        return Ok((hello.layer(layer), Some((dir, watcher))));
    }
    let app = match mode {
        "bare" => hello,
        "bare-headers" => Router::new().route(
            "/",
            get(|| async {
                (
                    [
                        ("ratelimit-policy", POLICY_FIELD),
                        ("ratelimit", RATE_LIMIT_FIELD),
                    ],
                    "Hello, world!",
                )
            }),
        ),
        "tollgate" => hello.layer(two_rules()?),
        "tollgate-escalating" => {
            // As `tollgate`, with a per-IP rule that escalates: its block is read in the same
            // store call as the rules.
            let quota = Quota::token_bucket(PER_SECOND, Rate::per_second(PER_SECOND))?;
            let account = HeaderKey::new(axum::http::HeaderName::from_static("x-account"));
            let hammering = Escalation::new(20, Duration::from_secs(60), Duration::from_secs(600))?;
            hello.layer(
                RateLimitLayer::new(MemoryStore::new())
                    .rule(Rule::new("per-ip", quota, PeerIp::new())?.escalate(hammering)?)
                    .rule(Rule::new("per-account", quota, account)?),
            )
        }
        "tollgate-lean" => {
            // Like for like with governor: one per-IP rule, no rate-limit headers.
            let quota = Quota::token_bucket(PER_SECOND, Rate::per_second(PER_SECOND))?;
            hello.layer(
                RateLimitLayer::new(MemoryStore::new())
                    .rule(Rule::new("per-ip", quota, PeerIp::new())?)
                    .headers(HeaderStyle::none()),
            )
        }
        "governor" => {
            let config = GovernorConfigBuilder::default()
                .per_nanosecond(1_000_000_000 / PER_SECOND)
                .burst_size(u32::try_from(PER_SECOND)?)
                .finish()
                .ok_or("invalid governor configuration")?;
            hello.layer(GovernorLayer::new(config))
        }
        "governor-headers" => {
            // Its `x-ratelimit-*` headers on every answer, as tollgate's are.
            let config = GovernorConfigBuilder::default()
                .per_nanosecond(1_000_000_000 / PER_SECOND)
                .burst_size(u32::try_from(PER_SECOND)?)
                .use_headers()
                .finish()
                .ok_or("invalid governor configuration")?;
            hello.layer(GovernorLayer::new(config))
        }
        other => {
            return Err(format!(
                "unknown mode {other:?}: bare, bare-headers, tollgate, tollgate-lean, tollgate-escalating, \
                 tollgate-reloadable, tollgate-metrics, tollgate-stats, tollgate-full, attack, \
                 attack-untracked, governor or governor-headers"
            )
            .into());
        }
    };
    Ok((app, None))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "bare".to_owned());
    // One worker thread: the load generator gets the other core.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let (app, _keep) = app(&mode)?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        println!("listening on {}", listener.local_addr()?.port());
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await?;
        Ok(())
    })
}
