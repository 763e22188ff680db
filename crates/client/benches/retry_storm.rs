//! The retry-storm comparison: four clients each want 20 successes from the same
//! tollgate-limited route (a bucket of 5, one token back every 2 s), one after another on a real
//! axum server on loopback: naive immediate retry, a fixed 100 ms backoff, tower's retry with
//! exponential backoff (100 ms doubling, at most 10 s, no jitter), and this layer. For each:
//! requests sent per success, refusals the server answered, and the time to 20 successes.
//!
//! Time is tokio's, paused: waits of seconds take none, and the figures are the same on every
//! run (a 10 ms round trip is simulated for the immediate retry, which would otherwise spin).
//! The server sends `Retry-After` only (`RateLimit` headers off), so every client learns only
//! from refusals; with them on, the layer waits before it is refused (see the crate's tests).
//!
//! Run: `cargo bench -p tollgate-client --bench retry_storm`.

#![allow(clippy::print_stdout, reason = "a bench binary prints its table")]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body_util::Full;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tollgate_client::{RetryAfterLayer, RetryPolicy};
use tollgate_core::{Clock, MemoryStore, Quota, Rate, Timestamp};
use tollgate_tower::key::Global;
use tollgate_tower::{RateLimitLayer, Rule};
use tower::{Layer, Service, ServiceExt};

type HttpClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;
type HttpResponse = http::Response<hyper::body::Incoming>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Clone)]
struct TokioClock(Instant);

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed = u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX);
        Timestamp::from_secs(1_700_000_000).saturating_add_micros(elapsed)
    }
}

/// A fresh limited server; answers how many requests it refused so far, through the counter.
async fn server() -> (String, Arc<Mutex<(u64, u64)>>) {
    let quota = Quota::token_bucket(5, Rate::every(Duration::from_secs(2))).expect("valid");
    let rule = Rule::new("feed", quota, Global)
        .expect("valid")
        .disclose(false);
    let store = MemoryStore::builder()
        .clock(TokioClock(Instant::now()))
        .build();
    let seen: Arc<Mutex<(u64, u64)>> = Arc::default();
    let app = Router::new()
        .route("/feed", axum::routing::get(|| async { "ok" }))
        .layer(RateLimitLayer::new(store).rule(rule))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&seen),
            count,
        ));
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!(
        "http://{}/feed",
        listener.local_addr().expect("its address")
    );
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serves") });
    (url, seen)
}

/// Counts requests and refusals.
async fn count(
    State(seen): State<Arc<Mutex<(u64, u64)>>>,
    request: Request,
    next: Next,
) -> Response {
    let response = next.run(request).await;
    let mut seen = seen.lock();
    seen.0 += 1;
    seen.1 += u64::from(response.status() == 429);
    response
}

fn get(url: &str) -> http::Request<Full<Bytes>> {
    http::Request::get(url)
        .body(Full::new(Bytes::new()))
        .expect("a request")
}

fn http_client() -> HttpClient {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

/// Tower's retry with exponential backoff (100 ms doubling to 10 s), retrying 429s.
#[derive(Clone)]
struct Exponential {
    retries: u32,
}

impl
    tower::retry::Policy<
        http::Request<Full<Bytes>>,
        HttpResponse,
        hyper_util::client::legacy::Error,
    > for Exponential
{
    type Future = Pin<Box<dyn Future<Output = ()> + Send>>;

    fn retry(
        &mut self,
        _: &mut http::Request<Full<Bytes>>,
        result: &mut Result<HttpResponse, hyper_util::client::legacy::Error>,
    ) -> Option<Self::Future> {
        let refused = result
            .as_ref()
            .is_ok_and(|response| response.status() == 429);
        if !refused {
            return None;
        }
        let wait = Duration::from_millis(100)
            .saturating_mul(1 << self.retries.min(10))
            .min(Duration::from_secs(10));
        self.retries += 1;
        Some(Box::pin(tokio::time::sleep(wait)))
    }

    fn clone_request(
        &mut self,
        request: &http::Request<Full<Bytes>>,
    ) -> Option<http::Request<Full<Bytes>>> {
        let mut copy = http::Request::get(request.uri().clone());
        *copy.headers_mut().expect("a builder") = request.headers().clone();
        copy.body(request.body().clone()).ok()
    }
}

/// Sends until one succeeds with `send` (which may retry inside), waiting `between` after each
/// refusal it sees.
async fn twenty<F, Fut>(mut send: F, between: Option<Duration>) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<u16, BoxError>>,
{
    let started = Instant::now();
    let mut successes = 0;
    while successes < 20 {
        if send().await.expect("answers") == 200 {
            successes += 1;
        } else if let Some(wait) = between {
            tokio::time::sleep(wait).await;
        }
    }
    started.elapsed()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        println!(
            "{:<34} {:>18} {:>16} {:>22}",
            "client", "requests/success", "server refused", "time to 20 successes"
        );
        for name in [
            "naive immediate retry",
            "fixed 100 ms backoff",
            "tower retry, exponential",
            "tollgate-client",
        ] {
            let (url, seen) = server().await;
            let client = http_client();
            let elapsed = match name {
                "naive immediate retry" => {
                    twenty(
                        || call(client.clone(), &url),
                        Some(Duration::from_millis(10)),
                    )
                    .await
                }
                "fixed 100 ms backoff" => {
                    twenty(
                        || call(client.clone(), &url),
                        Some(Duration::from_millis(100)),
                    )
                    .await
                }
                "tower retry, exponential" => {
                    let retrying = tower::retry::RetryLayer::new(Exponential { retries: 0 })
                        .layer(client.clone());
                    twenty(|| call(retrying.clone(), &url), None).await
                }
                _ => {
                    let policy = RetryPolicy::default().max_retries(10);
                    let patient = RetryAfterLayer::new(policy).layer(client.clone());
                    twenty(|| call(patient.clone(), &url), None).await
                }
            };
            let (requests, refused) = *seen.lock();
            println!(
                "{:<34} {:>18.2} {:>16} {:>21.1}s",
                name,
                requests as f64 / 20.0,
                refused,
                elapsed.as_secs_f64()
            );
        }
    });
}

/// One request through `service`; its status.
async fn call<S>(service: S, url: &str) -> Result<u16, BoxError>
where
    S: Service<http::Request<Full<Bytes>>, Response = HttpResponse>,
    S::Error: Into<BoxError>,
{
    let response = service.oneshot(get(url)).await.map_err(Into::into)?;
    Ok(response.status().as_u16())
}
