//! The top refused callers, fed through the layer: the heaviest callers of a rule over the last
//! hour, shown as keyed fingerprints, with shadow refusals counted too.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Empty;
use tollgate_core::{MemoryStore, Quota, RuleId};
use tollgate_tower::key::PeerIp;
use tollgate_tower::{RateLimitLayer, Rule};
use tower::{Layer, ServiceExt, service_fn};

async fn from(layer: &RateLimitLayer<MemoryStore>, last_octet: u8) {
    let service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let mut request = Request::new(());
    request
        .extensions_mut()
        .insert(SocketAddr::from(([203, 0, 113, last_octet], 4000)));
    service.oneshot(request).await.expect("infallible");
}

#[tokio::test]
async fn the_heaviest_refused_callers_are_listed_as_fingerprints() {
    let quota = Quota::fixed_window(1, Duration::from_secs(3600)).expect("valid");
    let layer = RateLimitLayer::new(MemoryStore::new())
        .rule(Rule::new("per-ip", quota, PeerIp::new()).expect("id"))
        .rule(
            Rule::new("watch", quota, PeerIp::new())
                .expect("id")
                .shadow(),
        )
        .track_top_refused(10);
    // Caller .1 is refused 30 times, .2 ten times, .3 once (each first request is allowed).
    for (octet, requests) in [(1, 31), (2, 11), (3, 2)] {
        for _ in 0..requests {
            from(&layer, octet).await;
        }
    }
    let rule = RuleId::new("per-ip").expect("id");
    let started = Instant::now();
    let report = loop {
        let report = layer.handle().top_refused(&rule, 2).expect("tracked");
        if report.refusals == 41 {
            break report;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never counted: {report:?}"
        );
        tokio::task::yield_now().await;
    };
    let counts: Vec<u64> = report.callers.iter().map(|caller| caller.count).collect();
    assert_eq!(
        counts,
        [30, 10],
        "the two heaviest, exact below k: {report:?}"
    );
    assert!(report.callers.iter().all(|caller| caller.error == 0));
    // Shown as the layer's key logging shows keys: a fingerprint, never the address.
    assert!(
        report
            .callers
            .iter()
            .all(|caller| !caller.caller.contains("203.0.113"))
    );

    // A shadow rule's would-be refusals are counted under it.
    let watch = RuleId::new("watch").expect("id");
    let started = Instant::now();
    let shadow = loop {
        let report = layer.handle().top_refused(&watch, 5).expect("tracked");
        if report.refusals == 41 {
            break report;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the shadow refusals were never counted: {report:?}"
        );
        tokio::task::yield_now().await;
    };
    assert_eq!(shadow.callers.len(), 3);
    assert_eq!(shadow.dropped, 0);
}
