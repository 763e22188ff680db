//! Hostile and careless answers, and careless settings, as an adversarial review tried them
//! (kept as regressions): mock tower services on paused tokio time, so every instant is exact.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use parking_lot::Mutex;
use tokio::time::Instant;
use tollgate_client::{
    Backoff, CoolDowns, CoolingDown, Jitter, RetryAfterLayer, RetryPolicy, WhenCooling,
};
use tower::{Layer, ServiceExt, service_fn};

type Log = Arc<Mutex<Vec<(String, Duration)>>>;

fn answer(status: u16, headers: &[(&str, &str)]) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::from_u16(status).expect("valid in the test");
    for (name, value) in headers {
        response.headers_mut().append(
            http::HeaderName::from_bytes(name.as_bytes()).expect("valid in the test"),
            http::HeaderValue::from_str(value).expect("valid in the test"),
        );
    }
    response
}

fn get(uri: &str) -> Request<Full<Bytes>> {
    Request::get(uri)
        .body(Full::new(Bytes::new()))
        .expect("valid in the test")
}

/// A request waiting for a host's cool-down waits longer when the host has since asked for a
/// longer one.
#[tokio::test(start_paused = true)]
async fn a_request_waiting_for_a_cool_down_honours_a_later_longer_one() {
    let start = Instant::now();
    let log: Log = Arc::default();
    let seen = Arc::clone(&log);
    let server = service_fn(move |request: Request<Full<Bytes>>| {
        let seen = Arc::clone(&seen);
        async move {
            let path = request.uri().path().to_owned();
            seen.lock().push((path.clone(), start.elapsed()));
            Ok::<_, Infallible>(match path.as_str() {
                "/a" => answer(429, &[("retry-after", "2")]),
                "/slow" => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    answer(429, &[("retry-after", "10")])
                }
                _ => answer(200, &[]),
            })
        }
    });
    let policy = RetryPolicy::default().jitter(Jitter::NONE).max_retries(0);
    let client = RetryAfterLayer::new(policy).layer(server);
    let slow = tokio::spawn(client.clone().oneshot(get("http://h/slow")));
    let a = tokio::spawn(client.clone().oneshot(get("http://h/a")));
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Host said "wait until t=2"; at t=1 it says "wait until t=11".
    client
        .clone()
        .oneshot(get("http://h/b"))
        .await
        .expect("valid in the test");
    let _ = (slow.await, a.await);
    let b = log
        .lock()
        .iter()
        .find(|(p, _)| p == "/b")
        .expect("valid in the test")
        .1;
    assert!(
        b >= Duration::from_secs(11),
        "/b sent at {b:?}, host said wait until 11 s"
    );
}

