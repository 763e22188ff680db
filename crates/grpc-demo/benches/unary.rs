//! Per-call overhead of the layer on a unary tonic service: the demo's feed service bare, and
//! behind a `RateLimitLayer` with two rules on every call (per `x-account`, per peer address,
//! with quotas no call reaches) and the IETF fields on, each on its own loopback port, driven by
//! the same tonic client load: 16 tasks on one HTTP/2 connection, 2,000 calls each. Rounds
//! alternate bare and limited; the figure is the ratio of calls a second, limited / bare, median
//! and range over the rounds.
//!
//! `cargo bench -p tollgate-grpc-demo --bench unary` (`-- --rounds N`, default 5).

#![allow(clippy::print_stdout)] // A bench reports what it measured.

use std::time::Instant;

use tollgate::tower::key::{HeaderKey, PeerIp};
use tollgate::tower::{RateLimitLayer, Rule};
use tollgate::{MemoryStore, Quota, Rate};
use tollgate_grpc_demo::feed::FeedRequest;
use tollgate_grpc_demo::feed::feed_client::FeedClient;
use tonic::transport::Channel;

const TASKS: usize = 16;
const CALLS: usize = 2_000;

fn plenty() -> Quota {
    Quota::token_bucket(1 << 40, Rate::per_second(1_000_000)).expect("valid")
}

fn limited() -> RateLimitLayer<MemoryStore> {
    let account = HeaderKey::new(http::HeaderName::from_static("x-account"));
    let per_account = Rule::new("per-account", plenty(), account).expect("valid");
    let per_peer = Rule::new("per-peer", plenty(), PeerIp::new()).expect("valid");
    RateLimitLayer::new(MemoryStore::new())
        .grpc("chirp.v1.Feed/*", per_account)
        .expect("a method")
        .grpc("chirp.v1.Feed/*", per_peer)
        .expect("a method")
}

async fn bare_server() -> Channel {
    let (listener, address) = tollgate_grpc_demo::bind(0).await.expect("a port");
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(tollgate_grpc_demo::feed::feed_server::FeedServer::new(
                tollgate_grpc_demo::FeedService,
            ))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
    });
    connect(address).await
}

async fn limited_server() -> Channel {
    let (listener, address) = tollgate_grpc_demo::bind(0).await.expect("a port");
    tokio::spawn(tollgate_grpc_demo::serve_with(listener, limited()));
    connect(address).await
}

async fn connect(address: std::net::SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{address}"))
        .expect("an address")
        .connect()
        .await
        .expect("connects")
}

/// Calls a second through `channel`: `TASKS` tasks of `CALLS` calls each.
async fn calls_per_second(channel: &Channel) -> f64 {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let mut client = FeedClient::new(channel.clone());
        tasks.spawn(async move {
            for _ in 0..CALLS {
                let mut request = tonic::Request::new(FeedRequest::default());
                let account = format!("account-{task}");
                request
                    .metadata_mut()
                    .insert("x-account", account.parse().expect("ascii"));
                client.get(request).await.expect("answered");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a load task");
    }
    (TASKS * CALLS) as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let rounds = std::env::args()
        .skip_while(|arg| arg != "--rounds")
        .nth(1)
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(5);
    // `cargo test --benches` runs benches in test mode: nothing to time there.
    if std::env::args().any(|arg| arg == "--test") {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let (bare, limited) = (bare_server().await, limited_server().await);
        // Warm both up.
        calls_per_second(&bare).await;
        calls_per_second(&limited).await;
        let mut ratios = Vec::new();
        println!("round  bare calls/s  limited calls/s  limited / bare");
        for round in 1..=rounds {
            let bare_rate = calls_per_second(&bare).await;
            let limited_rate = calls_per_second(&limited).await;
            let ratio = limited_rate / bare_rate;
            ratios.push(ratio);
            println!("{round:>5}  {bare_rate:>12.0}  {limited_rate:>15.0}  {ratio:>14.3}");
        }
        ratios.sort_by(f64::total_cmp);
        println!(
            "median {:.3}, range {:.3}-{:.3} (target >= 0.95)",
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1]
        );
    });
}
