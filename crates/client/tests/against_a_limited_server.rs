//! The layer against a real tollgate-limited axum server on loopback, on paused tokio time: a
//! loop that wants 20 successes waits as told (never early, at most one refusal per refill)
//! where naive immediate retry makes the server refuse hundreds; 8 tasks through one client
//! share the host's cool-down.

mod common;

use std::time::Duration;

use common::{Server, get, http_client};
use tollgate_client::{Jitter, RetryAfterLayer, RetryPolicy};
use tollgate_core::{Quota, Rate};
use tollgate_tower::Rule;
use tollgate_tower::key::Global;
use tower::{Layer, ServiceExt};

/// A bucket of 5 with one token back every 2 s, on `/feed`; `disclosed`: with `RateLimit`
/// headers (else a 429 says only `Retry-After`).
fn five_then_one_every_two_seconds(disclosed: bool) -> Rule {
    let quota = Quota::token_bucket(5, Rate::every(Duration::from_secs(2))).expect("valid");
    Rule::new("feed", quota, Global)
        .expect("valid")
        .disclose(disclosed)
}

/// 20 successes through the layer: what the server refused, and checks that no request came
/// before the time the server gave.
async fn twenty_through_the_layer(disclosed: bool) -> usize {
    let server = Server::limited(five_then_one_every_two_seconds(disclosed)).await;
    let client = RetryAfterLayer::new(RetryPolicy::default().max_retries(10)).layer(http_client());
    for n in 0..20 {
        let response = client
            .clone()
            .oneshot(get(&server.url("/feed")))
            .await
            .expect("answers");
        assert_eq!(response.status(), 200, "request {n}");
    }
    common::never_early(&server.arrivals());
    server.answered(429)
}

#[tokio::test(start_paused = true)]
async fn twenty_successes_wait_as_told_where_naive_retry_storms() {
    // Told only by Retry-After: at most one refusal for each of the 15 tokens that come back.
    let told_by_retry_after = twenty_through_the_layer(false).await;
    assert!(
        told_by_retry_after <= 15,
        "{told_by_retry_after} refusals for 15 refills"
    );
    // Told by RateLimit's r=0;t=N as well: the client waits before the refusal comes.
    let told_ahead = twenty_through_the_layer(true).await;
    assert_eq!(told_ahead, 0);

    let naive_server = Server::limited(five_then_one_every_two_seconds(false)).await;
    let naive = http_client();
    for _ in 0..20 {
        loop {
            let response = naive
                .clone()
                .oneshot(get(&naive_server.url("/feed")))
                .await
                .expect("answers");
            if response.status() == 200 {
                break;
            }
            // An immediate retry, one 10 ms round trip later.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let storm = naive_server.answered(429);
    println!(
        "20 successes: the layer met {told_by_retry_after} refusals (Retry-After only) and \
         {told_ahead} (with RateLimit); naive immediate retry met {storm}"
    );
    assert!(storm >= 100, "naive retry met only {storm} refusals");
}

/// 8 tasks through one client, each wanting 2 successes from a window of 8 a minute: once the
/// host said "wait", the others wait too, so the server refuses at most one request per task.
#[tokio::test(start_paused = true)]
async fn tasks_through_one_client_share_the_host_s_cool_down() {
    let quota = Quota::fixed_window(8, Duration::from_secs(60)).expect("valid");
    let server = Server::limited(Rule::new("feed", quota, Global).expect("valid")).await;
    let client = RetryAfterLayer::new(RetryPolicy::default()).layer(http_client());
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (client, url) = (client.clone(), server.url("/feed"));
            tokio::spawn(async move {
                for _ in 0..2 {
                    let response = client.clone().oneshot(get(&url)).await.expect("answers");
                    assert_eq!(response.status(), 200);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("the task ends");
    }
    let refused = server.answered(429);
    assert_eq!(server.answered(200), 16);
    assert!(refused <= 8, "{refused} refusals for 8 tasks");
}

/// No jitter, a limit that refills whole: the retry lands exactly when the server said, not a
/// moment before.
#[tokio::test(start_paused = true)]
async fn without_jitter_the_retry_comes_exactly_at_the_server_s_time() {
    let quota = Quota::fixed_window(1, Duration::from_secs(60)).expect("valid");
    let rule = Rule::new("feed", quota, Global)
        .expect("valid")
        .disclose(false);
    let server = Server::limited(rule).await;
    let client =
        RetryAfterLayer::new(RetryPolicy::default().jitter(Jitter::NONE)).layer(http_client());
    for _ in 0..2 {
        let response = client
            .clone()
            .oneshot(get(&server.url("/feed")))
            .await
            .expect("answers");
        assert_eq!(response.status(), 200);
    }
    let arrivals = server.arrivals();
    let statuses: Vec<u16> = arrivals.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [200, 429, 200]);
    let told = Duration::from_secs(arrivals[1].retry_after.expect("a Retry-After"));
    let gap = arrivals[2].at - arrivals[1].at;
    assert!(
        gap >= told && gap < told + Duration::from_millis(50),
        "{gap:?} after {told:?}"
    );
}