/// Route holds on many paths never push a host's cool-down out of a full table.
#[tokio::test(start_paused = true)]
async fn route_holds_on_many_paths_evict_the_host_cool_down() {
    let start = Instant::now();
    let log: Log = Arc::default();
    let seen = Arc::clone(&log);
    let server = service_fn(move |request: Request<Full<Bytes>>| {
        let seen = Arc::clone(&seen);
        async move {
            let path = request.uri().path().to_owned();
            seen.lock().push((path.clone(), start.elapsed()));
            Ok::<_, Infallible>(if path == "/first" {
                answer(429, &[("retry-after", "30")])
            } else if path.starts_with("/users/") {
                // In flight when the 429 comes; a per-id policy: this id is spent for 59 s.
                tokio::time::sleep(Duration::from_secs(1)).await;
                answer(200, &[("ratelimit", r#""per-id";r=0;t=59"#)])
            } else {
                answer(200, &[])
            })
        }
    });
    let policy = RetryPolicy::default()
        .max_retries(0)
        .cool_downs(CoolDowns::new(64))
        .when_cooling(WhenCooling::FailFast);
    let client = RetryAfterLayer::new(policy).layer(server);
    let users: Vec<_> = (0..64)
        .map(|id| tokio::spawn(client.clone().oneshot(get(&format!("http://h/users/{id}")))))
        .collect();
    tokio::time::sleep(Duration::from_millis(10)).await;
    client
        .clone()
        .oneshot(get("http://h/first"))
        .await
        .expect("valid in the test");
    for user in users {
        user.await
            .expect("valid in the test")
            .expect("valid in the test");
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let result = client.clone().oneshot(get("http://h/next")).await;
    assert!(
        result.is_err_and(|e| e.is::<CoolingDown>()),
        "the host said wait 30 s at t=0; /next was sent: {:?}",
        log.lock().last()
    );
}

/// "No cap" (`max_wait(Duration::MAX)`) with a huge Retry-After (or `t=`) does not panic.
#[tokio::test(start_paused = true)]
async fn no_cap_and_a_huge_retry_after_does_not_panic() {
    for header in [
        ("retry-after", "18446744073709551615"),
        ("ratelimit", r#""p";r=0;t=999999999999999"#),
    ] {
        let server = service_fn(move |_r: Request<Full<Bytes>>| async move {
            Ok::<_, Infallible>(answer(
                200 + 229 * u16::from(header.0 == "retry-after"),
                &[header],
            ))
        });
        let policy = RetryPolicy::default()
            .max_wait(Duration::MAX)
            .max_retries(0);
        let client = RetryAfterLayer::new(policy).layer(server);
        let task = tokio::spawn(client.oneshot(get("http://h/x")));
        assert!(task.await.is_ok(), "{header:?} panicked the client");
    }
}

/// `Jitter::apply` and `Backoff::wait` stay bounded, without a panic, for any duration.
#[test]
fn jitter_and_backoff_do_not_panic_on_large_durations() {
    let huge = Duration::from_secs(u64::MAX);
    let jitter = std::panic::catch_unwind(|| Jitter::new(1.0, Duration::MAX).apply(huge, 0.5));
    assert!(jitter.is_ok(), "Jitter::apply panicked");
    let backoff = std::panic::catch_unwind(|| Backoff::new(huge, huge).wait(0, 0.999_999_999));
    assert!(backoff.is_ok(), "Backoff::wait panicked");
}

/// The cool-down key is the host and port: userinfo never shows (not in `CoolingDown`, not in
/// events), and an explicit default port is the same host.
#[tokio::test(start_paused = true)]
async fn the_cool_down_key_is_the_host_not_the_authority() {
    let server = service_fn(|request: Request<Full<Bytes>>| async move {
        Ok::<_, Infallible>(if request.uri().path() == "/first" {
            answer(429, &[("retry-after", "30")])
        } else {
            answer(200, &[])
        })
    });
    let policy = RetryPolicy::default()
        .max_retries(0)
        .when_cooling(WhenCooling::FailFast);
    let client = RetryAfterLayer::new(policy).layer(server);
    client
        .clone()
        .oneshot(get("http://alice:s3cret@API.example:80/first"))
        .await
        .expect("valid in the test");
    let same_host = client.clone().oneshot(get("http://api.example/next")).await;
    let err = client
        .clone()
        .oneshot(get("http://alice:s3cret@api.example:80/next"))
        .await
        .expect_err("cooling");
    assert!(
        !err.to_string().contains("s3cret"),
        "leaks the password: {err}"
    );
    assert!(
        same_host.is_err(),
        "api.example:80 and api.example did not share the cool-down"
    );
}

/// Retry-After: 0 (or a past date, or `t=0`) is never an immediate loop: the backoff spaces
/// the retries.
#[tokio::test(start_paused = true)]
async fn retry_after_zero_is_not_an_immediate_loop() {
    let start = Instant::now();
    let log: Log = Arc::default();
    let seen = Arc::clone(&log);
    let server = service_fn(move |_r: Request<Full<Bytes>>| {
        let seen = Arc::clone(&seen);
        async move {
            seen.lock().push((String::new(), start.elapsed()));
            Ok::<_, Infallible>(answer(429, &[("retry-after", "0")]))
        }
    });
    let client = RetryAfterLayer::new(RetryPolicy::default()).layer(server);
    client
        .oneshot(get("http://h/x"))
        .await
        .expect("valid in the test");
    let at: Vec<_> = log.lock().iter().map(|(_, at)| *at).collect();
    assert!(
        at.windows(2).all(|w| w[1] > w[0]),
        "{} sends at {:?}: an immediate retry loop",
        at.len(),
        at
    );
}

/// A body that says it is 1 byte long and streams 1 MiB.
struct Liar(usize);

impl From<Bytes> for Liar {
    fn from(bytes: Bytes) -> Self {
        Liar(bytes.len())
    }
}

impl Body for Liar {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.0 == 0 {
            return Poll::Ready(None);
        }
        let n = self.0.min(64 * 1024);
        self.0 -= n;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![0; n])))))
    }
    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(1)
    }
}

/// The body limit does not trust `size_hint`: a body under-reporting its size is not buffered
/// past the limit.
#[tokio::test(start_paused = true)]
async fn the_body_limit_does_not_trust_size_hint() {
    let sizes: Arc<Mutex<Vec<usize>>> = Arc::default();
    let seen = Arc::clone(&sizes);
    let server = service_fn(move |request: Request<Liar>| {
        let seen = Arc::clone(&seen);
        async move {
            seen.lock().push(request.into_body().0);
            Ok::<_, Infallible>(answer(429, &[("retry-after", "1")]))
        }
    });
    let client = RetryAfterLayer::new(RetryPolicy::default().max_retries(1)).layer(server);
    let request = Request::put("http://h/x")
        .body(Liar(1 << 20))
        .expect("valid in the test");
    let _ = client.oneshot(request).await;
    let sizes = sizes.lock().clone();
    assert!(
        sizes.iter().all(|&n| n <= 64 * 1024) || sizes.len() == 1,
        "buffered and re-sent past max_body: {sizes:?}"
    );
}

/// Requests without an authority use their `Host` header; one origin's 429 does not hold
/// another's.
#[tokio::test(start_paused = true)]
async fn requests_without_an_authority_do_not_share_one_cool_down() {
    // Inner stack routes by the `Host` header (as a base-URL/AddOrigin layer would).
    let server = service_fn(|request: Request<Full<Bytes>>| async move {
        let host = request.headers()["host"]
            .to_str()
            .expect("valid in the test")
            .to_owned();
        Ok::<_, Infallible>(if host == "busy.example" {
            answer(429, &[("retry-after", "30")])
        } else {
            answer(200, &[])
        })
    });
    let policy = RetryPolicy::default()
        .max_retries(0)
        .when_cooling(WhenCooling::FailFast);
    let client = RetryAfterLayer::new(policy).layer(server);
    let to = |host: &str| {
        Request::get("/x")
            .header("host", host)
            .body(Full::new(Bytes::new()))
            .expect("valid in the test")
    };
    client
        .clone()
        .oneshot(to("busy.example"))
        .await
        .expect("valid in the test");
    let other = client.clone().oneshot(to("idle.example")).await;
    assert!(
        other.is_ok(),
        "idle.example held by busy.example's 429: {other:?}"
    );
}
