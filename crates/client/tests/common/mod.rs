//! A real axum server on 127.0.0.1:0, limited by tollgate on tokio's clock (paused in the tests,
//! so waits of seconds take none), logging each request's arrival and answer; and a real
//! hyper-util client.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::Full;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tollgate_core::{Clock, MemoryStore, Timestamp};
use tollgate_tower::{RateLimitLayer, Rule};

/// tokio's clock as tollgate's: in a test with paused time, the server's limits follow it.
#[derive(Clone)]
pub struct TokioClock {
    origin: Instant,
}

impl TokioClock {
    pub fn new() -> Self {
        TokioClock {
            origin: Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed = u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX);
        Timestamp::from_secs(1_700_000_000).saturating_add_micros(elapsed)
    }
}

/// One request the server saw: when, what it answered, and the wait it gave: `Retry-After`, or
/// a `RateLimit` policy with nothing left (`r=0;t=N`).
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub at: Instant,
    pub status: u16,
    pub retry_after: Option<u64>,
    pub exhausted_for: Option<Duration>,
}

/// The server: its address and what it saw.
pub struct Server {
    pub base: String,
    pub arrivals: Arc<Mutex<Vec<Arrival>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    /// Serves `app` (its routes already limited as the test wants), logging every request.
    pub async fn start(app: Router) -> Server {
        let arrivals: Arc<Mutex<Vec<Arrival>>> = Arc::default();
        let app = app.layer(axum::middleware::from_fn_with_state(
            Arc::clone(&arrivals),
            log,
        ));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("its address"));
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the server runs");
        });
        Server {
            base,
            arrivals,
            task,
        }
    }

    /// A server whose `/feed` is limited by `rule`, counted in memory on tokio's clock.
    pub async fn limited(rule: Rule) -> Server {
        let store = MemoryStore::builder().clock(TokioClock::new()).build();
        let app = Router::new()
            .route("/feed", axum::routing::get(|| async { "ok" }))
            .layer(RateLimitLayer::new(store).rule(rule));
        Server::start(app).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().clone()
    }

    /// How many requests the server answered with `status`.
    pub fn answered(&self, status: u16) -> usize {
        self.arrivals()
            .iter()
            .filter(|a| a.status == status)
            .count()
    }
}

async fn log(
    State(arrivals): State<Arc<Mutex<Vec<Arrival>>>>,
    request: Request,
    next: Next,
) -> Response {
    let at = Instant::now();
    let response = next.run(request).await;
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok());
    arrivals.lock().push(Arrival {
        at,
        status: response.status().as_u16(),
        retry_after,
        exhausted_for: tollgate_client::exhausted_for(response.headers()),
    });
    response
}

/// A real HTTP/1 client (hyper-util's), as a tower service.
pub type HttpClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

pub fn http_client() -> HttpClient {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

/// `GET url` with an empty body.
pub fn get(url: &str) -> http::Request<Full<Bytes>> {
    http::Request::get(url)
        .body(Full::new(Bytes::new()))
        .expect("a request")
}

/// Every request came no earlier than the one before it said to wait (its `Retry-After`, or
/// its exhausted policy's `t`); panics naming the first that came early.
pub fn never_early(arrivals: &[Arrival]) {
    for pair in arrivals.windows(2) {
        let told = pair[0]
            .retry_after
            .map(Duration::from_secs)
            .or(pair[0].exhausted_for);
        if let Some(told) = told {
            let gap = pair[1].at - pair[0].at;
            assert!(
                gap >= told,
                "came back after {gap:?}, told {told:?}: {pair:?}"
            );
        }
    }
}

/// A route answering `refusal` the first `times` calls, then 200.
pub fn refusing(
    times: usize,
    refusal: fn() -> axum::response::Response,
) -> axum::routing::MethodRouter {
    let calls = Arc::new(AtomicUsize::new(0));
    let handler = move || {
        let calls = Arc::clone(&calls);
        async move {
            if calls.fetch_add(1, Ordering::SeqCst) < times {
                refusal()
            } else {
                "ok".into_response()
            }
        }
    };
    axum::routing::get(handler.clone())
        .post(handler.clone())
        .put(handler)
}

pub fn too_many(headers: &[(&'static str, &'static str)]) -> axum::response::Response {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.insert(*name, http::HeaderValue::from_static(value));
    }
    (StatusCode::TOO_MANY_REQUESTS, map).into_response()
}
