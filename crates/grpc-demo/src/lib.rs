//! A small tonic gRPC service limited by tollgate: the feed service of `proto/feed.proto`,
//! behind a `RateLimitLayer` whose per-method rules come from `rules.toml` (`match = { grpc =
//! "chirp.v1.Feed/Get" }`). A refused call is `RESOURCE_EXHAUSTED` with the rule's wait in
//! `RetryInfo`, which tonic clients read with `tonic_types::StatusExt::get_details_retry_info`.
//! `Publish` is charged per chirp it carries (`per_message = true`), not per call.
//!
//! `cargo run -p tollgate-grpc-demo` serves it on 127.0.0.1 (`--port N`).

use std::net::SocketAddr;
use std::pin::Pin;

use tokio::net::TcpListener;
use tollgate::config::{Extractors, RuleFile};
use tollgate::tower::RateLimitLayer;
use tollgate::{MemoryStore, Store};
use tonic::{Request, Response, Status};

/// The generated messages, server and client of `proto/feed.proto`.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
pub mod feed {
    tonic::include_proto!("chirp.v1");
}

use feed::feed_server::{Feed, FeedServer};
use feed::{FeedPage, FeedRequest, Post, Published};

/// The service's limits, as shipped with it.
pub const RULES: &str = include_str!("../rules.toml");

/// The feed service: answers at once with a page of three posts, or a stream of them.
#[derive(Debug, Default, Clone, Copy)]
pub struct FeedService;

type Posts = Pin<Box<dyn tokio_stream::Stream<Item = Result<Post, Status>> + Send>>;

#[tonic::async_trait]
impl Feed for FeedService {
    async fn get(&self, request: Request<FeedRequest>) -> Result<Response<FeedPage>, Status> {
        let account = request.into_inner().account;
        Ok(Response::new(FeedPage {
            posts: (1..=3).map(|n| post(&account, n)).collect(),
        }))
    }

    type FollowStream = Posts;

    async fn follow(&self, request: Request<FeedRequest>) -> Result<Response<Posts>, Status> {
        let account = request.into_inner().account;
        let posts = (1..=3).map(move |n| Ok(post(&account, n)));
        Ok(Response::new(Box::pin(tokio_stream::iter(posts))))
    }

    async fn publish(
        &self,
        request: Request<tonic::Streaming<Post>>,
    ) -> Result<Response<Published>, Status> {
        // A refused chirp is this stream's error (`RESOURCE_EXHAUSTED`), passed on by `?`.
        let mut posts = request.into_inner();
        let mut count = 0;
        while posts.message().await?.is_some() {
            count += 1;
        }
        Ok(Response::new(Published { count }))
    }
}

fn post(account: &str, n: u32) -> Post {
    Post {
        text: format!("post {n} for {account}"),
    }
}

/// The layer with the service's rules, over an in-memory store.
pub fn limits() -> Result<RateLimitLayer<MemoryStore>, Box<dyn std::error::Error + Send + Sync>> {
    let file = RuleFile::parse("rules.toml", RULES, &Extractors::new())?;
    let layer = RateLimitLayer::new(MemoryStore::new());
    layer.handle().replace_rules(file.into_rules())?;
    Ok(layer)
}

/// Serves the feed service limited by [`limits`] on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    serve_with(listener, limits()?).await
}

/// Serves the feed service behind `layer` (another store, other rules) on `listener`.
pub async fn serve_with<St: Store>(
    listener: TcpListener,
    layer: RateLimitLayer<St>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    tonic::transport::Server::builder()
        .layer(layer)
        .add_service(FeedServer::new(FeedService))
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
        .await?;
    Ok(())
}

/// Binds 127.0.0.1:`port` (0: a free port) and answers the address.
pub async fn bind(port: u16) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let address = listener.local_addr()?;
    Ok((listener, address))
}
