//! A service that exposes its limiter's metrics for Prometheus at `/metrics`.
//!
//! `cargo run --features axum,metrics --example metrics` serves on 127.0.0.1 (the port is
//! printed): `GET /` is limited to 5 a minute per client, `GET /metrics` answers the
//! Prometheus text format (`tollgate_checks_total{rule="per-client",outcome="allowed"}` and the
//! rest; see `tollgate::core::metrics`). The recorder is installed before the layer is built:
//! the layer makes its counters when its rules are installed.
//!
//! To send the same metrics to OpenTelemetry instead, install an OpenTelemetry `metrics`
//! recorder (such as `metrics-exporter-opentelemetry`) in place of the Prometheus one, or let
//! the OpenTelemetry Collector scrape this endpoint with its `prometheus` receiver.

#![allow(clippy::print_stdout, reason = "an example prints where it listens")]

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tollgate::tower::RateLimitLayer;
use tollgate::tower::Rule;
use tollgate::tower::key::PeerIp;
use tollgate::{MemoryStore, Quota};

/// The service: a limited greeting and the metrics page. `metrics` renders the recorder the
/// process installed.
pub(crate) fn app(metrics: PrometheusHandle) -> Result<Router, Box<dyn std::error::Error>> {
    let store = MemoryStore::new();
    let per_client = Rule::new(
        "per-client",
        Quota::fixed_window(5, Duration::from_secs(60))?,
        PeerIp::new(),
    )?;
    let layer = RateLimitLayer::new(store.clone())
        .rule(per_client)
        .metrics();
    let limited = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(layer);
    Ok(limited.route(
        "/metrics",
        get(move || {
            // Key counts are read when scraped, not per request.
            store.publish_metrics();
            let page = metrics.render();
            async move { page }
        }),
    ))
}

/// Store latencies from 100 µs to a second: a `FallbackStore`'s deadline is a few milliseconds.
const STORE_SECONDS_BUCKETS: [f64; 9] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.1, 1.0,
];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Buckets for the store's latency, so it is exported as a histogram (`_bucket` series, what
    // the guide's dashboard and alerts read) rather than the exporter's default summary.
    let metrics = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(tollgate::core::metrics::STORE_SECONDS.to_owned()),
            &STORE_SECONDS_BUCKETS,
        )?
        .install_recorder()?;
    let app = app(metrics)?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let port = listener.local_addr()?.port();
    println!("serving on http://127.0.0.1:{port}");
    println!(
        "try: for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:{port}/; done"
    );
    println!("     curl http://127.0.0.1:{port}/metrics");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
