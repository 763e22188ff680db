//! Time per request through a concurrency rule (a slot taken before the service runs and given
//! back when the response is dropped) against a rate rule, and against tower's own
//! `ConcurrencyLimitLayer` (one semaphore for the whole service, not per key): the in-process
//! floor for "N at once".
//!
//! Each request goes around a service that answers at once, polled once on this thread (no
//! runtime, no network), and its response is dropped before the next:
//!
//! * `bare` — the service alone;
//! * `tower_concurrency_limit` — behind `tower::limit::ConcurrencyLimitLayer` (`poll_ready`
//!   takes a permit, the response future gives it back);
//! * `rate` — behind a `RateLimitLayer` over the in-memory store with one token-bucket rule;
//! * `concurrency` — the same layer with one concurrency rule (the check takes the slot, the
//!   response's body gives it back by refunding its receipt at once);
//! * `settled` — the same layer with the rate rule settled after the response: an estimate of
//!   1 taken after the caller's debt, and the `x-used: 2` the service answers with charged when
//!   the response is dropped (one more unit, as debt).
//!
//! Both rules use one global key. Run: `cargo bench -p tollgate-tower --bench concurrency`;
//! the figures are ratios of the same run (BENCHMARKS.md).

use std::convert::Infallible;
use std::hint::black_box;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use criterion::Criterion;
use http::{Request, Response};
use http_body_util::Empty;
use tollgate_core::{MemoryStore, Quota, Rate};
use tollgate_tower::key::Global;
use tollgate_tower::{RateLimitLayer, Rule, SettleFrom};
use tower::limit::ConcurrencyLimitLayer;
use tower::{Layer, Service, service_fn};

/// More than any bench could hold or spend.
const PLENTY: u64 = 1 << 40;

/// Times one request at a time through `service`.
fn bench<S>(c: &mut Criterion, name: &str, mut service: S)
where
    S: Service<Request<()>>,
    S::Error: std::fmt::Debug,
{
    let mut context = Context::from_waker(Waker::noop());
    c.bench_function(name, |b| {
        b.iter(|| {
            match service.poll_ready(&mut context) {
                Poll::Ready(ready) => ready.expect("ready"),
                Poll::Pending => panic!("never full"),
            }
            let request = Request::builder()
                .uri("/export")
                .body(())
                .expect("a request");
            let mut future = std::pin::pin!(service.call(request));
            match future.as_mut().poll(&mut context) {
                // Dropped here: a concurrency rule's slot comes back with the response.
                Poll::Ready(response) => drop(black_box(response.expect("answered"))),
                Poll::Pending => panic!("the in-memory path answers at once"),
            }
        });
    });
}

fn answer_at_once() -> impl Service<
    Request<()>,
    Response = Response<Empty<Bytes>>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Empty<Bytes>>, Infallible>>,
> + Clone {
    service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new())) })
}

fn answer_used_two() -> impl Service<
    Request<()>,
    Response = Response<Empty<Bytes>>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Empty<Bytes>>, Infallible>>,
> + Clone {
    service_fn(|_: Request<()>| async {
        let mut response = Response::new(Empty::<Bytes>::new());
        response
            .headers_mut()
            .insert("x-used", http::HeaderValue::from_static("2"));
        Ok::<_, Infallible>(response)
    })
}

fn main() {
    let mut criterion = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let rate = Quota::token_bucket(PLENTY, Rate::per_second(1_000_000)).expect("valid");
    // The largest concurrency limit: each request gives its slot back before the next.
    let slots = Quota::concurrency(tollgate_core::quota::MAX_LOG_LIMIT).expect("valid");
    let layer = |quota| {
        RateLimitLayer::new(MemoryStore::new())
            .rule(Rule::new("bench", quota, Global).expect("a valid rule id"))
    };
    bench(&mut criterion, "concurrency/bare", answer_at_once());
    bench(
        &mut criterion,
        "concurrency/tower_concurrency_limit",
        ConcurrencyLimitLayer::new(1 << 20).layer(answer_at_once()),
    );
    bench(
        &mut criterion,
        "concurrency/rate",
        layer(rate).layer(answer_at_once()),
    );
    bench(
        &mut criterion,
        "concurrency/concurrency",
        layer(slots).layer(answer_at_once()),
    );
    let settled = Rule::new("bench", rate, Global)
        .expect("a valid rule id")
        .settle(SettleFrom::header(http::HeaderName::from_static("x-used")));
    bench(
        &mut criterion,
        "concurrency/settled",
        RateLimitLayer::new(MemoryStore::new())
            .rule(settled)
            .layer(answer_used_two()),
    );
    criterion.final_summary();
}
