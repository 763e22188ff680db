//! Rules that charge each inbound message of a gRPC call (`Rule::per_message`), on a real tonic
//! server on 127.0.0.1:0 and a real tonic client: a bidirectional call is refused at its
//! (N+1)th message with `RESOURCE_EXHAUSTED`, whether the handler passes the error on or
//! swallows it or answers a status of its own; messages packed into one HTTP/2 frame are
//! counted one by one; a call labelled with another content-type is counted all the same; a
//! tonic service routed by axum counts the same; a body the layer cannot read is a loud
//! `INTERNAL`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::PathAndQuery;
use tollgate_core::{MemoryStore, Quota, Rate};
use tollgate_tower::key::Global;
use tollgate_tower::{RateLimitLayer, Rule};
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::tokio_stream::{self, Stream, StreamExt};
use tonic::server::NamedService;
use tonic::{Code, Status, Streaming};
use tonic_types::StatusExt;
use tower::{Layer, ServiceExt};

#[derive(Clone, PartialEq, prost::Message)]
struct Text {
    #[prost(string, tag = "1")]
    text: String,
}

type Replies = Pin<Box<dyn Stream<Item = Result<Text, Status>> + Send>>;
type Answer<T> = Pin<Box<dyn Future<Output = Result<tonic::Response<T>, Status>> + Send>>;

/// `test.Chat`: `Talk` echoes each message and passes an inbound error on; `TalkQuietly`
/// echoes and drops errors, ending its replies as if the client had finished; `Upload` counts
/// the messages it reads (into `read`) and answers the count; `UploadRemap` answers an inbound
/// error with a status of its own.
#[derive(Clone, Default)]
struct Chat {
    read: Arc<AtomicUsize>,
}

impl NamedService for Chat {
    const NAME: &'static str = "test.Chat";
}

struct Talk {
    quietly: bool,
}

impl tonic::server::StreamingService<Text> for Talk {
    type Response = Text;
    type ResponseStream = Replies;
    type Future = Answer<Replies>;

    fn call(&mut self, request: tonic::Request<Streaming<Text>>) -> Self::Future {
        let inbound = request.into_inner();
        let replies: Replies = if self.quietly {
            Box::pin(inbound.filter_map(|message| message.ok().map(Ok)))
        } else {
            Box::pin(inbound)
        };
        Box::pin(async move { Ok(tonic::Response::new(replies)) })
    }
}

struct Upload {
    read: Arc<AtomicUsize>,
    /// Answers an inbound error with a status of its own instead of passing it on.
    remap: bool,
}

impl tonic::server::ClientStreamingService<Text> for Upload {
    type Response = Text;
    type Future = Answer<Text>;

    fn call(&mut self, request: tonic::Request<Streaming<Text>>) -> Self::Future {
        let read = Arc::clone(&self.read);
        let remap = self.remap;
        Box::pin(async move {
            let mut inbound = request.into_inner();
            let mut count = 0;
            loop {
                match inbound.message().await {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) if remap => return Err(Status::invalid_argument("the handler's own")),
                    Err(status) => return Err(status),
                }
                count += 1;
                read.fetch_add(1, Ordering::SeqCst);
            }
            Ok(tonic::Response::new(Text {
                text: count.to_string(),
            }))
        })
    }
}

impl<B> tower::Service<http::Request<B>> for Chat
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let codec = || tonic_prost::ProstCodec::<Text, Text>::default();
        let read = Arc::clone(&self.read);
        match request.uri().path() {
            "/test.Chat/Talk" => Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(codec());
                Ok(grpc.streaming(Talk { quietly: false }, request).await)
            }),
            "/test.Chat/TalkQuietly" => Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(codec());
                Ok(grpc.streaming(Talk { quietly: true }, request).await)
            }),
            "/test.Chat/Upload" => Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(codec());
                Ok(grpc
                    .client_streaming(Upload { read, remap: false }, request)
                    .await)
            }),
            "/test.Chat/UploadRemap" => Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(codec());
                Ok(grpc
                    .client_streaming(Upload { read, remap: true }, request)
                    .await)
            }),
            _ => Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) }),
        }
    }
}

/// Three messages at once, then one every 20 s.
fn three_messages() -> Rule {
    Rule::new(
        "chat-messages",
        Quota::token_bucket(3, Rate::per_minute(3)).expect("valid"),
        Global,
    )
    .expect("a valid policy name")
    .per_message()
}

fn layer(method: &str) -> RateLimitLayer<MemoryStore> {
    RateLimitLayer::new(MemoryStore::new())
        .grpc(method, three_messages())
        .expect("a valid method")
}

async fn listen() -> (tonic::transport::server::TcpIncoming, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    (
        tonic::transport::server::TcpIncoming::from(listener),
        address,
    )
}

async fn channel(address: String) -> tonic::transport::Channel {
    tonic::transport::Channel::from_shared(address)
        .expect("a valid address")
        .connect()
        .await
        .expect("the client connects")
}

