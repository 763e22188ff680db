//! Two gateways — two axum servers, each with its own `RedisStore` connection — share one count
//! in a real redis-server, over real HTTP: a caller's requests count wherever they land, and a
//! caller blocked by escalation on one gateway is blocked on the other.

mod common;

use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use reqwest::header::RETRY_AFTER;
use tollgate::redis::RedisStore;
use tollgate::tower::key::PeerIp;
use tollgate::tower::{Escalation, RateLimitLayer, Rule};
use tollgate::{Quota, Rate};
use tollgate_redis_harness::RedisServer;

const HOUR: Duration = Duration::from_secs(3_600);

/// A gateway: 2 reads an hour per peer; more than 3 refusals in a minute block for 2 hours.
async fn gateway(redis_url: &str) -> String {
    let store = RedisStore::builder()
        .prefix("gateways")
        .connect(redis_url)
        .await
        .expect("connect to redis-server");
    let quota = Quota::token_bucket(2, Rate::every(HOUR)).expect("valid");
    let escalation = Escalation::new(3, Duration::from_secs(60), 2 * HOUR).expect("valid");
    let rule = Rule::new("reads", quota, PeerIp::new())
        .expect("valid id")
        .escalate(escalation)
        .expect("room for derived ids");
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(store).rule(rule));
    format!("{}/", common::serve(app).await)
}

async fn status_and_retry(client: &reqwest::Client, url: &str) -> (StatusCode, Option<u64>) {
    let response = client.get(url).send().await.expect("the gateway answers");
    let retry = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok()?.parse().ok());
    (response.status(), retry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_share_counts_and_blocks_through_redis() {
    let server = RedisServer::start().expect("start redis-server");
    let (first, second) = (gateway(&server.url()).await, gateway(&server.url()).await);
    let client = common::client();

    assert_eq!(status_and_retry(&client, &first).await.0, StatusCode::OK);
    assert_eq!(status_and_retry(&client, &second).await.0, StatusCode::OK);
    let (status, retry) = status_and_retry(&client, &first).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "the second gateway's request counted"
    );
    let retry = retry.expect("Retry-After");
    assert!(
        (3_500..=3_600).contains(&retry),
        "an hour to the next token: {retry}"
    );

    // Three more refusals on the first gateway pass three strikes: blocked for two hours.
    for _ in 0..3 {
        assert_eq!(
            status_and_retry(&client, &first).await.0,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
    // The strike that blocks is recorded after the refusal is answered: wait until the first
    // gateway has written the block to Redis (failing only if it never does), then ask the
    // second gateway once.
    let waited = std::time::Instant::now();
    while server
        .cli(&["--scan", "--pattern", "gateways:*reads.block*"])
        .expect("redis-cli --scan")
        .trim()
        .is_empty()
    {
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "the first gateway never wrote its block"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, retry) = status_and_retry(&client, &second).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    let retry = retry.expect("Retry-After");
    assert!(
        retry > 3_600,
        "the block made on the first gateway holds on the second: {retry}"
    );
}
