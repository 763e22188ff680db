//! The quota service's bound with three concurrent streams on one bucket (and the rate
//! limit service counting the same caller at the same time), hostile reports, many buckets.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::quota::{Assigned, assigned, served_quotas, usage};
use common::{Backend, request, rules};
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

fn per_minute(id: &str, limit: u64, entries: &str) -> String {
    format!(
        "[[rule]]\nid = \"{id}\"\nenvoy = {{ domain = \"edge\", descriptor = [{entries}] }}\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1m\"\n"
    )
}

const ALICE: &[(&str, &str)] = &[("user", "alice")];

async fn three_streams_and_the_rls_together_never_get_more_than_the_limit(backend: Backend) {
    let file = rules(&per_minute("per-user", 200, "{ key = \"user\" }"));
    let served =
        Arc::new(served_quotas(backend, &file, |quotas| quotas.with_leases_per_limit(8)).await);
    let granted = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let mut envoy = served.envoy().await;
        let granted = Arc::clone(&granted);
        tasks.push(tokio::spawn(async move {
            let mut spent = 0;
            loop {
                let actions = within(envoy.actions("edge", vec![usage(ALICE, spent, 1)])).await;
                match assigned(&actions[0]) {
                    (Assigned::Tokens(tokens), _) => {
                        granted.fetch_add(u64::from(tokens), Ordering::SeqCst);
                        spent = u64::from(tokens);
                    }
                    (Assigned::DenyAll, _) => return,
                    other => panic!("unexpected {other:?}"),
                }
            }
        }));
    }
    let rls_allowed = Arc::new(AtomicU64::new(0));
    for _ in 0..3 {
        let mut rls = served.rls.clone();
        let rls_allowed = Arc::clone(&rls_allowed);
        tasks.push(tokio::spawn(async move {
            for _ in 0..40 {
                let answer = rls
                    .should_rate_limit(request("edge", &[ALICE]))
                    .await
                    .expect("an answer")
                    .into_inner();
                if answer.overall_code == Code::Ok as i32 {
                    rls_allowed.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("a task");
    }
    let leased = granted.load(Ordering::SeqCst);
    let direct = rls_allowed.load(Ordering::SeqCst);
    assert!(
        leased + direct <= 200,
        "leased {leased} + answered OK {direct} > 200"
    );
    assert_eq!(
        leased + direct,
        200,
        "leased {leased} + answered OK {direct}: all used"
    );
}

/// Reports no Envoy would send: an absurd allowed count (charged as debt), zero counts, many
/// buckets at once. No panic, the stream keeps answering, and the debt is held against the
/// caller (alice refused by the rate limit service) without touching others.
async fn hostile_reports_are_answered(backend: Backend) {
    let file = rules(&per_minute("per-user", 100, "{ key = \"user\" }"));
    let served = served_quotas(backend, &file, |quotas| quotas).await;
    let mut envoy = served.envoy().await;
    let actions = within(envoy.actions("edge", vec![usage(ALICE, u64::MAX, u64::MAX)])).await;
    assert_eq!(actions.len(), 1);
    let (what, _) = assigned(&actions[0]);
    assert_eq!(what, Assigned::DenyAll, "alice owes more than the limit");
    let mut rls = served.rls.clone();
    let answer = rls
        .should_rate_limit(request("edge", &[ALICE]))
        .await
        .expect("an answer")
        .into_inner();
    assert_eq!(answer.overall_code, Code::OverLimit as i32);
    let answer = rls
        .should_rate_limit(request("edge", &[&[("user", "bob")]]))
        .await
        .expect("an answer")
        .into_inner();
    assert_eq!(answer.overall_code, Code::Ok as i32);
    // Many buckets in one report, each its own caller: each answered.
    let names: Vec<String> = (0..2_000).map(|n| format!("user-{n}")).collect();
    let usages = names
        .iter()
        .map(|name| usage(&[("user", name.as_str())], 1, 0))
        .collect();
    let actions = within(envoy.actions("edge", usages)).await;
    assert_eq!(actions.len(), 2_000);
    assert!(
        actions
            .iter()
            .all(|action| assigned(action).0 == Assigned::Tokens(10))
    );
    // The stream still answers: a new bucket.
    let actions = within(envoy.actions("edge", vec![usage(&[("user", "carol")], 0, 3)])).await;
    assert_eq!(actions.len(), 1, "{actions:?}");
}

async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(30), future)
        .await
        .expect("answered within 30 s")
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        mod memory { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Backend::Memory).await } )* }
        mod redis { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Backend::Redis).await } )* }
        mod cluster { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Backend::Cluster).await } )* }
    };
}

cases!(
    three_streams_and_the_rls_together_never_get_more_than_the_limit,
    hostile_reports_are_answered,
);