async fn connect(address: String) -> tonic::client::Grpc<tonic::transport::Channel> {
    tonic::client::Grpc::new(channel(address).await)
}

/// Serves `chat` behind `layer` with tonic's server; answers its address.
async fn spawn_server(layer: RateLimitLayer<MemoryStore>, chat: Chat) -> String {
    let (incoming, address) = listen().await;
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(chat)
            .serve_with_incoming(incoming)
            .await
            .expect("the server runs");
    });
    address
}

/// Serves `chat` behind `layer`, and connects to it.
async fn serve(
    layer: RateLimitLayer<MemoryStore>,
    chat: Chat,
) -> tonic::client::Grpc<tonic::transport::Channel> {
    connect(spawn_server(layer, chat).await).await
}

/// Talks on `method` one message at a time, each sent after the last one's echo: the echoes
/// received, and how the call ended.
async fn talk(
    client: &mut tonic::client::Grpc<tonic::transport::Channel>,
    method: &'static str,
    messages: usize,
) -> (usize, Result<(), Status>) {
    client.ready().await.expect("ready");
    let (send, outbound) = tokio::sync::mpsc::channel(1);
    send.send(Text { text: "0".into() }).await.expect("open");
    let response = client
        .streaming(
            tonic::Request::new(ReceiverStream::new(outbound)),
            PathAndQuery::from_static(method),
            tonic_prost::ProstCodec::<Text, Text>::default(),
        )
        .await;
    let mut replies = match response {
        Ok(response) => response.into_inner(),
        Err(status) => return (0, Err(status)),
    };
    let mut echoed = 0;
    loop {
        match replies.message().await {
            Ok(Some(_)) => {
                echoed += 1;
                if echoed < messages {
                    // The server may have ended the call already: a send can fail.
                    let _ = send
                        .send(Text {
                            text: echoed.to_string(),
                        })
                        .await;
                } else if echoed == messages {
                    drop(send);
                    return (echoed, finish(&mut replies).await);
                }
            }
            Ok(None) => return (echoed, Ok(())),
            Err(status) => return (echoed, Err(status)),
        }
    }
}

async fn finish(replies: &mut Streaming<Text>) -> Result<(), Status> {
    while replies.message().await?.is_some() {}
    Ok(())
}

fn assert_refused_by_the_rule(status: &Status) {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let retry = status
        .get_details_retry_info()
        .and_then(|info| info.retry_delay)
        .expect("a RetryInfo with a delay");
    // A message comes back every 20 s.
    assert!(
        retry > Duration::from_secs(19) && retry <= Duration::from_secs(20),
        "{retry:?}"
    );
    let violations = status
        .get_details_quota_failure()
        .expect("a QuotaFailure")
        .violations;
    assert_eq!(violations[0].subject, "chat-messages");
}

#[tokio::test]
async fn a_bidirectional_call_ends_resource_exhausted_at_its_fourth_message() {
    let mut client = serve(layer("test.Chat/Talk"), Chat::default()).await;
    let (echoed, ended) = talk(&mut client, "/test.Chat/Talk", 10).await;
    assert_eq!(echoed, 3, "three messages pass, the fourth is refused");
    assert_refused_by_the_rule(&ended.expect_err("the call ends refused"));
    // The next call's first message is refused too: the messages were counted, not the call.
    let (echoed, ended) = talk(&mut client, "/test.Chat/Talk", 1).await;
    assert_eq!(echoed, 0);
    assert_refused_by_the_rule(&ended.expect_err("refused"));
}

#[tokio::test]
async fn a_handler_that_swallows_the_refusal_still_ends_resource_exhausted() {
    let mut client = serve(layer("test.Chat/TalkQuietly"), Chat::default()).await;
    let (echoed, ended) = talk(&mut client, "/test.Chat/TalkQuietly", 10).await;
    assert_eq!(echoed, 3);
    assert_refused_by_the_rule(&ended.expect_err("the layer ends the response refused"));
}

#[tokio::test]
async fn calls_with_fewer_messages_than_the_limit_are_not_refused_when_they_open() {
    let mut client = serve(layer("test.Chat/Talk"), Chat::default()).await;
    for _ in 0..3 {
        let (echoed, ended) = talk(&mut client, "/test.Chat/Talk", 1).await;
        assert_eq!(echoed, 1);
        ended.expect("one message each: three calls pass");
    }
}

