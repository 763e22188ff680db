//! Time per request through the layer with 10 and with 10,000 exempt paths, and with 10 and
//! with 10,000 route rows: the paths and rows are looked up in a tree of their segments, so the
//! count should not show.
//!
//! Each request goes through a `RateLimitLayer` over the in-memory store around a service that
//! answers at once, polled once on this thread (no runtime, no network):
//!
//! * `exempt/N` — a request to the last of N exempt paths (`/internal/health-{i}`): skips
//!   limiting once found;
//! * `routes/N` — a request matching the last of N route rows (`POST /api/v1/items-{i}/{id}`,
//!   each its own rule with a global key), checked against its rule.
//!
//! The figure is the ratio of N = 10,000 to N = 10 in the same run (≤ 1.05 counts as the
//! same). Run: `cargo bench -p tollgate-tower --bench route_matching`.

use std::convert::Infallible;
use std::hint::black_box;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion};
use http::{Method, Request, Response};
use http_body_util::Empty;
use tollgate_core::{MemoryStore, Quota};
use tollgate_tower::key::Global;
use tollgate_tower::{RateLimitLayer, Rule, RuleSet};
use tower::{Layer, Service, service_fn};

const COUNTS: [usize; 2] = [10, 10_000];

fn quota() -> Quota {
    Quota::fixed_window(1 << 40, Duration::from_secs(86_400)).expect("valid")
}

/// Sends `uri` through `layer` around a service that answers at once, `iterations` times.
fn bench_layer(
    c: &mut Criterion,
    group: &str,
    n: usize,
    layer: RateLimitLayer<MemoryStore>,
    method: Method,
    uri: String,
) {
    let mut service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let mut context = Context::from_waker(Waker::noop());
    c.bench_with_input(BenchmarkId::new(group, n), &n, |b, _| {
        b.iter(|| {
            let request = Request::builder()
                .method(method.clone())
                .uri(&uri)
                .body(())
                .expect("a request");
            let mut future = std::pin::pin!(service.call(request));
            match future.as_mut().poll(&mut context) {
                Poll::Ready(response) => black_box(response.expect("answered")),
                Poll::Pending => panic!("the in-memory path answers at once"),
            }
        });
    });
}

/// A layer over the in-memory store enforcing `rules`.
fn layer_with(rules: RuleSet) -> RateLimitLayer<MemoryStore> {
    let layer = RateLimitLayer::new(MemoryStore::new());
    layer
        .handle()
        .replace_rules(rules)
        .expect("the in-memory store counts these rules");
    layer
}

fn exempt(c: &mut Criterion) {
    for n in COUNTS {
        let mut rules = RuleSet::new().rule(Rule::new("cap", quota(), Global).expect("valid"));
        for i in 0..n {
            rules = rules
                .exempt_path(&format!("/internal/health-{i}"))
                .expect("a valid pattern");
        }
        let layer = layer_with(rules);
        let uri = format!("/internal/health-{}", n - 1);
        bench_layer(c, "exempt", n, layer, Method::GET, uri);
    }
}

fn routes(c: &mut Criterion) {
    for n in COUNTS {
        let mut rules = RuleSet::new();
        for i in 0..n {
            let rule = Rule::new(&format!("items-{i}"), quota(), Global).expect("valid");
            rules = rules
                .route(Method::POST, &format!("/api/v1/items-{i}/{{id}}"), rule)
                .expect("a valid pattern");
        }
        let layer = layer_with(rules);
        let uri = format!("/api/v1/items-{}/42", n - 1);
        bench_layer(c, "routes", n, layer, Method::POST, uri);
    }
}

fn main() {
    let mut criterion = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    exempt(&mut criterion);
    routes(&mut criterion);
    criterion.final_summary();
}
