//! The quota service through a client of ours playing Envoy — a real tonic bidirectional stream
//! on loopback — on memory, Redis and Redis Cluster (`cases!` below makes each case a test on
//! each store), on a manual clock: assignments leased from the store the rate limit service
//! counts in, by the same rules.

mod common;

use common::quota::{Assigned, assigned, bucket, served_quotas, token_bucket, usage};
use common::{Backend, fallback, redis_store, request, rules};
use std::time::Duration;
use tollgate_envoy::envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use tollgate_redis::RedisConnection;
use tollgate_redis_harness::RedisServer;

/// A rule of `limit` a minute on a descriptor of `entries` (TOML), for Envoy only.
fn per_minute(id: &str, limit: u64, entries: &str) -> String {
    format!(
        "[[rule]]\nid = \"{id}\"\nenvoy = {{ domain = \"edge\", descriptor = [{entries}] }}\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1m\"\n"
    )
}

const ALICE: &[(&str, &str)] = &[("user", "alice")];

/// What the store holds for `pairs`' caller, as the rate limit service counts it: its remaining
/// after one more request.
async fn remaining_after_one_more(
    served: &common::quota::QuotaServed,
    pairs: &[(&str, &str)],
) -> u32 {
    let answer = served
        .rls
        .clone()
        .should_rate_limit(request("edge", &[pairs]))
        .await
        .expect("an answer")
        .into_inner();
    answer.statuses[0].limit_remaining
}

async fn reports_are_answered_with_a_token_bucket_leased_from_the_store(backend: Backend) {
    let file = rules(&per_minute("per-user", 100, "{ key = \"user\" }"));
    let served = served_quotas(backend, &file, |quotas| quotas).await;
    let mut envoy = served.envoy().await;

    // Envoy let its first request through on its own (no assignment yet) and reports it.
    let actions = envoy.actions("edge", vec![usage(ALICE, 1, 0)]).await;

    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0].bucket_id, Some(bucket(ALICE)));
    // A lease of ⌈100/10⌉ tokens, for 15 s; one token a 16 s fill: none added before it ends.
    assert_eq!(assigned(&actions[0]), (Assigned::Tokens(10), 15));
    let tokens = token_bucket(&actions[0]);
    assert_eq!(tokens.tokens_per_fill.map(|fill| fill.value), Some(1));
    assert_eq!(tokens.fill_interval.map(|fill| fill.seconds), Some(16));
    // The store holds the lease and the request Envoy let through, under the key the rate
    // limit service counts alice by: 100 − 11, then this request.
    assert_eq!(remaining_after_one_more(&served, ALICE).await, 88);
    assert_eq!(served.quotas.actions_sent(), 1);
}

async fn two_envoys_on_one_bucket_never_get_more_than_the_quota_between_them(backend: Backend) {
    let file = rules(&per_minute("per-user", 20, "{ key = \"user\" }"));
    let served = served_quotas(backend, &file, |quotas| quotas.with_leases_per_limit(4)).await;
    let mut envoys = [served.envoy().await, served.envoy().await];
    // Each Envoy starts denying (no assignment yet), then spends each lease whole.
    let mut held: [Option<u64>; 2] = [Some(0), Some(0)];
    let mut granted = 0;
    while held.iter().any(Option::is_some) {
        for (envoy, held) in envoys.iter_mut().zip(held.iter_mut()) {
            let Some(spent) = *held else { continue };
            let actions = envoy.actions("edge", vec![usage(ALICE, spent, 1)]).await;
            match assigned(&actions[0]) {
                (Assigned::Tokens(tokens), 15) => {
                    granted += u64::from(tokens);
                    *held = Some(tokens.into());
                }
                (Assigned::DenyAll, 15) => *held = None,
                other => panic!("unexpected: {other:?}"),
            }
            assert!(granted <= 20, "the Envoys were leased {granted} of 20");
        }
    }
    assert_eq!(granted, 20, "all of the window, in leases of at most 5");

    // The window turns (the clock started 40 s into a minute): the store has more.
    served.clock.advance(Duration::from_secs(20));
    let actions = envoys[0].actions("edge", vec![usage(ALICE, 0, 7)]).await;
    assert_eq!(assigned(&actions[0]), (Assigned::Tokens(5), 15));
}

