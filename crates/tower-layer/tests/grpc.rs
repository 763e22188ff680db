//! gRPC calls through the layer, on a real tonic server on 127.0.0.1:0 and a real tonic client
//! (a service written as tonic's generated code writes one, with a hand-derived message): a
//! refusal is `RESOURCE_EXHAUSTED` with the rule's wait in `RetryInfo` and the policy in
//! `QuotaFailure`; a rule for one method leaves the others alone; an HTTP caller of the same
//! layer still gets its `429`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::uri::PathAndQuery;
use tollgate_core::{MemoryStore, Quota, Rate};
use tollgate_tower::key::Global;
use tollgate_tower::{RateLimitLayer, Rule};
use tonic::Code;
use tonic::server::NamedService;
use tonic_types::StatusExt;
use tower::ServiceExt;

/// The one message both methods take and answer.
#[derive(Clone, PartialEq, prost::Message)]
struct Text {
    #[prost(string, tag = "1")]
    text: String,
}

/// `test.Echo/Say` and `test.Echo/Shout`, both answering with the text they got.
#[derive(Clone)]
struct Echo;

impl NamedService for Echo {
    const NAME: &'static str = "test.Echo";
}

struct Answer;

impl tonic::server::UnaryService<Text> for Answer {
    type Response = Text;
    type Future =
        Pin<Box<dyn Future<Output = Result<tonic::Response<Text>, tonic::Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<Text>) -> Self::Future {
        Box::pin(async move { Ok(tonic::Response::new(request.into_inner())) })
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for Echo {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        match request.uri().path() {
            "/test.Echo/Say" | "/test.Echo/Shout" => Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
                Ok(grpc.unary(Answer, request).await)
            }),
            _ => Box::pin(async { Ok(tonic::Status::unimplemented("no such method").into_http()) }),
        }
    }
}

/// Serves `layer` around [`Echo`] on a free loopback port; answers the client's channel.
async fn serve(layer: RateLimitLayer<MemoryStore>) -> tonic::transport::Channel {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(Echo)
            .serve_with_incoming(incoming)
            .await
            .expect("the server runs");
    });
    tonic::transport::Channel::from_shared(format!("http://{address}"))
        .expect("a valid address")
        .connect()
        .await
        .expect("the client connects")
}

async fn call(
    channel: &tonic::transport::Channel,
    method: &'static str,
) -> Result<tonic::Response<Text>, tonic::Status> {
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.expect("the channel is ready");
    let request = tonic::Request::new(Text {
        text: "hello".to_owned(),
    });
    client
        .unary(
            request,
            PathAndQuery::from_static(method),
            tonic_prost::ProstCodec::<Text, Text>::default(),
        )
        .await
}

/// 5 at once, then one a day: no wait ends while a test runs, however slow the machine.
fn burst_of_five() -> Rule {
    Rule::new(
        "say-burst",
        Quota::token_bucket(5, Rate::per_day(1)).expect("valid"),
        Global,
    )
    .expect("a valid policy name")
}

#[tokio::test]
async fn the_sixth_call_of_a_burst_of_five_is_resource_exhausted_with_retry_info() {
    let layer = RateLimitLayer::new(MemoryStore::new())
        .grpc("test.Echo/Say", burst_of_five())
        .expect("a valid method");
    let channel = serve(layer).await;
    let started = Instant::now();
    for _ in 0..5 {
        let answer = call(&channel, "/test.Echo/Say").await.expect("allowed");
        assert_eq!(answer.get_ref().text, "hello");
        assert!(
            answer.metadata().get("ratelimit").is_some(),
            "the RateLimit fields are response metadata"
        );
    }
    let refused = call(&channel, "/test.Echo/Say")
        .await
        .expect_err("the sixth is refused");
    let burst = started.elapsed();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let retry = refused
        .get_details_retry_info()
        .and_then(|info| info.retry_delay)
        .expect("a RetryInfo with a delay");
    // A token comes back once a day; the wait is what is left of that: a day less at most the
    // time the burst took (and a millisecond for the two clocks' rounding), whatever it took.
    let day = Duration::from_secs(86_400);
    assert!(
        retry <= day && retry + burst + Duration::from_millis(1) >= day,
        "{retry:?} after a burst of {burst:?}"
    );
    let seconds: u64 = refused
        .metadata()
        .get("retry-after")
        .expect("Retry-After metadata")
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert_eq!(
        seconds,
        retry.as_secs() + u64::from(retry.subsec_nanos() > 0)
    );
    let violations = refused
        .get_details_quota_failure()
        .expect("a QuotaFailure")
        .violations;
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].subject, "say-burst");
    assert!(
        refused.message().contains("say-burst"),
        "{}",
        refused.message()
    );
}

