//! Chirp, the example gateway: a small social network's limits (reads, posting, exports,
//! follows, sign-ups, logins, one-time codes and partners, in `examples/rules/chirp.toml`; the
//! guide's first chapter tabulates them) enforced by one `RateLimitLayer` and five typed limits
//! in handlers, on an axum server.
//!
//! `cargo run -p chirp` serves on 127.0.0.1 with an in-memory store and prints a few `curl`
//! lines to try; `cargo run -p chirp -- --demo` drives it with a short scripted session instead
//! and exits 0 when every limit behaved as the table says. `REDIS_URL` (or `--redis URL`)
//! counts in Redis behind a `FallbackStore`; `ADMIN_TOKEN` mounts the admin API and status page
//! at `/admin` and Prometheus metrics at `/metrics`.

mod challenge;
pub mod demo;
mod handlers;
mod identity;
mod limits;
mod phone;

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::routing::{any, get, post};
use axum::{Extension, Router};
use tollgate::admin::{Admin, AdminToken, StoreHealth};
use tollgate::axum::Tollgate;
use tollgate::config::{Extractors, RuleWatcher};
use tollgate::redis::RedisStore;
use tollgate::tower::key::ExtensionKey;
use tollgate::tower::{QuotaRegistry, RateLimitLayer};
use tollgate::{FallbackStore, MemoryStore, RuleId, Store};

pub use challenge::challenge;
pub use identity::Account;
pub use limits::typed_limits;
pub use phone::Phone;

/// How to run the gateway.
#[derive(Debug, Clone)]
pub struct Options {
    /// The port on 127.0.0.1 (0: any free one).
    pub port: u16,
    /// The rule file (watched: edits apply without a restart).
    pub rules: PathBuf,
    /// Count in this Redis (behind a `FallbackStore`) instead of in memory.
    pub redis: Option<String>,
    /// Mount the admin API, status page and `/metrics`, accepting this token.
    pub admin_token: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            port: 3000,
            rules: PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../examples/rules/chirp.toml"
            )),
            redis: None,
            admin_token: None,
        }
    }
}

/// A gateway serving in the background.
pub struct Running {
    /// Where it listens.
    pub address: SocketAddr,
    /// Serves until dropped.
    _task: tokio::task::JoinHandle<()>,
    _watcher: RuleWatcher,
}

/// What can stop the gateway from starting.
pub type StartError = Box<dyn std::error::Error + Send + Sync>;

/// Starts the gateway: loads the rule file (it does not start on a bad one), binds, serves.
pub async fn start(options: &Options) -> Result<Running, StartError> {
    match &options.redis {
        None => serve(RateLimitLayer::new(MemoryStore::new()), options).await,
        Some(url) => {
            let redis = RedisStore::connect(url).await?;
            // 50 ms a call: generous for a Redis on the same network, and short enough that an
            // outage answers reads (open) and logins (closed) at once.
            let store = FallbackStore::builder(redis)
                .timeout(std::time::Duration::from_millis(50))
                .build();
            serve(RateLimitLayer::new(store), options).await
        }
    }
}

async fn serve<St: Store + StoreHealth>(
    layer: RateLimitLayer<St>,
    options: &Options,
) -> Result<Running, StartError> {
    let layer = layer.registry(QuotaRegistry::new()).track_top_refused(100);
    let watcher = RuleWatcher::start(&options.rules, extractors(), &layer)?;
    for (id, _) in limits::typed_limits() {
        let id = RuleId::new(id)?;
        if layer
            .handle()
            .registry()
            .and_then(|registry| registry.get(&id))
            .is_none()
        {
            return Err(format!(
                "{}: no [[limit]] sets {:?}, which a handler checks",
                options.rules.display(),
                id.as_str()
            )
            .into());
        }
    }
    let mut app = app(&layer);
    if let Some(token) = &options.admin_token {
        let admin = Admin::new(&layer, AdminToken::new("admin", token)?)
            .rule_file(&watcher)
            .insecure_cookie();
        app = app.merge(admin.router_at("/admin"));
        if let Ok(handle) = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()
        {
            let _ = layer.clone().metrics();
            app = app.route("/metrics", get(move || std::future::ready(handle.render())));
        }
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port)).await?;
    let address = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(error) = axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        {
            eprintln!("chirp: the server stopped: {error}");
        }
    });
    Ok(Running {
        address,
        _task: task,
        _watcher: watcher,
    })
}

/// Chirp's routes behind `layer` (whose rules and `[[limit]]` quotas come from the rule file),
/// with the stand-in identity and the typed limits' handle: the whole gateway but the socket.
/// The policy simulator drives this same router through service calls.
///
/// ```
/// use tollgate::{MemoryStore, tower::{QuotaRegistry, RateLimitLayer}};
///
/// let layer = RateLimitLayer::new(MemoryStore::new()).registry(QuotaRegistry::new());
/// let router: axum::Router = chirp::app(&layer);
/// # let _ = router;
/// ```
pub fn app<St: Store>(layer: &RateLimitLayer<St>) -> Router {
    Router::new()
        .route("/feed", get(handlers::feed))
        .route("/profiles/{id}", get(handlers::profile))
        .route("/posts", post(handlers::post))
        .route("/exports", get(handlers::export))
        .route("/users/{id}/follow", post(handlers::follow))
        .route("/signup", post(handlers::signup))
        .route("/login", post(handlers::login))
        .route("/otp", post(handlers::otp))
        .route("/partner/{*rest}", any(handlers::partner))
        .layer(layer.clone())
        .layer(axum::middleware::from_fn(identity::authenticate))
        .layer(Extension(Tollgate::from_layer(layer)))
}

/// What the rule file names and only code can define: the signed-in account, and the answer to
/// a refused sign-up — a challenge, in a problem body that does not say which limit was hit.
///
/// ```
/// let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/rules/chirp.toml"))?;
/// let file = tollgate::config::RuleFile::parse("chirp.toml", &text, &chirp::extractors())?;
/// assert!(file.limits().count() >= 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn extractors() -> Extractors {
    Extractors::new()
        .with(
            "account",
            ExtensionKey::new(|account: &Account| account.0.clone()),
        )
        .responder("challenge", |_refused| challenge())
}
