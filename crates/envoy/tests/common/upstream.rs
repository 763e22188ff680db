//! What a real Envoy is put in front of: an axum server on 127.0.0.1:0 answering every request
//! 200, and a client that asks through Envoy.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use tokio::net::TcpListener;

/// The upstream: answers every request 200 `hello`, counting them.
#[derive(Debug, Clone)]
pub struct Upstream {
    address: SocketAddr,
    served: Arc<AtomicUsize>,
}

impl Upstream {
    /// Starts the server; it runs until the test's runtime ends.
    pub async fn start() -> Self {
        let served = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&served);
        let app = Router::new().fallback(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async { "hello" }
        });
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind the upstream");
        let address = listener.local_addr().expect("the upstream's address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { address, served }
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// How many requests reached it.
    pub fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

/// A client asking through Envoy (no proxy from the environment).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a client")
}

/// `GET url` with header `x-user: user`: the status.
pub async fn get_as(client: &reqwest::Client, url: &str, user: &str) -> u16 {
    client
        .get(url)
        .header("x-user", user)
        .send()
        .await
        .expect("an answer through Envoy")
        .status()
        .as_u16()
}

/// `GET url` as `user`: the status and the response's headers.
pub async fn get_with_headers(
    client: &reqwest::Client,
    url: &str,
    user: &str,
) -> (u16, reqwest::header::HeaderMap) {
    let response = client
        .get(url)
        .header("x-user", user)
        .send()
        .await
        .expect("an answer through Envoy");
    (response.status().as_u16(), response.headers().clone())
}