#[tokio::test]
async fn a_rule_for_one_method_leaves_the_others_alone() {
    let layer = RateLimitLayer::new(MemoryStore::new())
        .grpc("test.Echo/Say", burst_of_five())
        .expect("a valid method");
    let channel = serve(layer).await;
    for _ in 0..5 {
        call(&channel, "/test.Echo/Say").await.expect("allowed");
    }
    assert!(call(&channel, "/test.Echo/Say").await.is_err());
    for _ in 0..20 {
        call(&channel, "/test.Echo/Shout")
            .await
            .expect("another method: no limit");
    }
}

#[tokio::test]
async fn a_rule_for_every_method_of_a_service_counts_them_together() {
    let layer = RateLimitLayer::new(MemoryStore::new())
        .grpc("test.Echo/*", burst_of_five())
        .expect("a valid method");
    let channel = serve(layer).await;
    for method in ["/test.Echo/Say", "/test.Echo/Shout"]
        .into_iter()
        .cycle()
        .take(5)
    {
        call(&channel, method).await.expect("allowed");
    }
    let refused = call(&channel, "/test.Echo/Shout")
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), Code::ResourceExhausted);
}

#[tokio::test]
async fn an_http_caller_of_the_same_layer_still_gets_a_429() {
    let layer = RateLimitLayer::new(MemoryStore::new())
        .grpc("test.Echo/Say", burst_of_five())
        .expect("a valid method");
    let service = tower::Layer::layer(&layer, Echo);
    let post = || {
        http::Request::post("/test.Echo/Say")
            .body(tonic::body::Body::empty())
            .expect("a request")
    };
    for _ in 0..5 {
        service.clone().oneshot(post()).await.expect("infallible");
    }
    let refused = service.oneshot(post()).await.expect("infallible");
    assert_eq!(refused.status(), http::StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().get("grpc-status").is_none());
}

/// An IP rule on a tonic server finds the peer in tonic's `TcpConnectInfo` (no extra code);
/// without any peer address the same rule answers `INTERNAL`, naming nothing of the rule.
#[tokio::test]
async fn ip_rules_read_tonics_peer_and_without_one_answer_internal() {
    let per_peer = Rule::new(
        "say-per-peer",
        Quota::token_bucket(5, Rate::per_minute(6)).expect("valid"),
        tollgate_tower::key::PeerIp::new(),
    )
    .expect("a valid policy name");
    let layer = RateLimitLayer::new(MemoryStore::new())
        .grpc("test.Echo/Say", per_peer)
        .expect("a valid method");
    let channel = serve(layer.clone()).await;
    for _ in 0..5 {
        call(&channel, "/test.Echo/Say").await.expect("allowed");
    }
    let refused = call(&channel, "/test.Echo/Say").await.expect_err("refused");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");

    // Called with no connection at all: nothing says who the peer is.
    let service = tower::Layer::layer(&layer, Echo);
    let request = http::Request::post("/test.Echo/Say")
        .header("content-type", "application/grpc")
        .body(tonic::body::Body::empty())
        .expect("a request");
    let response = service.oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), http::StatusCode::OK, "trailers-only");
    let status = tonic::Status::from_header_map(response.headers()).expect("a grpc status");
    assert_eq!(status.code(), Code::Internal);
    assert!(
        !status.message().contains("say-per-peer"),
        "{}",
        status.message()
    );
    assert!(status.details().is_empty());
}

