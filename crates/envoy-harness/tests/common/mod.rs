//! What the harness's tests put around Envoy: an axum upstream on a loopback port, a port where
//! nothing listens, a client, and a rate limit service that records what Envoy asks
//! (recording_service.rs).

#![allow(dead_code, unreachable_pub)]

pub mod recording_service;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::Request;
use tokio::net::{TcpListener, TcpSocket};

/// What the upstream answers: its greeting and the path it was asked for.
pub fn upstream_body(path: &str) -> String {
    format!("hello from upstream: {path}")
}

/// The test's upstream: an axum server on 127.0.0.1:0 answering every request 200 with
/// [`upstream_body`], counting the requests it serves. It runs until the test's runtime ends.
#[derive(Debug, Clone)]
pub struct Upstream {
    address: SocketAddr,
    served: Arc<AtomicUsize>,
}

impl Upstream {
    /// Starts the server.
    pub async fn start() -> Self {
        let served = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&served);
        let app = Router::new().fallback(move |request: Request| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move { upstream_body(request.uri().path()) }
        });
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind the upstream");
        let address = listener.local_addr().expect("the upstream's address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { address, served }
    }

    /// Where it listens, for `EnvoyConfig::new`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// How many requests reached it.
    pub fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

/// A loopback port bound but not listening: a connection to it is refused, and no other
/// process can take it while the returned socket is held.
pub fn refusing_port() -> (TcpSocket, SocketAddr) {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket
        .bind((Ipv4Addr::LOCALHOST, 0).into())
        .expect("bind a port");
    let address = socket.local_addr().expect("its address");
    (socket, address)
}

/// `GET url`, answered: the status and the body. (No proxy from the environment: the request
/// goes to the loopback Envoy itself.)
pub async fn get(url: &str) -> (u16, String) {
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a client");
    let response = client
        .get(url)
        .send()
        .await
        .expect("an answer through Envoy");
    let status = response.status().as_u16();
    let body = response.text().await.expect("the body");
    (status, body)
}
