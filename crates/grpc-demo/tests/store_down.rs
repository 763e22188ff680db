//! A rule that fails closed, with its redis-server gone: a gRPC caller is told `UNAVAILABLE`
//! with a `RetryInfo`, never `RESOURCE_EXHAUSTED` (the caller did nothing wrong) and never an
//! HTTP 503 it would read as a transport failure.

use std::time::Duration;

use tollgate::redis::{ConnectionSettings, RedisStore};
use tollgate::tower::key::Global;
use tollgate::tower::{RateLimitLayer, Rule};
use tollgate::{OnStoreFailure, Quota, Rate};
use tollgate_grpc_demo::feed::FeedRequest;
use tollgate_grpc_demo::feed::feed_client::FeedClient;
use tollgate_redis_harness::RedisServer;
use tonic::Code;
use tonic_types::StatusExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_rule_with_redis_down_answers_unavailable_with_retry_info() {
    let redis = RedisServer::start().expect("start redis-server");
    let store = RedisStore::builder()
        .settings(ConnectionSettings {
            connect_timeout: Duration::from_millis(200),
            response_timeout: Duration::from_millis(200),
        })
        .connect(&redis.url())
        .await
        .expect("a valid redis address");
    let rule = Rule::new(
        "feed-closed",
        Quota::token_bucket(100, Rate::per_second(100)).expect("valid"),
        Global,
    )
    .expect("a valid policy name")
    .with_store_failure(OnStoreFailure::Closed);
    let layer = RateLimitLayer::new(store)
        .grpc("chirp.v1.Feed/*", rule)
        .expect("a valid method");
    let (listener, address) = tollgate_grpc_demo::bind(0).await.expect("a free port");
    tokio::spawn(tollgate_grpc_demo::serve_with(listener, layer));
    let mut client = FeedClient::connect(format!("http://{address}"))
        .await
        .expect("connects");
    let request = || tonic::Request::new(FeedRequest::default());
    client
        .get(request())
        .await
        .expect("allowed while redis is up");

    redis.kill().expect("stop redis-server");
    let refused = client
        .get(request())
        .await
        .expect_err("the rule fails closed");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused
            .get_details_retry_info()
            .and_then(|info| info.retry_delay)
            .is_some(),
        "a RetryInfo"
    );
    assert!(
        !refused.message().contains("feed-closed"),
        "which store is down is the operator's business: {}",
        refused.message()
    );
}
