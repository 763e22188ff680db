//! gRPC refusals (feature `grpc`): a trailers-only gRPC answer (HTTP 200 with `grpc-status` in
//! its headers, as limiters answer) is retried like the HTTP status it stands for —
//! `RESOURCE_EXHAUSTED` (8) like `429`, `UNAVAILABLE` (14) like `503` — and its wait is read from
//! the `google.rpc.RetryInfo` in `grpc-status-details-bin`, before `Retry-After`.
//!
//! [`GrpcRetryLayer`] puts a [`RetryAfterLayer`](crate::RetryAfterLayer) around a tonic
//! `Channel`: a call's message is buffered (up to the policy's body limit; a larger one is sent
//! once, never retried) so it can be sent again. Use it on a channel for **unary** calls: a
//! streaming call's messages would be buffered until its stream ends, which for a
//! bidirectional call may be never. What it does not do: keep a call's deadline (a wait is
//! capped by the policy's `max_wait`, not by `grpc-timeout`: set the cap below your deadlines),
//! and share cool-downs between calls (a tonic request names no host until the channel adds
//! one).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use prost::Message;
use tower_service::Service;

use crate::{BoxError, RetryAfter, RetryAfterLayer, RetryPolicy};

/// The HTTP status a gRPC status in `headers` stands for, when it is one a client may retry:
/// `RESOURCE_EXHAUSTED` → `429`, `UNAVAILABLE` → `503`.
pub(crate) fn as_http_status(headers: &HeaderMap) -> Option<StatusCode> {
    match headers.get("grpc-status")?.as_bytes() {
        b"8" => Some(StatusCode::TOO_MANY_REQUESTS),
        b"14" => Some(StatusCode::SERVICE_UNAVAILABLE),
        _ => None,
    }
}

/// Base64 as gRPC sends binary metadata: tonic without padding, others with.
const PADDED_OR_NOT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// The wait a gRPC status in `headers` asks for: its `RetryInfo`'s delay.
///
/// ```
/// use http::{HeaderMap, HeaderValue};
/// use tollgate_client::grpc_retry_delay;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("grpc-status", HeaderValue::from_static("8"));
/// // A google.rpc.Status whose details hold a RetryInfo of 2.5 s.
/// headers.insert("grpc-status-details-bin", HeaderValue::from_static(
///     "CAgaNgoodHlwZS5nb29nbGVhcGlzLmNvbS9nb29nbGUucnBjLlJldHJ5SW5mbxIKCggIAhCAyrXuAQ"));
/// assert_eq!(grpc_retry_delay(&headers), Some(std::time::Duration::from_millis(2_500)));
/// ```
pub fn grpc_retry_delay(headers: &HeaderMap) -> Option<Duration> {
    const RETRY_INFO: &str = "type.googleapis.com/google.rpc.RetryInfo";
    let encoded = headers.get("grpc-status-details-bin")?.as_bytes();
    let bytes = PADDED_OR_NOT.decode(encoded).ok()?;
    let status = tonic_types::pb::Status::decode(bytes.as_slice()).ok()?;
    let detail = status
        .details
        .iter()
        .find(|any| any.type_url == RETRY_INFO)?;
    let info = tonic_types::pb::RetryInfo::decode(detail.value.as_slice()).ok()?;
    let delay = info.retry_delay?;
    let seconds = u64::try_from(delay.seconds).ok()?;
    let nanos = u32::try_from(delay.nanos).ok()?;
    Some(Duration::new(seconds, 0).saturating_add(Duration::from_nanos(u64::from(nanos))))
}

/// A layer that makes a tonic channel's unary calls wait as a server asks (see the module docs).
/// Every call is treated as safe to repeat, whatever the policy's
/// [`idempotent_only`](RetryPolicy::idempotent_only) says: gRPC calls are all POSTs, and what
/// is retried (`RESOURCE_EXHAUSTED`, `UNAVAILABLE`) is what gRPC itself calls retryable.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tollgate_client::{GrpcRetryLayer, RetryPolicy};
/// use tower::Layer;
///
/// let channel = tonic::transport::Channel::from_static("http://127.0.0.1:50051").connect().await?;
/// let patient = GrpcRetryLayer::new(RetryPolicy::default()).layer(channel);
/// let client = tonic::client::Grpc::new(patient);
/// # let _ = client;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct GrpcRetryLayer {
    policy: RetryPolicy,
}

impl GrpcRetryLayer {
    /// A layer following `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        GrpcRetryLayer { policy }
    }
}

impl<S: Clone> tower_layer::Layer<S> for GrpcRetryLayer {
    type Service = GrpcRetry<S>;

    fn layer(&self, inner: S) -> GrpcRetry<S> {
        let policy = self.policy.clone().idempotent_only(false);
        let max_body = policy.max_body;
        GrpcRetry {
            once: TonicBody(inner.clone()),
            inner: tower_layer::Layer::layer(&RetryAfterLayer::new(policy), TonicBody(inner)),
            max_body,
        }
    }
}

/// The service [`GrpcRetryLayer`] makes.
#[derive(Debug, Clone)]
pub struct GrpcRetry<S> {
    inner: RetryAfter<TonicBody<S>>,
    /// The channel itself, for a message too large to keep: sent once.
    once: TonicBody<S>,
    max_body: usize,
}

/// The channel, taking a buffered message as a tonic body.
#[derive(Debug, Clone)]
pub struct TonicBody<S>(S);

impl<S, ResBody> Service<Request<Full<Bytes>>> for TonicBody<S>
where
    S: Service<Request<tonic::body::Body>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Full<Bytes>>) -> S::Future {
        self.0.call(request.map(tonic::body::Body::new))
    }
}

impl<S, ResBody> Service<Request<tonic::body::Body>> for GrpcRetry<S>
where
    S: Service<Request<tonic::body::Body>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    ResBody: Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResBody>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<tonic::body::Body>) -> Self::Future {
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let mut once = self.once.clone();
        let max_body = self.max_body;
        Box::pin(async move {
            let (parts, mut body) = request.into_parts();
            let mut kept = bytes::BytesMut::new();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(Into::<BoxError>::into)?;
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                kept.extend_from_slice(&data);
                if kept.len() > max_body {
                    // Too large to keep: what was read, then the rest, sent once.
                    let rest = Prefixed {
                        head: Some(kept.freeze()),
                        rest: body,
                    };
                    let request = Request::from_parts(parts, tonic::body::Body::new(rest));
                    return tower::ServiceExt::oneshot(&mut once.0, request)
                        .await
                        .map_err(Into::into);
                }
            }
            let message = Full::new(kept.freeze());
            inner.call(Request::from_parts(parts, message)).await
        })
    }
}

pin_project_lite::pin_project! {
    /// Bytes already read from a body, then the rest of it.
    struct Prefixed<B> {
        head: Option<Bytes>,
        #[pin]
        rest: B,
    }
}

impl<B> http_body::Body for Prefixed<B>
where
    B: http_body::Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        let this = self.project();
        if let Some(head) = this.head.take() {
            return Poll::Ready(Some(Ok(http_body::Frame::data(head))));
        }
        this.rest.poll_frame(cx)
    }
}