async fn unlimited_and_unmatched_buckets_are_allowed_and_unnamed_callers_denied(backend: Backend) {
    let text = per_minute("per-client", 10, "{ key = \"client\" }")
        + &per_minute("per-address", 10, "{ key = \"remote_address\" }")
        + "[[rule]]\nid = \"internal\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"client\", value = \"internal-*\" }], unlimited = true }\n";
    let served = served_quotas(backend, &rules(&text), |quotas| quotas).await;
    let mut envoy = served.envoy().await;

    let actions = envoy
        .actions(
            "edge",
            vec![
                usage(&[("client", "internal-billing")], 1, 0),
                usage(&[("client", "acme")], 1, 0),
                usage(&[("route", "/feed")], 1, 0),
                usage(&[("remote_address", "not an address")], 1, 0),
                usage(&[("client", "acme"), ("route", "/feed")], 1, 0),
            ],
        )
        .await;

    let answers: Vec<_> = actions.iter().map(assigned).collect();
    assert_eq!(
        answers,
        [
            (Assigned::AllowAll, 15), // the unlimited rule, more specific than per-client
            (Assigned::Tokens(1), 15), // per-client: a lease of ⌈10/10⌉
            (Assigned::AllowAll, 15), // no rule has the key `route`
            (Assigned::DenyAll, 15),  // not an address: no caller per-address can count
            (Assigned::AllowAll, 15), // no rule has both keys
        ]
    );
    // A domain no rule names: every bucket allowed.
    let mut elsewhere = served.envoy().await;
    let actions = elsewhere
        .actions("elsewhere", vec![usage(ALICE, 1, 0)])
        .await;
    assert_eq!(assigned(&actions[0]), (Assigned::AllowAll, 15));
}

async fn an_exhausted_bucket_is_denied_until_the_window_turns(backend: Backend) {
    let file = rules(&per_minute("per-user", 3, "{ key = \"user\" }"));
    let served = served_quotas(backend, &file, |quotas| quotas.with_leases_per_limit(1)).await;
    let mut envoy = served.envoy().await;
    let probe = |name: &'static str| usage(&[("user", name)], 0, 1);

    let actions = envoy.actions("edge", vec![usage(ALICE, 0, 1)]).await;
    assert_eq!(assigned(&actions[0]), (Assigned::Tokens(3), 15));
    // Two of three spent: the assignment stands, nothing is sent for alice; the answer to the
    // next report is bob's alone.
    envoy.send("edge", vec![usage(ALICE, 2, 0)]).await;
    let actions = envoy.actions("edge", vec![probe("bob")]).await;
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0].bucket_id, Some(bucket(&[("user", "bob")])));
    // The third spent: nothing left in this window.
    let actions = envoy.actions("edge", vec![usage(ALICE, 1, 0)]).await;
    assert_eq!(assigned(&actions[0]), (Assigned::DenyAll, 15));
    envoy.send("edge", vec![usage(ALICE, 0, 9)]).await;
    let actions = envoy.actions("edge", vec![probe("carol")]).await;
    assert_eq!(actions.len(), 1, "alice's DENY_ALL stands: {actions:?}");

    served.clock.advance(Duration::from_secs(20));
    let actions = envoy.actions("edge", vec![usage(ALICE, 0, 9)]).await;
    assert_eq!(assigned(&actions[0]), (Assigned::Tokens(3), 15));
}

async fn malformed_reports_end_the_stream_with_invalid_argument_and_count_nothing(
    backend: Backend,
) {
    let file = rules(&per_minute("per-user", 10, "{ key = \"user\" }"));
    let served = served_quotas(backend, &file, |quotas| quotas).await;
    let refused = |answer: Result<Option<_>, tonic::Status>| match answer {
        Err(status) if status.code() == tonic::Code::InvalidArgument => status.message().to_owned(),
        other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
    };

    let mut envoy = served.envoy().await;
    let message = refused(envoy.report("", vec![usage(ALICE, 1, 0)]).await);
    assert!(message.contains("names no domain"), "{message}");

    let mut envoy = served.envoy().await;
    let empty = BucketQuotaUsage {
        bucket_id: Some(bucket(&[])),
        ..BucketQuotaUsage::default()
    };
    let message = refused(envoy.report("edge", vec![usage(ALICE, 1, 0), empty]).await);
    assert!(
        message.contains("bucket usage 1 has no bucket id, or an empty one"),
        "{message}"
    );
    let (left, ended) = envoy.close().await;
    assert!(left.is_empty() && ended.is_ok(), "{left:?} {ended:?}");

    let mut envoy = served.envoy().await;
    envoy
        .actions("edge", vec![usage(&[("user", "bob")], 0, 1)])
        .await;
    let message = refused(envoy.report("other", vec![usage(ALICE, 1, 0)]).await);
    assert!(message.contains("open a new stream"), "{message}");

    // Nothing of the refused reports was counted: alice has her 10.
    assert_eq!(remaining_after_one_more(&served, ALICE).await, 9);
}

