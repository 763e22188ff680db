//! A gateway for the admin tests: a real axum server on 127.0.0.1:0 with a rule file watched,
//! the layer on `/hello`, and the admin router nested at `/admin`.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::path::PathBuf;

use tollgate_admin::{Admin, AdminToken};
use tollgate_config::{Extractors, RuleWatcher};
use tollgate_core::MemoryStore;
use tollgate_tower::RateLimitLayer;

/// The on-call token's secret.
pub const ONCALL: &str = "oncall-secret-0123456789abcdef";
/// A second person's secret.
pub const DEPLOY: &str = "deploy-secret-0123456789abcdef";

/// Two rules on `/hello`: 3 reads an hour per address, and 100 posts an hour.
pub const RULES: &str = r#"
[[rule]]
id = "reads"
match = { method = "GET", path = "/hello" }
algorithm = "fixed_window"
limit = 3
window = "1h"
key = "peer_ip"

[[rule]]
id = "posts"
match = { method = "POST", path = "/hello" }
algorithm = "fixed_window"
limit = 100
window = "1h"
key = "peer_ip"
"#;

/// A running gateway.
pub struct Gateway {
    pub url: String,
    pub layer: RateLimitLayer<MemoryStore>,
    pub watcher: RuleWatcher,
    pub rule_file: PathBuf,
    pub client: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// The admin API of `layer`: tokens `on-call` and `deploy`, changes over `watcher`'s file.
pub fn admin(layer: &RateLimitLayer<MemoryStore>, watcher: &RuleWatcher) -> Admin {
    Admin::new(layer, AdminToken::new("on-call", ONCALL).expect("token"))
        .token(AdminToken::new("deploy", DEPLOY).expect("token"))
        .rule_file(watcher)
        .insecure_cookie()
}

/// Serves `/hello` behind `layer` and `admin` at `/admin` (as `Admin::router_at` mounts it);
/// the base URL.
pub async fn serve<St: tollgate_core::Store + Send + Sync + 'static>(
    layer: RateLimitLayer<St>,
    admin: Admin,
) -> String {
    let app = axum::Router::new()
        .route(
            "/hello",
            axum::routing::get(|| async { "hello" }).post(|| async { "posted" }),
        )
        .layer(layer)
        .merge(admin.router_at("/admin"));
    serve_app(app).await
}

/// Serves `app` on 127.0.0.1:0, with each connection's peer address; the base URL.
pub async fn serve_app(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .expect("serve");
    });
    format!("http://{address}")
}

/// A gateway on a fresh rule file holding `rules`, its admin API as [`admin`] builds it.
pub async fn gateway(rules: &str) -> Gateway {
    gateway_with(rules, admin).await
}

/// A gateway on a fresh rule file holding `rules`, its admin API as `make_admin` builds it.
pub async fn gateway_with(
    rules: &str,
    make_admin: impl FnOnce(&RateLimitLayer<MemoryStore>, &RuleWatcher) -> Admin,
) -> Gateway {
    gateway_using(rules, Extractors::new(), make_admin).await
}

/// A gateway on a fresh rule file holding `rules`, which may name `extractors`, its admin API
/// as `make_admin` builds it.
pub async fn gateway_using(
    rules: &str,
    extractors: Extractors,
    make_admin: impl FnOnce(&RateLimitLayer<MemoryStore>, &RuleWatcher) -> Admin,
) -> Gateway {
    let dir = tempfile::tempdir().expect("tempdir");
    let rule_file = dir.path().join("rules.toml");
    std::fs::write(&rule_file, rules).expect("write rules");
    let layer = RateLimitLayer::new(MemoryStore::new()).track_top_refused(100);
    let watcher = RuleWatcher::start(&rule_file, extractors, &layer).expect("rules load");
    let url = serve(layer.clone(), make_admin(&layer, &watcher)).await;
    Gateway {
        url,
        layer,
        watcher,
        rule_file,
        client: reqwest::Client::new(),
        _dir: dir,
    }
}

impl Gateway {
    /// `GET /hello`'s status.
    pub async fn hello(&self) -> u16 {
        self.client
            .get(format!("{}/hello", self.url))
            .send()
            .await
            .expect("hello")
            .status()
            .as_u16()
    }

    /// Spends this client's three reads: three allowed, then refused.
    pub async fn use_up_reads(&self) {
        for _ in 0..3 {
            assert_eq!(self.hello().await, 200);
        }
        assert_eq!(self.hello().await, 429);
    }

    /// An admin request with the on-call token.
    pub fn admin(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}/admin{path}", self.url))
            .bearer_auth(ONCALL)
    }

    /// Sends `request`; its status and JSON body.
    pub async fn json(request: reqwest::RequestBuilder) -> (u16, serde_json::Value) {
        let response = request.send().await.expect("admin request");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
        (status, body)
    }
}
