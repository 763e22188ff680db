//! The blocked-caller cache and named stores through the layer: what an adversarial review
//! found, kept as regressions (an escalation block the cache must not hide; a misnamed store).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_core::testing::ManualClock;
use tollgate_core::{BlockedCache, MemoryStore, Quota, Rate, Store, Timestamp};
use tollgate_tower::key::PeerIp;
use tollgate_tower::{Escalation, RateLimitLayer, ResponseBody, Rule};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt, service_fn};

const HOUR: Duration = Duration::from_secs(3_600);

type Gateway = BoxCloneService<Request<()>, Response<ResponseBody<Empty<Bytes>>>, Infallible>;

/// 2 requests an hour per peer; more than 3 refusals in a minute block for 2 hours.
fn gateway<S: Store + Clone>(store: S, cache_blocked: bool) -> Gateway {
    let quota = Quota::token_bucket(2, Rate::every(HOUR)).expect("valid quota");
    let escalation =
        Escalation::new(3, Duration::from_secs(60), 2 * HOUR).expect("valid escalation");
    let rule = Rule::new("reads", quota, PeerIp::new())
        .expect("valid rule id")
        .cache_blocked(cache_blocked)
        .escalate(escalation)
        .expect("room for the derived rule ids");
    let service = RateLimitLayer::new(store)
        .rule(rule)
        .layer(service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
        }));
    BoxCloneService::new(service)
}

fn from(peer: [u8; 4]) -> Request<()> {
    let mut request = Request::get("/").body(()).expect("valid request");
    request
        .extensions_mut()
        .insert(SocketAddr::from((peer, 40_000)));
    request
}

async fn status_and_retry(service: &Gateway, peer: [u8; 4]) -> (StatusCode, Option<u64>) {
    let response = service
        .clone()
        .oneshot(from(peer))
        .await
        .expect("infallible");
    // Let the escalation's strike task (spawned) land.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let retry = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok()?.parse().ok());
    (response.status(), retry)
}

/// An escalated caller is blocked for 2 h: a gateway with the cache answers as one without it
/// (`Retry-After: 7200`, not the rule's own 3600), since a request with a block gate always
/// asks the store, and charges no strikes while blocked.
#[tokio::test]
async fn a_cached_refusal_never_hides_an_escalation_block() {
    let clock = ManualClock::new(Timestamp::from_secs(1_700_000_000));
    let memory = || MemoryStore::builder().clock(clock.clone()).build();
    let cached = gateway(BlockedCache::with_clock(memory(), clock.clone()), true);
    let twin = gateway(memory(), false);
    let attacker = [203, 0, 113, 7];

    let mut seen = Vec::new();
    for _ in 0..7 {
        let here = status_and_retry(&cached, attacker).await;
        let there = status_and_retry(&twin, attacker).await;
        seen.push((here, there));
    }
    for (at, (here, there)) in seen.iter().enumerate() {
        assert_eq!(
            here, there,
            "request {at}: the cached gateway answers {here:?}, the store's answer is {there:?} (all: {seen:?})"
        );
    }
}

/// A rule file naming a store the layer does not have is refused by `RuleFile::install` (and
/// by a `RuleWatcher`), at its `store` line, and the rules in force stay; taken as code rules
/// (`replace_rules`), the misnamed rule is counted in the default store — limited, never let
/// through.
#[cfg(feature = "config")]
#[tokio::test]
async fn a_misnamed_store_is_refused_by_install_and_counted_by_replace_rules() {
    use tollgate_core::{Item, Key, RuleId, Stores};
    use tollgate_tower::config::{Extractors, RuleFile};
    const RULES: &str = r#"[[rule]]
id = "login"
algorithm = "fixed_window"
limit = 2
window = "1h"
key = "global"
store = "hoem"
"#;
    let local = MemoryStore::new();
    let stores = Stores::new(local.clone())
        .with("home", MemoryStore::new())
        .expect("a valid name");
    let layer = RateLimitLayer::new(stores);
    let file = RuleFile::parse("rules.toml", RULES, &Extractors::new())
        .expect("parse has no store to ask, so it accepts the name");
    let refused = file.install(&layer).expect_err("no store is named hoem");
    assert!(refused.to_string().contains("rules.toml:7:"), "{refused}");
    assert_eq!(
        layer.current_rules().rules().count(),
        0,
        "nothing installed"
    );

    layer.replace_rules(file.rules().clone());
    let service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    for _ in 0..3 {
        let _ = service
            .clone()
            .oneshot(from([192, 0, 2, 1]))
            .await
            .expect("infallible");
    }
    let (rule, key) = (RuleId::new("login").unwrap(), Key::global());
    let quota = Quota::fixed_window(2, HOUR).unwrap();
    let probe = Item::new(&rule, quota, &key).with_cost(0);
    let left = local.peek(&probe).await.unwrap().remaining();
    assert_eq!(
        left, 0,
        "counted in the default store: limited, not let through"
    );
}
