//! The client side: tollgate-client's `GrpcRetryLayer` over a tonic channel waits the
//! `RetryInfo` a refusal carries and sends the call again, so a burst past the limit succeeds,
//! paced by the server.

use std::time::Duration;

use tollgate::client::{GrpcRetryLayer, Jitter, RetryPolicy};
use tollgate::tower::key::Global;
use tollgate::tower::{RateLimitLayer, Rule};
use tollgate::{MemoryStore, Quota, Rate};
use tollgate_grpc_demo::feed::FeedRequest;
use tollgate_grpc_demo::feed::feed_client::FeedClient;
use tonic::Code;
use tower::Layer;

/// Serves the feed service behind `layer` on a free loopback port; a channel to it.
async fn serve(layer: RateLimitLayer<MemoryStore>) -> tonic::transport::Channel {
    let (listener, address) = tollgate_grpc_demo::bind(0).await.expect("a free port");
    tokio::spawn(tollgate_grpc_demo::serve_with(listener, layer));
    tonic::transport::Channel::from_shared(format!("http://{address}"))
        .expect("an address")
        .connect()
        .await
        .expect("connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retrying_client_waits_the_retry_info_and_gets_through() {
    // One call at once, then one every 100 ms.
    let rule = Rule::new(
        "feed-paced",
        Quota::token_bucket(1, Rate::per_second(10)).expect("valid"),
        Global,
    )
    .expect("a valid policy name");
    let layer = RateLimitLayer::new(MemoryStore::new())
        .grpc("chirp.v1.Feed/Get", rule)
        .expect("a valid method");
    let channel = serve(layer).await;

    // The default policy: the layer treats every gRPC call as one it may repeat.
    let policy = RetryPolicy::default()
        .jitter(Jitter::NONE)
        .max_wait(Duration::from_secs(5));
    let mut patient = FeedClient::new(GrpcRetryLayer::new(policy).layer(channel.clone()));
    let mut plain = FeedClient::new(channel);

    for _ in 0..3 {
        let page = patient
            .get(FeedRequest::default())
            .await
            .expect("each call gets through after the server's wait");
        assert_eq!(page.get_ref().posts.len(), 3);
    }
    // The limit is there: a client that does not wait is refused at once.
    let refused = plain
        .get(FeedRequest::default())
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), Code::ResourceExhausted);
}

/// A message larger than the policy's body limit cannot be kept to send again: it is sent
/// once, as it is, and answered — never failed for its size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_too_large_to_keep_is_sent_once() {
    let layer = RateLimitLayer::new(MemoryStore::new());
    let channel = serve(layer).await;
    let policy = RetryPolicy::default().max_body(64);
    let mut client = FeedClient::new(GrpcRetryLayer::new(policy).layer(channel));
    let account = "a".repeat(10_000);
    let page = client
        .get(FeedRequest {
            account: account.clone(),
        })
        .await
        .expect("sent once and answered");
    assert!(page.get_ref().posts[0].text.ends_with(&account));
}
