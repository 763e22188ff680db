//! Two gateways, one count: two `RateLimitLayer`s — as on two machines — share their limits
//! through Redis, each behind a `FallbackStore` that says what every rule does if Redis goes.
//!
//! Needs a Redis server: `redis-server --port 6379` (Debian: `apt-get install redis-server`),
//! or set `TOLLGATE_REDIS_URL`. Then
//! `cargo run --features axum,redis --example shared_count`. Requests alternate between the
//! gateways (in process, no network) and each answer says which gateway gave it.

#![allow(clippy::print_stdout)] // An example talks to its reader.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use tollgate::redis::RedisStore;
use tollgate::tower::key::HeaderKey;
use tollgate::tower::{RateLimitLayer, Rule};
use tollgate::{FallbackStore, OnStoreFailure, Quota, Rate};
use tower::ServiceExt;

async fn gateway(url: &str) -> Result<Router, Box<dyn std::error::Error>> {
    let redis = RedisStore::builder().prefix("example").connect(url).await?;
    let store = FallbackStore::builder(redis)
        .timeout(Duration::from_millis(20))
        .build();
    // 5 searches a minute per API key; while Redis is down, each gateway counts on its own.
    let searches = Rule::new(
        "searches-per-key",
        Quota::token_bucket(5, Rate::per_minute(5))?,
        HeaderKey::new(axum::http::HeaderName::from_static("x-api-key")),
    )?
    .with_store_failure(OnStoreFailure::Local);
    Ok(Router::new()
        .route("/search", get(|| async { "results" }))
        .layer(RateLimitLayer::new(store).rule(searches)))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("TOLLGATE_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned());
    let gateways = match (gateway(&url).await, gateway(&url).await) {
        (Ok(first), Ok(second)) => [first, second],
        (Err(error), _) | (_, Err(error)) => {
            println!("cannot use Redis at {url}: {error}");
            println!("start one with `redis-server --port 6379`, or set TOLLGATE_REDIS_URL");
            return Ok(());
        }
    };
    // A fresh API key each run, so a second run starts from a full bucket.
    let api_key = format!("demo-{}", std::process::id());
    println!("7 searches with one API key, alternating gateways (limit: 5 a minute, shared):");
    for attempt in 0..7 {
        let which = attempt % 2;
        let request = Request::get("/search")
            .header("x-api-key", &api_key)
            .body(Body::empty())?;
        let response = gateways[which].clone().oneshot(request).await?;
        let detail = match response.status() {
            StatusCode::OK => "200".to_owned(),
            status => {
                let retry = response
                    .headers()
                    .get("retry-after")
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or("?");
                format!("{}, Retry-After: {retry}", status.as_u16())
            }
        };
        println!(
            "  search {} via gateway {}: {detail}",
            attempt + 1,
            which + 1
        );
    }
    Ok(())
}