async fn closing_the_stream_ends_it_cleanly(backend: Backend) {
    let file = rules(&per_minute("per-user", 10, "{ key = \"user\" }"));
    let served = served_quotas(backend, &file, |quotas| quotas).await;
    let mut envoy = served.envoy().await;
    envoy.actions("edge", vec![usage(ALICE, 0, 1)]).await;

    let (left, ended) = envoy.close().await;

    assert!(left.is_empty(), "{left:?}");
    assert!(ended.is_ok(), "the stream ends with OK: {ended:?}");
    // The service serves the next stream as the first.
    let mut envoy = served.envoy().await;
    let actions = envoy
        .actions("edge", vec![usage(&[("user", "bob")], 0, 1)])
        .await;
    assert_eq!(assigned(&actions[0]), (Assigned::Tokens(1), 15));
}

/// A store that cannot answer: each rule's `on_store_failure` decides its buckets, and the
/// next report asks the store again.
#[tokio::test]
async fn a_store_that_cannot_answer_follows_each_rules_failure_policy() {
    let text = per_minute("per-user", 10, "{ key = \"user\" }")
        + "on_store_failure = \"closed\"\n"
        + &per_minute("per-session", 10, "{ key = \"session\" }")
        + "on_store_failure = \"open\"\n";
    let server = RedisServer::start().expect("start redis-server");
    let clock = tollgate_testing::ManualClock::new(common::START);
    let connection = RedisConnection::connect(&server.url())
        .await
        .expect("connect to redis-server");
    let limits =
        tollgate_envoy::RateLimitService::new(fallback(redis_store(&clock, connection), &clock));
    limits
        .set_rules(&rules(&text))
        .unwrap_or_else(|errors| panic!("{errors}"));
    let quotas = limits.quota_service().clock(clock.clone());
    let served = common::quota::serve_both(limits, quotas, clock).await;
    let mut envoy = served.envoy().await;
    let session = &[("session", "s1")];
    let actions = envoy
        .actions("edge", vec![usage(ALICE, 0, 1), usage(session, 0, 1)])
        .await;
    assert_eq!(assigned(&actions[0]), (Assigned::Tokens(1), 15));
    assert_eq!(assigned(&actions[1]), (Assigned::Tokens(1), 15));

    server.kill().expect("kill redis-server");
    let actions = envoy
        .actions("edge", vec![usage(ALICE, 1, 0), usage(session, 1, 0)])
        .await;

    let answers: Vec<_> = actions.iter().map(assigned).collect();
    assert_eq!(answers, [(Assigned::DenyAll, 15), (Assigned::AllowAll, 15)]);
    // Both are asked again at the next report, whatever their assignment's time to live.
    let actions = envoy
        .actions("edge", vec![usage(ALICE, 0, 3), usage(session, 4, 0)])
        .await;
    let answers: Vec<_> = actions.iter().map(assigned).collect();
    assert_eq!(answers, [(Assigned::DenyAll, 15), (Assigned::AllowAll, 15)]);
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        mod memory { $( #[tokio::test] async fn $case() { super::$case(super::Backend::Memory).await } )* }
        mod redis { $( #[tokio::test] async fn $case() { super::$case(super::Backend::Redis).await } )* }
        mod cluster { $( #[tokio::test] async fn $case() { super::$case(super::Backend::Cluster).await } )* }
    };
}

cases!(
    reports_are_answered_with_a_token_bucket_leased_from_the_store,
    two_envoys_on_one_bucket_never_get_more_than_the_quota_between_them,
    unlimited_and_unmatched_buckets_are_allowed_and_unnamed_callers_denied,
    an_exhausted_bucket_is_denied_until_the_window_turns,
    malformed_reports_end_the_stream_with_invalid_argument_and_count_nothing,
    closing_the_stream_ends_it_cleanly,
);
