//! The server side of `scripts/bench-envoy`: Envoy's `ShouldRateLimit` served on 127.0.0.1:0,
//! by tollgate or by a bare tonic service, for `rls_bench_load` to drive.
//!
//! `cargo run --release -p tollgate-envoy --example rls_bench_server -- MODE [--redis URL]
//! [--workers N] [--nagle]`, MODE one of:
//!
//! * `bare` — the baseline: a tonic unary service implementing the same RLS trait with the
//!   same generated types and the same server settings, answering a constant OK
//!   (`overall_code` OK, nothing else) without looking at the request;
//! * `memory` — [`RateLimitService`] on a `MemoryStore`;
//! * `redis` — [`RateLimitService`] on Redis at `--redis URL`, as the `tollgate-envoy` binary
//!   builds it: a `RedisStore` behind a `FallbackStore` (50 ms timeout, the binary's default)
//!   behind a `FleetStore` with its ticker.
//!
//! Both tollgate modes load [`RULES`]: one rule for the one-descriptor request
//! (`remote_address`) and two more for the three-descriptor request (`path` and `user`, and a
//! global `generic_key`), with quotas no bench reaches, so every call is counted and allowed.
//! Accepted connections have `TCP_NODELAY` (`--nagle`: left off, Nagle's algorithm on). The
//! server runs a multi-thread tokio runtime (as the binary does) of `--workers` threads,
//! default the CPUs this process may use (`taskset` pins it to one), prints
//! `listening on ADDRESS` and serves until killed. Its CPU time is read by the load generator
//! from `/proc/PID/stat`.

#![allow(clippy::print_stdout)] // The address is the example's output.

use std::time::Duration;

use tokio::net::TcpListener;
use tollgate_config::{Extractors, RuleFile};
use tollgate_core::MemoryStore;
use tollgate_envoy::RateLimitService;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService as Rls, RateLimitServiceServer,
};
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::{
    RateLimitRequest, RateLimitResponse,
};
use tollgate_redis::RedisStore;
use tollgate_wrappers::{FallbackStore, FleetStore};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// The rules of both tollgate modes, in the domain `bench`: `per-address` counts the
/// one-descriptor request; the three-descriptor request adds `per-user-path` and `api`, a
/// single global key. No quota here is reached by a bench run.
pub const RULES: &str = r#"
[[rule]]
id = "per-address"
envoy = { domain = "bench", descriptor = [{ key = "remote_address" }] }
algorithm = "token_bucket"
capacity = 1000000000
refill = { amount = 1000000, per = "1s" }

[[rule]]
id = "per-user-path"
envoy = { domain = "bench", descriptor = [{ key = "path" }, { key = "user" }] }
algorithm = "fixed_window"
limit = 1000000000
window = "1m"

[[rule]]
id = "api"
envoy = { domain = "bench", descriptor = [{ key = "generic_key", value = "api" }] }
algorithm = "fixed_window"
limit = 1000000000
window = "1s"
"#;

/// The baseline: the same trait, a constant OK.
#[derive(Clone, Copy)]
struct Bare;

#[tonic::async_trait]
impl Rls for Bare {
    async fn should_rate_limit(
        &self,
        _request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        Ok(Response::new(RateLimitResponse {
            overall_code: Code::Ok as i32,
            ..RateLimitResponse::default()
        }))
    }
}

struct Args {
    mode: String,
    redis: Option<String>,
    workers: Option<usize>,
    nagle: bool,
}

fn args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().ok_or("a mode: bare, memory or redis")?;
    let (mut redis, mut workers, mut nagle) = (None, None, false);
    while let Some(flag) = args.next() {
        if flag == "--nagle" {
            nagle = true;
            continue;
        }
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--redis" => redis = Some(value()?),
            "--workers" => {
                workers = Some(value()?.parse().map_err(|e| format!("--workers: {e}"))?);
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    Ok(Args {
        mode,
        redis,
        workers,
        nagle,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args()?;
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = args.workers {
        runtime.worker_threads(workers);
    }
    runtime.enable_all().build()?.block_on(serve(args))
}

async fn serve(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    // TCP_NODELAY on every accepted connection, as tonic's own `serve` sets it (an incoming
    // stream of one's own is served as it comes): `--nagle` leaves it off.
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(!args.nagle));
    let builder = tonic::transport::Server::builder();
    let rules = || RuleFile::parse("rules.toml", RULES, &Extractors::new());
    let served = match args.mode.as_str() {
        "bare" => {
            println!("listening on {address}");
            let mut builder = builder;
            let router = builder.add_service(RateLimitServiceServer::new(Bare));
            router.serve_with_incoming(incoming).await
        }
        "memory" => {
            let service = RateLimitService::new(MemoryStore::new());
            service.set_rules(&rules()?)?;
            println!("listening on {address}");
            let mut builder = builder;
            let router = builder.add_service(service.server());
            router.serve_with_incoming(incoming).await
        }
        "redis" => {
            let url = args.redis.ok_or("redis needs --redis URL")?;
            // A prefix of this run's own: runs never count each other's keys.
            let prefix = format!("rls-bench-{}", std::process::id());
            let redis = RedisStore::builder().prefix(prefix).connect(&url).await?;
            let store = FleetStore::new(
                FallbackStore::builder(redis)
                    .timeout(Duration::from_millis(50))
                    .build(),
            );
            let _ticker = store.spawn_ticker(Duration::from_secs(1));
            let service = RateLimitService::new(store);
            service.set_rules(&rules()?)?;
            println!("listening on {address}");
            let mut builder = builder;
            let router = builder.add_service(service.server());
            router.serve_with_incoming(incoming).await
        }
        other => return Err(format!("unknown mode {other:?}: bare, memory or redis").into()),
    };
    Ok(served?)
}
