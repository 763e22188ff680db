//! What the facade's HTTP and Redis tests share: a store with short deadlines on a test server, a real
//! axum server on a free loopback port, and a client that goes straight to it. Each test file
//! uses some of it.
#![allow(dead_code, unused_imports)]

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
#[cfg(feature = "redis")]
use tollgate::redis::{ConnectionSettings, RedisStore};
#[cfg(feature = "redis")]
use tollgate_redis_harness::RedisServer;

/// A store on `server` whose connections and answers time out after 200 ms.
#[cfg(feature = "redis")]
pub(crate) async fn redis_store(server: &RedisServer) -> RedisStore {
    RedisStore::builder()
        .settings(ConnectionSettings {
            connect_timeout: Duration::from_millis(200),
            response_timeout: Duration::from_millis(200),
        })
        .connect(&server.url())
        .await
        .expect("a valid redis address")
}

/// Serves `app` on 127.0.0.1 and a free port, with each request's peer as `ConnectInfo`;
/// answers its base URL, `http://127.0.0.1:PORT`.
pub(crate) async fn serve(app: Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let service = app.into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, service).await.expect("serve");
    });
    format!("http://{addr}")
}

/// A client that goes straight to loopback, whatever proxy the environment names.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}
