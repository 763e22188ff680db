//! A redis-server that stops answering (SIGSTOP) under each failure policy: `closed` answers
//! `UNAVAILABLE`, `open` answers OK, `local` decides in this process's memory — each within
//! the store's timeout, never waiting on the stopped server.

mod common;

use std::time::Duration;

use common::{fallback, redis_store, request, rules, serve};
use tollgate_envoy::RateLimitService;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use tollgate_redis::RedisConnection;
use tollgate_redis_harness::RedisServer;
use tollgate_testing::ManualClock;

/// A rule of 2 an hour on descriptor `[{ key = "<id>" }]`, failing as `policy` says.
fn rule(id: &str, policy: &str) -> String {
    format!(
        "[[rule]]\nid = \"{id}\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"{id}\" }}] }}\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow = \"1h\"\non_store_failure = {policy}\n"
    )
}

/// A request for rule `id`'s descriptor, which gives up after 30 s: far longer than the
/// store's timeout (200 ms), so an answer that waited on the stopped server would show as
/// `DEADLINE_EXCEEDED`, not as a slow test.
fn ask(id: &str) -> tonic::Request<RateLimitRequest> {
    let mut asked = tonic::Request::new(request("edge", &[&[(id, "caller")]]));
    asked.set_timeout(Duration::from_secs(30));
    asked
}

#[tokio::test]
async fn a_stopped_redis_is_answered_by_each_rules_policy_within_the_timeout() {
    let server = RedisServer::start()
        .expect("start redis-server (install it: apt-get install redis-server)");
    let clock = ManualClock::new(common::START);
    let connection = RedisConnection::connect(&server.url())
        .await
        .expect("connect");
    let service = RateLimitService::new(fallback(redis_store(&clock, connection), &clock));
    let text = rule("closed", "\"closed\"")
        + &rule("open", "\"open\"")
        + &rule("local", "\"local\"")
        + &rule(
            "within",
            "{ open_within = { algorithm = \"fixed_window\", limit = 1, window = \"1h\" } }",
        );
    service
        .set_rules(&rules(&text))
        .unwrap_or_else(|errors| panic!("{errors}"));
    let mut served = serve(service, clock).await;

    // Before the outage, each rule counts in Redis.
    for id in ["closed", "open", "local", "within"] {
        let response = served
            .client
            .should_rate_limit(ask(id))
            .await
            .expect("an answer");
        assert_eq!(response.get_ref().statuses[0].limit_remaining, 1, "{id}");
    }

    server.pause().expect("SIGSTOP redis-server");
    let closed = served
        .client
        .should_rate_limit(ask("closed"))
        .await
        .expect_err("closed fails");
    assert_eq!(closed.code(), tonic::Code::Unavailable, "{closed:?}");
    assert!(closed.message().contains("store"), "{}", closed.message());
    for _ in 0..4 {
        let open = served
            .client
            .should_rate_limit(ask("open"))
            .await
            .expect("open answers");
        assert_eq!(open.get_ref().overall_code, Code::Ok as i32);
    }
    // Local memory counts afresh: 2 more, then refused.
    let local: Vec<i32> = [
        served
            .client
            .should_rate_limit(ask("local"))
            .await
            .expect("1")
            .get_ref()
            .overall_code,
        served
            .client
            .should_rate_limit(ask("local"))
            .await
            .expect("2")
            .get_ref()
            .overall_code,
        served
            .client
            .should_rate_limit(ask("local"))
            .await
            .expect("3")
            .get_ref()
            .overall_code,
    ]
    .into();
    assert_eq!(
        local,
        [Code::Ok as i32, Code::Ok as i32, Code::OverLimit as i32]
    );
    let within: Vec<i32> = [
        served
            .client
            .should_rate_limit(ask("within"))
            .await
            .expect("1")
            .get_ref()
            .overall_code,
        served
            .client
            .should_rate_limit(ask("within"))
            .await
            .expect("2")
            .get_ref()
            .overall_code,
    ]
    .into();
    assert_eq!(
        within,
        [Code::Ok as i32, Code::OverLimit as i32],
        "open within 1 an hour here"
    );
    // A request with a closed rule among others fails whole: nothing is decided for it.
    let mut both = request("edge", &[&[("open", "caller")], &[("closed", "caller")]]);
    both.hits_addend = 1;
    let failed = served
        .client
        .should_rate_limit(both)
        .await
        .expect_err("closed among others");
    assert_eq!(failed.code(), tonic::Code::Unavailable);

    server.resume().expect("SIGCONT redis-server");
    // Back: Redis answers again (the breaker probes after its cool-down; wait on the answer).
    let mut answered = None;
    for _ in 0..600 {
        served.clock.advance(Duration::from_millis(100));
        match served.client.should_rate_limit(ask("closed")).await {
            Ok(response) => {
                answered = Some(response.into_inner());
                break;
            }
            Err(status) => assert_eq!(status.code(), tonic::Code::Unavailable),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let answered = answered.expect("Redis answers again once resumed");
    assert_eq!(
        answered.statuses[0].limit_remaining, 0,
        "the closed rule's second, counted in Redis"
    );
}
