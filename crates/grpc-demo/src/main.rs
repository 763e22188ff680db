//! `grpc-demo`: the feed service of `proto/feed.proto`, limited per method by `rules.toml`, on
//! 127.0.0.1 (`--port N`, default 50051). Try it with any gRPC client; the sixth `Get` in a burst
//! for one `x-account` is `RESOURCE_EXHAUSTED` with a `RetryInfo`.
#![allow(clippy::print_stdout)] // A server talks to whoever started it.

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let port = match std::env::args().skip_while(|arg| arg != "--port").nth(1) {
        Some(port) => port.parse()?,
        None => 50051,
    };
    let (listener, address) = tollgate_grpc_demo::bind(port).await?;
    println!(
        "the feed service listens on http://{address} (chirp.v1.Feed/Get, chirp.v1.Feed/Follow)"
    );
    tokio::select! {
        served = tollgate_grpc_demo::serve(listener) => served,
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}
