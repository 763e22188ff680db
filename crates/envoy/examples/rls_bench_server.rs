//! The server side of `scripts/bench-envoy`: Envoy's `ShouldRateLimit` served on 127.0.0.1:0,
//! by tollgate or by a bare tonic service, for `rls_bench_load` to drive.
//!
//! `cargo run --release -p tollgate-envoy --example rls_bench_server -- MODE [--redis URL]
//! [--workers N] [--transport tollgate|tonic|plain]`, MODE one of:
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
//! Accepted connections are served as the binary serves them (its `incoming.rs`: `TCP_NODELAY`,
//! answers written together); `--transport tonic` serves them as tonic's own `serve` does
//! (`TCP_NODELAY`, vectored writes: one `writev` per answer of 256 bytes or more), `--transport
//! plain` as they come (Nagle's algorithm on, as the binary served before it set
//! `TCP_NODELAY`). The server runs a multi-thread tokio runtime (as the binary does) of `--workers` threads,
//! default the CPUs this process may use (`taskset` pins it to one), prints
//! `listening on ADDRESS` and serves until killed. Its CPU time is read by the load generator
//! from `/proc/PID/stat`.

#![allow(clippy::print_stdout)] // The address is the example's output.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
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

/// The accepted connections as the binary serves them.
#[path = "../src/bin/tollgate-envoy/incoming.rs"]
mod incoming;

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

/// How accepted connections are served.
#[derive(Clone, Copy)]
enum Transport {
    /// As the `tollgate-envoy` binary serves them: `TCP_NODELAY`, not vectored.
    Tollgate,
    /// As tonic's own `Server::serve` does: `TCP_NODELAY`, vectored writes.
    Tonic,
    /// As they come from the listener: Nagle's algorithm on, vectored writes.
    Plain,
}

struct Args {
    mode: String,
    redis: Option<String>,
    workers: Option<usize>,
    transport: Transport,
}

fn args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().ok_or("a mode: bare, memory or redis")?;
    let (mut redis, mut workers, mut transport) = (None, None, Transport::Tollgate);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--redis" => redis = Some(value()?),
            "--workers" => {
                workers = Some(value()?.parse().map_err(|e| format!("--workers: {e}"))?);
            }
            "--transport" => {
                transport = match value()?.as_str() {
                    "tollgate" => Transport::Tollgate,
                    "tonic" => Transport::Tonic,
                    "plain" => Transport::Plain,
                    other => {
                        return Err(format!("--transport {other:?}: tollgate, tonic or plain"));
                    }
                }
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    Ok(Args {
        mode,
        redis,
        workers,
        transport,
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
    let rules = || RuleFile::parse("rules.toml", RULES, &Extractors::new());
    let mut builder = tonic::transport::Server::builder();
    let mut _ticker = None;
    let router = match args.mode.as_str() {
        "bare" => builder.add_service(RateLimitServiceServer::new(Bare)),
        "memory" => {
            let service = RateLimitService::new(MemoryStore::new());
            service.set_rules(&rules()?)?;
            builder.add_service(service.server())
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
            _ticker = Some(store.spawn_ticker(Duration::from_secs(1)));
            let service = RateLimitService::new(store);
            service.set_rules(&rules()?)?;
            builder.add_service(service.server())
        }
        other => return Err(format!("unknown mode {other:?}: bare, memory or redis").into()),
    };
    println!("listening on {address}");
    match args.transport {
        Transport::Tollgate => {
            router
                .serve_with_incoming(incoming::incoming(listener))
                .await?;
        }
        Transport::Tonic => {
            let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
            router.serve_with_incoming(incoming).await?;
        }
        Transport::Plain => {
            router
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await?;
        }
    }
    Ok(())
}
