//! Per-message rules counted in a real redis-server (each message's check a round trip the
//! request body waits for): the demo's `Publish` is refused at the chirp that does not fit, on
//! a second gateway too; a closed per-message rule whose redis-server dies mid-call ends the
//! call `UNAVAILABLE`.

use std::time::Duration;

use tollgate::config::{Extractors, RuleFile};
use tollgate::redis::{ConnectionSettings, RedisStore};
use tollgate::tower::RateLimitLayer;
use tollgate_grpc_demo::feed::Post;
use tollgate_grpc_demo::feed::feed_client::FeedClient;
use tollgate_redis_harness::RedisServer;
use tonic::Code;
use tonic::transport::Channel;
use tonic_types::StatusExt;

async fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder()
        .settings(ConnectionSettings {
            connect_timeout: Duration::from_millis(200),
            response_timeout: Duration::from_millis(200),
        })
        .connect(&redis.url())
        .await
        .expect("a valid redis address")
}

/// A gateway serving the demo with `rules` counted in `redis`.
async fn gateway(redis: &RedisServer, rules: &str) -> FeedClient<Channel> {
    let file = RuleFile::parse("rules.toml", rules, &Extractors::new())
        .unwrap_or_else(|errors| panic!("{errors}"));
    let layer = RateLimitLayer::new(store(redis).await);
    layer
        .handle()
        .replace_rules(file.into_rules())
        .expect("redis counts these rules");
    let (listener, address) = tollgate_grpc_demo::bind(0).await.expect("a free port");
    tokio::spawn(tollgate_grpc_demo::serve_with(listener, layer));
    FeedClient::connect(format!("http://{address}"))
        .await
        .expect("the client connects")
}

/// A `Publish` call of `count` chirps from `account`.
fn chirps(
    account: &str,
    count: usize,
) -> tonic::Request<tokio_stream::Iter<std::vec::IntoIter<Post>>> {
    let chirps: Vec<Post> = (0..count)
        .map(|n| Post {
            text: format!("chirp {n}"),
        })
        .collect();
    let mut request = tonic::Request::new(tokio_stream::iter(chirps));
    request
        .metadata_mut()
        .insert("x-account", account.parse().expect("ascii"));
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chirps_are_counted_in_redis_across_gateways() {
    let redis = RedisServer::start().expect("start redis-server");
    let mut first = gateway(&redis, tollgate_grpc_demo::RULES).await;
    let mut second = gateway(&redis, tollgate_grpc_demo::RULES).await;
    let published = first
        .publish(chirps("ada", 4))
        .await
        .expect("four of five fit");
    assert_eq!(published.get_ref().count, 4);
    let refused = second
        .publish(chirps("ada", 3))
        .await
        .expect_err("the sixth chirp, on the other gateway");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(
        refused
            .get_details_quota_failure()
            .expect("a QuotaFailure")
            .violations[0]
            .subject,
        "publish-posts"
    );
    assert!(
        refused
            .get_details_retry_info()
            .and_then(|info| info.retry_delay)
            .is_some()
    );
}

const CLOSED: &str = r#"
[[rule]]
id = "publish-closed"
match = { grpc = "chirp.v1.Feed/Publish" }
algorithm = "token_bucket"
capacity = 100
refill = { amount = 100, per = "1m" }
key = "global"
per_message = true
on_store_failure = "closed"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_per_message_rule_ends_the_call_unavailable_when_redis_dies_mid_call() {
    let redis = RedisServer::start().expect("start redis-server");
    let mut client = gateway(&redis, CLOSED).await;
    let (send, outbound) = tokio::sync::mpsc::channel(1);
    let call = tokio::spawn(async move {
        client
            .publish(tokio_stream::wrappers::ReceiverStream::new(outbound))
            .await
    });
    send.send(Post::default()).await.expect("the call is open");
    // Wait until the first chirp was counted (redis holds the rule's key), then kill redis.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let keys = redis.cli(&["KEYS", "*publish-closed*"]).expect("KEYS");
        if !keys.trim().is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the first chirp was never counted in redis"
        );
        tokio::task::yield_now().await;
    }
    redis.kill().expect("stop redis-server");
    // The next chirp cannot be counted: the call ends UNAVAILABLE.
    let _ = send.send(Post::default()).await;
    let ended = call
        .await
        .expect("the call task")
        .expect_err("the rule fails closed");
    assert_eq!(ended.code(), Code::Unavailable, "{ended:?}");
    assert!(
        ended
            .get_details_retry_info()
            .and_then(|info| info.retry_delay)
            .is_some()
    );
}
