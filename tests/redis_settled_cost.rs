//! Costs settled after the response, on a real redis-server over real HTTP: a debt run up on
//! one gateway is paid before another gateway admits the caller, and a settlement made while
//! Redis is down follows each rule's failure policy (a local rule owes in the gateway's memory,
//! an open one owes nothing).

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::sync::{Semaphore, watch};
use tollgate::core::{FallbackStore, Item, Key, RuleId, Store};
use tollgate::tower::key::Global;
use tollgate::tower::{RateLimitLayer, Rule, SettleFrom};
use tollgate::{OnStoreFailure, Quota, Rate};
use tollgate_redis_harness::RedisServer;

const LIMIT: u64 = 500;
const ESTIMATE: u64 = 100;

fn quota() -> Quota {
    // 500 an hour: what comes back while a test runs is far below one unit's worth of checks.
    Quota::token_bucket(LIMIT, Rate::per_hour(LIMIT)).expect("valid")
}

fn tokens(policy: OnStoreFailure) -> Rule {
    Rule::new("tokens", quota(), Global)
        .expect("valid id")
        .cost(ESTIMATE)
        .settle(SettleFrom::header(axum::http::HeaderName::from_static(
            "x-tokens-used",
        )))
        .with_store_failure(policy)
}

#[derive(serde::Deserialize)]
struct Used {
    used: u64,
}

/// Handlers in `/work` now, and permits that let them answer (`None`: answer at once).
#[derive(Clone)]
struct Gate {
    running: watch::Sender<usize>,
    open: Option<Arc<Semaphore>>,
}

impl Gate {
    fn new(held: bool) -> Self {
        Gate {
            running: watch::channel(0).0,
            open: held.then(|| Arc::new(Semaphore::new(0))),
        }
    }

    async fn until_running(&self, count: usize) {
        let mut seen = self.running.subscribe();
        seen.wait_for(|now| *now == count)
            .await
            .expect("sender lives");
    }
}

/// A gateway over `store` whose `/work?used=N` reports N tokens used in `x-tokens-used`.
async fn gateway<S: Store>(store: S, policy: OnStoreFailure, gate: Gate) -> String {
    let work = move |Query(Used { used }): Query<Used>| {
        let gate = gate.clone();
        async move {
            gate.running.send_modify(|now| *now += 1);
            if let Some(open) = &gate.open {
                open.acquire().await.expect("semaphore lives").forget();
            }
            gate.running.send_modify(|now| *now -= 1);
            ([("x-tokens-used", used.to_string())], "answer")
        }
    };
    let app = Router::new()
        .route("/work", get(work))
        .layer(RateLimitLayer::new(store).rule(tokens(policy)));
    common::serve(app).await
}

/// What the caller has left in Redis (0 while it owes).
async fn remaining_in_redis(server: &RedisServer) -> u64 {
    let store = common::redis_store(server).await;
    let (rule, key) = (RuleId::new("tokens").expect("valid"), Key::global());
    let item = Item::new(&rule, quota(), &key).with_cost(0);
    store.peek(&item).await.expect("redis answers").remaining()
}

async fn until<F: Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        while !done().await {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting until {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debt_run_up_on_one_gateway_is_paid_before_another_admits_the_caller() {
    let server = RedisServer::start().expect("start redis-server");
    let policy = OnStoreFailure::Open;
    let a = gateway(common::redis_store(&server).await, policy, Gate::new(false)).await;
    let b = gateway(common::redis_store(&server).await, policy, Gate::new(false)).await;
    let client = common::client();

    let first = client
        .get(format!("{a}/work?used=900"))
        .send()
        .await
        .expect("a answers");
    assert_eq!(first.status(), StatusCode::OK);
    // 100 up front, 800 more settled: 400 fit, 400 are owed.
    until("the settlement reached redis", || async {
        remaining_in_redis(&server).await == 0
    })
    .await;

    let on_b = client
        .get(format!("{b}/work?used=1"))
        .send()
        .await
        .expect("b answers");
    assert_eq!(on_b.status(), StatusCode::TOO_MANY_REQUESTS);
    // The 400 owed and the next estimate of 100: a whole allowance, an hour (to the second,
    // less the moments that passed).
    let retry_after: u64 = on_b.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!((3_590..=3_600).contains(&retry_after), "{retry_after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settling_while_redis_is_down_follows_each_rules_failure_policy() {
    for policy in [OnStoreFailure::Local, OnStoreFailure::Open] {
        let server = RedisServer::start().expect("start redis-server");
        let store = FallbackStore::builder(common::redis_store(&server).await)
            .timeout(Duration::from_millis(50))
            .cool_down(Duration::from_secs(60))
            .build();
        let gate = Gate::new(true);
        let base = gateway(store.clone(), policy, gate.clone()).await;
        let client = common::client();

        // Admitted on its estimate while Redis is up; Redis stops before the answer is known.
        let work = tokio::spawn({
            let (client, base) = (client.clone(), base.clone());
            async move { client.get(format!("{base}/work?used=900")).send().await }
        });
        gate.until_running(1).await;
        assert_eq!(remaining_in_redis(&server).await, LIMIT - ESTIMATE);
        server.pause().expect("SIGSTOP redis-server");
        let before = store.stats().fallback_checks;
        gate.open.as_ref().expect("held").add_permits(1);
        let answered = work.await.expect("task").expect("the gateway answers");
        assert_eq!(answered.status(), StatusCode::OK);
        until(
            "the settlement was answered by the rule's policy",
            || async { store.stats().fallback_checks > before },
        )
        .await;

        gate.open.as_ref().expect("held").add_permits(1);
        let next = client
            .get(format!("{base}/work?used=1"))
            .send()
            .await
            .expect("the gateway answers");
        match policy {
            // 800 charged in this gateway's memory: 500 fit, 300 owed there.
            OnStoreFailure::Local => assert_eq!(next.status(), StatusCode::TOO_MANY_REQUESTS),
            // Not applied while Redis is down: nothing was owed.
            _ => assert_eq!(next.status(), StatusCode::OK, "{policy:?}"),
        }
        server.resume().expect("SIGCONT redis-server");
        if policy == OnStoreFailure::Open {
            // Redis holds the estimate and nothing of the settlement.
            assert_eq!(remaining_in_redis(&server).await, LIMIT - ESTIMATE);
        }
    }
}
