//! With the in-memory store the allowed path boxes nothing and allocates only for keys and header
//! values. This test binary counts every allocation with a wrapping global allocator, so it holds
//! one test only.

// A global allocator must be an `unsafe impl`; this one only counts and delegates to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderName, Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_core::{MemoryStore, Quota, Rate};
use tollgate_tower::key::{HeaderKey, PeerIp};
use tollgate_tower::{RateLimitLayer, Rule};
use tower::{Layer, Service, service_fn};

struct CountingAllocator;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `dealloc`, and the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
fn an_allowed_request_allocates_only_its_keys_and_header_values() {
    let quota = Quota::token_bucket(1_000_000, Rate::per_second(1_000)).unwrap();
    let account = HeaderKey::new(HeaderName::from_static("x-account"));
    let layer = RateLimitLayer::new(MemoryStore::new())
        .rule(Rule::new("per-ip", quota, PeerIp::new()).unwrap())
        .rule(Rule::new("per-account", quota, account).unwrap());
    let mut service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let requests: Vec<Request<()>> = (0..101)
        .map(|_| {
            let mut request = Request::get("/")
                .header("x-account", "account-4821")
                .body(())
                .unwrap();
            request
                .extensions_mut()
                .insert(SocketAddr::from(([203, 0, 113, 7], 40_000)));
            request
        })
        .collect();
    let mut context = Context::from_waker(Waker::noop());
    let mut send = |request| {
        let mut future = std::pin::pin!(service.call(request));
        match future.as_mut().poll(&mut context) {
            Poll::Ready(response) => response.unwrap(),
            Poll::Pending => panic!("the in-memory path must answer at once"),
        }
    };
    let mut requests = requests.into_iter();
    // The first request stores the keys; later ones find them.
    assert_eq!(send(requests.next().unwrap()).status(), StatusCode::OK);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let mut responses = Vec::with_capacity(100);
    for request in requests {
        responses.push(send(request));
    }
    let per_request = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 100.0;
    assert!(
        responses
            .iter()
            .all(|response| response.status() == StatusCode::OK)
    );
    assert!(
        responses
            .iter()
            .all(|response| response.headers().contains_key("ratelimit"))
    );
    // Two keys (one allocation each); two header fields, each a string buffer plus the shared
    // handle `Bytes` puts around it; and the response's header map, which allocates its index
    // and entry tables on its first insert: 2 + 4 + 2 = 8. No boxed futures, no rule-set
    // copies, no other per-request buffers. (A stray one-off allocation over the 100 requests,
    // such as a lazily initialised global, is tolerated.)
    assert!(
        per_request < 8.5,
        "{per_request} allocations per allowed request"
    );
}