/// The `RateLimit` fields are response metadata on allowed calls by default; a rule set can
/// turn them off.
#[tokio::test]
async fn a_rule_set_can_keep_the_ratelimit_metadata_off() {
    let rules = tollgate_tower::RuleSet::new()
        .headers(tollgate_tower::headers::HeaderStyle::none())
        .grpc("test.Echo/Say", burst_of_five())
        .expect("a valid method");
    let layer = RateLimitLayer::new(MemoryStore::new());
    layer
        .handle()
        .replace_rules(rules)
        .expect("memory counts these rules");
    let channel = serve(layer).await;
    let answer = call(&channel, "/test.Echo/Say").await.expect("allowed");
    assert!(answer.metadata().get("ratelimit").is_none());
    assert!(answer.metadata().get("ratelimit-policy").is_none());
}

/// tonic serves a method's path whatever the HTTP method, so a rule for a gRPC method counts
/// every HTTP method: a GET is no way around it. The content-type is read in any case;
/// gRPC-Web is answered as HTTP (its status travels otherwise).
#[tokio::test]
async fn a_grpc_rule_counts_every_http_method_and_reads_the_content_type_in_any_case() {
    let layer = RateLimitLayer::new(MemoryStore::new())
        .grpc("test.Echo/Say", burst_of_five())
        .expect("a valid method");
    let service = tower::Layer::layer(&layer, Echo);
    let send = |method: http::Method, kind: &'static str| {
        let service = service.clone();
        async move {
            let request = http::Request::builder()
                .method(method)
                .uri("/test.Echo/Say")
                .header("content-type", kind)
                .body(tonic::body::Body::empty())
                .expect("a request");
            service.oneshot(request).await.expect("infallible")
        }
    };
    for method in [http::Method::GET, http::Method::PUT, http::Method::PATCH] {
        send(method, "application/grpc").await;
    }
    send(http::Method::POST, "application/grpc").await;
    send(http::Method::DELETE, "application/grpc").await;
    // The sixth, whatever the method and however the type is written.
    for kind in [
        "APPLICATION/GRPC",
        "application/grpc+proto",
        "Application/gRPC; charset=x",
    ] {
        let refused = send(http::Method::GET, kind).await;
        let status = tonic::Status::from_header_map(refused.headers()).expect("a grpc status");
        assert_eq!(status.code(), Code::ResourceExhausted, "{kind}");
    }
    for kind in ["application/grpc-web", "application/grpcfoo"] {
        let refused = send(http::Method::POST, kind).await;
        assert_eq!(
            refused.status(),
            http::StatusCode::TOO_MANY_REQUESTS,
            "{kind}"
        );
        assert!(refused.headers().get("grpc-status").is_none(), "{kind}");
    }
}

/// A layer responder for a service that serves HTTP and gRPC tells the two apart: its own JSON
/// for HTTP callers, the layer's gRPC answer for gRPC callers.
#[tokio::test]
async fn a_responder_tells_grpc_calls_from_http_ones() {
    let layer = RateLimitLayer::new(MemoryStore::new())
        .grpc("test.Echo/Say", burst_of_five())
        .expect("a valid method")
        .responder(|refused: &tollgate_tower::Refused| {
            if refused.is_grpc_call() {
                return refused.grpc_response();
            }
            let mut response =
                http::Response::new(bytes::Bytes::from_static(b"{\"error\":\"slow\"}"));
            *response.status_mut() = refused.status();
            response
        });
    let channel = serve(layer.clone()).await;
    for _ in 0..5 {
        call(&channel, "/test.Echo/Say").await.expect("allowed");
    }
    let refused = call(&channel, "/test.Echo/Say").await.expect_err("refused");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(refused.get_details_retry_info().is_some());

    let service = tower::Layer::layer(&layer, Echo);
    let request = http::Request::post("/test.Echo/Say")
        .body(tonic::body::Body::empty())
        .expect("a request");
    let http_refusal = service.oneshot(request).await.expect("infallible");
    assert_eq!(http_refusal.status(), http::StatusCode::TOO_MANY_REQUESTS);
    assert!(http_refusal.headers().get("grpc-status").is_none());
}
