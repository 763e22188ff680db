//! A gateway whose limits live in a rule file: edits are applied as they are saved, `SIGHUP`
//! reloads on demand, and a file with mistakes is refused while the rules in force stay.
//!
//! `cargo run --features axum,config --example hot_reload -- [rules.toml]` (default:
//! `examples/rules/chirp.toml`). It prints the port and the rules' version, then serves. Edit the
//! file, or `kill -HUP <pid>`, and watch the log; `GET /rules` answers the rules in force as TOML.
//!
//! Chirp's `account` is the bearer token here (a stand-in for real authentication).

#![allow(clippy::print_stdout, reason = "an example prints what it does")]

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use tollgate::MemoryStore;
use tollgate::config::{Extractors, RuleWatcher};
use tollgate::tower::key::HeaderKey;
use tollgate::tower::{QuotaRegistry, RateLimitLayer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "examples/rules/chirp.toml".to_owned());
    let extractors = Extractors::new()
        .with(
            "account",
            HeaderKey::new(axum::http::HeaderName::from_static("authorization")),
        )
        .responder("challenge", |_refused| {
            let mut response =
                axum::http::Response::new(axum::body::Bytes::from_static(b"challenge"));
            *response.status_mut() = axum::http::StatusCode::FORBIDDEN;
            response
        });
    // The file's `[[limit]]`s set typed limits' quotas in this registry.
    let layer = RateLimitLayer::new(MemoryStore::new()).registry(QuotaRegistry::new());
    // A bad or missing file stops the gateway here, with every mistake at its line.
    let watcher = Arc::new(RuleWatcher::start(&path, extractors, &layer)?);

    let on_hangup = Arc::clone(&watcher);
    tokio::spawn(async move {
        let Ok(mut hangups) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        while hangups.recv().await.is_some() {
            match on_hangup.reload() {
                Ok(()) => println!("SIGHUP: rules version {:?}", on_hangup.status().version),
                Err(mistakes) => println!("SIGHUP: refused, the rules in force stay:\n{mistakes}"),
            }
        }
    });

    let rules = Arc::clone(&watcher);
    let app = Router::new()
        .route("/feed", get(|| async { "the feed\n" }))
        .route("/rules", get(move || async move { rules.to_toml() }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let port = listener.local_addr()?.port();
    println!(
        "serving on http://127.0.0.1:{port} (pid {})",
        std::process::id()
    );
    println!("rules from {path}, version {:?}", watcher.status().version);
    println!("try: curl -i -H 'authorization: Bearer ada' http://127.0.0.1:{port}/feed");
    println!("     curl http://127.0.0.1:{port}/rules");
    println!("     kill -HUP {}", std::process::id());
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