/// Sends `count` messages as one stream the client may pack into a single HTTP/2 frame.
async fn upload(
    client: &mut tonic::client::Grpc<tonic::transport::Channel>,
    count: usize,
) -> Result<Text, Status> {
    client.ready().await.expect("ready");
    let messages = (0..count).map(|at| Text {
        text: format!("message {at}"),
    });
    client
        .client_streaming(
            tonic::Request::new(tokio_stream::iter(messages)),
            PathAndQuery::from_static("/test.Chat/Upload"),
            tonic_prost::ProstCodec::<Text, Text>::default(),
        )
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn messages_packed_together_are_counted_one_by_one() {
    let chat = Chat::default();
    let read = Arc::clone(&chat.read);
    let mut client = serve(layer("test.Chat/Upload"), chat).await;
    let refused = upload(&mut client, 8)
        .await
        .expect_err("eight is over three");
    assert_refused_by_the_rule(&refused);
    assert_eq!(
        read.load(Ordering::SeqCst),
        3,
        "the handler read exactly the three admitted messages"
    );
}

#[tokio::test]
async fn a_tonic_service_routed_by_axum_counts_its_messages_the_same() {
    let chat = Chat::default();
    let read = Arc::clone(&chat.read);
    let router = tonic::service::Routes::new(chat)
        .into_axum_router()
        .layer(layer("test.Chat/Upload"));
    let (incoming, address) = listen().await;
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_routes(tonic::service::Routes::from(router))
            .serve_with_incoming(incoming)
            .await
            .expect("the server runs");
    });
    let mut client = connect(address).await;
    let answer = upload(&mut client, 2).await.expect("two fit");
    assert_eq!(answer.text, "2");
    assert_refused_by_the_rule(
        &upload(&mut client, 2)
            .await
            .expect_err("the fourth message"),
    );
    assert_eq!(read.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_body_the_layer_cannot_read_is_answered_internal_not_let_through() {
    let served = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&served);
    let service =
        layer("test.Chat/Upload").layer(tower::service_fn(move |_: http::Request<String>| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, Infallible>(http::Response::new(String::new())) }
        }));
    let request = http::Request::post("/test.Chat/Upload")
        .header("content-type", "application/grpc")
        .body(String::from("\0\0\0\0\0"))
        .expect("a request");
    let response = service.clone().oneshot(request).await.expect("answered");
    assert_eq!(response.status(), http::StatusCode::OK);
    assert_eq!(
        response
            .headers()
            .get("grpc-status")
            .expect("a gRPC status"),
        "13",
        "INTERNAL"
    );
    // Labelled as something else, it is still read as messages: a loud 500, not a free pass.
    let request = http::Request::post("/test.Chat/Upload")
        .body(String::from("\0\0\0\0\0"))
        .expect("a request");
    let response = service.oneshot(request).await.expect("answered");
    assert_eq!(response.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        served.load(Ordering::SeqCst),
        0,
        "the service never saw a call"
    );
}

/// A client that labels its calls `content-type`: tonic serves them all the same.
fn labelled(
    channel: tonic::transport::Channel,
    label: &'static str,
) -> tonic::client::Grpc<
    impl tonic::client::GrpcService<
        tonic::body::Body,
        ResponseBody = tonic::body::Body,
        Error = tonic::transport::Error,
    > + Clone,
> {
    let relabel = move |mut request: http::Request<tonic::body::Body>| {
        if label.is_empty() {
            request.headers_mut().remove("content-type");
        } else {
            request
                .headers_mut()
                .insert("content-type", http::HeaderValue::from_static(label));
        }
        request
    };
    tonic::client::Grpc::new(
        tower::ServiceBuilder::new()
            .map_request(relabel)
            .service(channel),
    )
}

#[tokio::test]
async fn a_call_labelled_as_something_else_is_still_counted_per_message() {
    for label in ["application/octet-stream", "application/grpc-web", ""] {
        let chat = Chat::default();
        let read = Arc::clone(&chat.read);
        let address = spawn_server(layer("test.Chat/Upload"), chat).await;
        let mut client = labelled(channel(address).await, label);
        client.ready().await.expect("ready");
        let messages = (0..20).map(|at| Text {
            text: format!("message {at}"),
        });
        let answer = client
            .client_streaming(
                tonic::Request::new(tokio_stream::iter(messages)),
                PathAndQuery::from_static("/test.Chat/Upload"),
                tonic_prost::ProstCodec::<Text, Text>::default(),
            )
            .await;
        assert!(answer.is_err(), "{label:?}: {answer:?}");
        assert_eq!(
            read.load(Ordering::SeqCst),
            3,
            "{label:?}: only three were read"
        );
    }
}

#[tokio::test]
async fn a_handler_that_answers_its_own_status_still_ends_resource_exhausted() {
    let mut client = serve(layer("test.Chat/UploadRemap"), Chat::default()).await;
    client.ready().await.expect("ready");
    let messages = (0..8).map(|at| Text {
        text: format!("message {at}"),
    });
    let refused = client
        .client_streaming(
            tonic::Request::new(tokio_stream::iter(messages)),
            PathAndQuery::from_static("/test.Chat/UploadRemap"),
            tonic_prost::ProstCodec::<Text, Text>::default(),
        )
        .await
        .expect_err("refused");
    assert_refused_by_the_rule(&refused);
}
