//! The demo's feed service on 127.0.0.1:0 and its generated tonic client: per-method rules from
//! its rule file, a refusal as tonic clients read one, a server-streaming call counted once when
//! it opens, a client-streaming call charged per message.

mod common;

use std::time::Duration;

use tollgate_grpc_demo::feed::feed_client::FeedClient;
use tollgate_grpc_demo::feed::{FeedRequest, Post};
use tonic::Code;
use tonic::transport::Channel;
use tonic_types::StatusExt;

async fn start() -> FeedClient<Channel> {
    let (listener, address) = tollgate_grpc_demo::bind(0).await.expect("a free port");
    tokio::spawn(tollgate_grpc_demo::serve(listener));
    FeedClient::connect(format!("http://{address}"))
        .await
        .expect("the client connects")
}

/// The same service and rules, counted at a standing clock (see `common`), so the waits it
/// answers do not depend on how long a burst took.
async fn start_at_a_standing_clock() -> FeedClient<Channel> {
    let address = common::serve_at_a_standing_clock().await;
    FeedClient::connect(format!("http://{address}"))
        .await
        .expect("the client connects")
}

fn for_account(account: &str) -> tonic::Request<FeedRequest> {
    let mut request = tonic::Request::new(FeedRequest {
        account: account.to_owned(),
    });
    request
        .metadata_mut()
        .insert("x-account", account.parse().expect("ascii"));
    request
}

#[tokio::test]
async fn the_sixth_get_in_a_burst_is_resource_exhausted_and_says_when_to_come_back() {
    let mut client = start_at_a_standing_clock().await;
    for _ in 0..5 {
        let page = client.get(for_account("ada")).await.expect("allowed");
        assert_eq!(page.get_ref().posts.len(), 3);
    }
    let refused = client.get(for_account("ada")).await.expect_err("refused");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    let wait = refused
        .get_details_retry_info()
        .and_then(|info| info.retry_delay)
        .expect("a RetryInfo");
    // 30 a minute: one comes back every 2 s (the whole interval: the store's clock stands).
    assert_eq!(wait, Duration::from_secs(2));
    let violation = &refused
        .get_details_quota_failure()
        .expect("a QuotaFailure")
        .violations[0];
    assert_eq!(violation.subject, "feed-get");

    // Another account has its own burst.
    client.get(for_account("bob")).await.expect("allowed");
}

#[tokio::test]
async fn a_streaming_call_is_one_call_checked_when_it_opens() {
    let mut client = start().await;
    for _ in 0..10 {
        let mut posts = client
            .follow(for_account("ada"))
            .await
            .expect("allowed")
            .into_inner();
        let mut count = 0;
        while let Some(post) = posts.message().await.expect("a post") {
            assert!(post.text.contains("ada"));
            count += 1;
        }
        assert_eq!(count, 3, "the whole stream");
    }
    // Follow is not under `feed-get`: Get still has its whole burst.
    for _ in 0..5 {
        client.get(for_account("ada")).await.expect("allowed");
    }
}

fn posts(
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

#[tokio::test]
async fn publishing_is_charged_per_chirp_not_per_call() {
    let mut client = start_at_a_standing_clock().await;
    let published = client.publish(posts("ada", 3)).await.expect("three fit");
    assert_eq!(published.get_ref().count, 3);
    // Two of the burst of five are left: the third chirp of this call is refused.
    let refused = client
        .publish(posts("ada", 3))
        .await
        .expect_err("the sixth chirp is refused");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let violation = &refused
        .get_details_quota_failure()
        .expect("a QuotaFailure")
        .violations[0];
    assert_eq!(violation.subject, "publish-posts");
    let wait = refused
        .get_details_retry_info()
        .and_then(|info| info.retry_delay)
        .expect("a RetryInfo");
    // 5 a minute: one comes back every 12 s (the whole interval: the store's clock stands).
    assert_eq!(wait, Duration::from_secs(12));
    // Another account has its own five.
    let published = client.publish(posts("bob", 5)).await.expect("five fit");
    assert_eq!(published.get_ref().count, 5);
}
