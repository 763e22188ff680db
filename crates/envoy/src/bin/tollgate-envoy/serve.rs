//! `serve`: the gRPC services, `/metrics`, the rule file followed, and a clean stop.

use std::net::SocketAddr;
use std::process::ExitCode;

use tokio::net::TcpListener;
use tollgate_config::{Extractors, RuleWatcher};
use tollgate_envoy::envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::RateLimitQuotaServiceServer;
use tollgate_envoy::{QuotaService, RateLimitService};
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;

use crate::args::Settings;
use crate::incoming::incoming;
use crate::store::Counted;

/// Runs the service until SIGTERM or Ctrl-C; exit 1 when it cannot start (a bad or missing rule
/// file, a Redis URL that cannot be used, a port taken), saying why. Redis down is not one: the
/// rules' failure policies answer until it is back.
pub(crate) fn run(settings: Settings) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return crate::fail(&format!("cannot start a tokio runtime: {error}")),
    };
    match runtime.block_on(serve(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => crate::fail(&format!("tollgate-envoy: {why}")),
    }
}

async fn serve(settings: Settings) -> Result<(), String> {
    if let Some(address) = settings.metrics {
        serve_metrics(address).await?;
    }
    let counted = Counted::connect(&settings).await?;
    let watcher = counted
        .service
        .watch(&settings.rules, Extractors::new())
        .map_err(|error| format!("{error}"))?;
    let reload = reload_on_hangup(watcher);
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<RateLimitServiceServer<RateLimitService>>()
        .await;
    reporter
        .set_serving::<RateLimitQuotaServiceServer<QuotaService>>()
        .await;
    let listener = TcpListener::bind(settings.listen)
        .await
        .map_err(|error| format!("cannot listen on {}: {error}", settings.listen))?;
    let address = listener
        .local_addr()
        .map_err(|error| format!("cannot read the listening address: {error}"))?;
    announce(&format!(
        "serving Envoy's rate limit service (and quota service) on {address}"
    ));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tonic::transport::Server::builder()
        .add_service(health)
        .add_service(counted.service.server())
        .add_service(counted.service.quota_service().server())
        .serve_with_incoming_shutdown(incoming(listener), async {
            let _ = stopped.await;
        });
    tokio::pin!(server);
    let served = tokio::select! {
        served = &mut server => served,
        () = stop_signal() => {
            tracing::info!(target: "tollgate::envoy", drain = ?settings.drain, "stopping: no new calls; calls in flight finish");
            reporter
                .set_not_serving::<RateLimitServiceServer<RateLimitService>>()
                .await;
            reporter
                .set_not_serving::<RateLimitQuotaServiceServer<QuotaService>>()
                .await;
            let _ = stop.send(());
            // Envoy keeps its connection open: the drain bounds the wait for it to go.
            match tokio::time::timeout(settings.drain, &mut server).await {
                Ok(served) => served,
                Err(_) => {
                    tracing::info!(target: "tollgate::envoy", "connections still open after the drain; closing them");
                    Ok(())
                }
            }
        }
    };
    reload.abort();
    counted.give_back().await;
    announce("stopped");
    served.map_err(|error| format!("the gRPC server failed: {error}"))
}

/// Prometheus' text format at `http://address/metrics`, from now on.
async fn serve_metrics(address: SocketAddr) -> Result<(), String> {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|error| format!("cannot install the metrics recorder: {error}"))?;
    let listener = TcpListener::bind(address)
        .await
        .map_err(|error| format!("cannot listen on {address} for /metrics: {error}"))?;
    let bound = listener
        .local_addr()
        .map_err(|error| format!("cannot read the metrics address: {error}"))?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || std::future::ready(handle.render())),
    );
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(target: "tollgate::envoy", %error, "the metrics endpoint stopped");
        }
    });
    announce(&format!("serving /metrics on {bound}"));
    Ok(())
}

/// Reads the rule file again on SIGHUP (changes are followed anyway; this is for file systems
/// that do not report them).
fn reload_on_hangup(watcher: RuleWatcher) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Ok(mut hangups) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        while hangups.recv().await.is_some() {
            if let Err(errors) = watcher.reload() {
                tracing::error!(target: "tollgate::envoy", "rule file refused on SIGHUP, the rules in force stay:\n{errors}");
            }
        }
    })
}

/// SIGTERM (how Kubernetes stops a pod) or Ctrl-C.
async fn stop_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terms) => {
                terms.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// One line on standard output: what a supervisor or a test reads (the bound addresses).
fn announce(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout(), "tollgate-envoy: {text}");
}
