//! Observers turned on from any layer value reach every rule set of the layer: a clone that
//! extends the rules and turns on stats, top refused callers or an observer of its own does so
//! for the base's rules too (the observers are shared by the values built from one `new`).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, Request, Response};
use http_body_util::Empty;
use tollgate_core::{Decision, Key, MemoryStore, Quota, RuleId};
use tollgate_tower::key::HeaderKey;
use tollgate_tower::observe::{Observer, RuleObserver};
use tollgate_tower::{KeyLogging, RateLimitLayer, Rule};
use tower::{Layer, ServiceExt, service_fn};

/// Counts every rule's decisions and refusals.
#[derive(Clone, Default)]
struct Seen {
    decided: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
}

impl Observer for Seen {
    fn rule(&self, _rule: &RuleId) -> Arc<dyn RuleObserver> {
        Arc::new(self.clone())
    }
}

impl RuleObserver for Seen {
    fn decided(&self, _decision: &Decision, _enforcing: bool, _refused_locally: bool) {
        self.decided.fetch_add(1, Ordering::Relaxed);
    }

    fn refused(&self, _key: &Key, _decision: &Decision, _enforced: bool, _logging: KeyLogging) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }
}

fn one_an_hour(policy: &str) -> Rule {
    let quota = Quota::fixed_window(1, Duration::from_secs(3_600)).expect("a valid quota");
    let key = HeaderKey::new(HeaderName::from_static("x-account"));
    Rule::new(policy, quota, key).expect("rule id")
}

#[tokio::test]
async fn observers_turned_on_from_an_extended_clone_watch_the_base_too() {
    let seen = Seen::default();
    let base = RateLimitLayer::new(MemoryStore::new()).rule(one_an_hour("base-rule"));
    let _extended = base
        .clone()
        .rule(one_an_hour("extended-rule"))
        .track_stats()
        .track_top_refused(8)
        .observe(seen.clone());
    let service = base.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    for _ in 0..3 {
        let request = Request::get("/")
            .header("x-account", "a")
            .body(())
            .expect("a request");
        let _ = service.clone().oneshot(request).await.expect("infallible");
    }
    assert_eq!(
        seen.decided.load(Ordering::Relaxed),
        3,
        "each decision seen"
    );
    assert_eq!(seen.refused.load(Ordering::Relaxed), 2, "each refusal seen");
    let rule = RuleId::new("base-rule").expect("valid");
    let stats = base.handle().stats(&rule).expect("tracked");
    assert_eq!(stats.since_start.allowed, 1);
    assert_eq!(stats.since_start.refused, 2);
    assert!(base.handle().top_refused(&rule, 5).is_some(), "tracked");
}
