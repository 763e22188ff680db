//! The tower side: [`RetryAfterLayer`] around any HTTP client service.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use http_body_util::BodyExt;
use tower::ServiceExt;
use tower_service::Service;

use crate::RetryPolicy;
use crate::attempts::{After, Attempts};

/// The error of a [`RetryAfter`] service: the inner service's, a body that could not be read
/// for buffering, or [`CoolingDown`](crate::CoolingDown).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A tower layer that makes an HTTP client wait as a server asks: on `429` and `503` (by
/// default) it waits the server's `Retry-After` (delta-seconds or HTTP-date, read against the
/// response's `Date`), else the `RateLimit` field's `t=`, plus a bounded jitter, and sends the
/// request again; with no hint, capped exponential backoff with full jitter. See
/// [`RetryPolicy`] for what is retried and the defaults, and the crate docs for the precedence.
///
/// It wraps any `Service<http::Request<B>>` answering `http::Response<_>` — hyper-util's legacy
/// client, say — whose request body can be made again from bytes (`B: From<Bytes>`, as
/// `Full<Bytes>` can).
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::Full;
/// use tollgate_client::{RetryAfterLayer, RetryPolicy};
/// use tower::{Layer, service_fn};
///
/// let client = service_fn(|_request: http::Request<Full<Bytes>>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::new())))
/// });
/// let patient = RetryAfterLayer::new(RetryPolicy::default()).layer(client);
/// # let _ = patient;
/// ```
#[derive(Debug, Clone, Default)]
pub struct RetryAfterLayer {
    policy: RetryPolicy,
}

impl RetryAfterLayer {
    /// A layer following `policy` (its budget and cool-downs are shared by every service it
    /// makes).
    pub fn new(policy: RetryPolicy) -> Self {
        RetryAfterLayer { policy }
    }
}

impl<S> tower_layer::Layer<S> for RetryAfterLayer {
    type Service = RetryAfter<S>;

    fn layer(&self, inner: S) -> RetryAfter<S> {
        RetryAfter {
            inner,
            policy: self.policy.clone(),
        }
    }
}

/// The service [`RetryAfterLayer`] makes.
#[derive(Debug, Clone)]
pub struct RetryAfter<S> {
    inner: S,
    policy: RetryPolicy,
}

impl<S, B, ResBody> Service<Request<B>> for RetryAfter<S>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes> + From<Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    ResBody: Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResBody>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The ready service serves the first send; its clone (made ready again) the retries.
        let ready = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, ready);
        let policy = self.policy.clone();
        Box::pin(send(inner, policy, request))
    }
}

/// Sends `request` through `inner` as `policy` says, again after each wait it asks for.
async fn send<S, B, ResBody>(
    mut inner: S,
    policy: RetryPolicy,
    request: Request<B>,
) -> Result<Response<ResBody>, BoxError>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Send,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes> + From<Bytes>,
    B::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let mut attempts = Attempts::for_uri(&policy, &parts.method, &parts.uri, &parts.headers);
    attempts.wait_to_send().await?;
    let small = body
        .size_hint()
        .exact()
        .is_some_and(|size| size <= policy.max_body as u64);
    if !small || !attempts.may_repeat(&parts.headers) {
        // Sent once: a streaming or large body cannot be sent again, nor an unsafe request.
        let response = call(&mut inner, Request::from_parts(parts, body)).await?;
        let _ = attempts.after(response.status(), response.headers(), false);
        return Ok(response);
    }
    // The size the body announced is not trusted: past the limit, reading stops with an error
    // (the body is partly read and cannot be sent any more).
    let bytes = http_body_util::Limited::new(body, policy.max_body)
        .collect()
        .await?
        .to_bytes();
    loop {
        let request = Request::from_parts(parts.clone(), B::from(bytes.clone()));
        let response = call(&mut inner, request).await?;
        match attempts.after(response.status(), response.headers(), true) {
            After::Done => return Ok(response),
            After::Retry(wait) => {
                drop(response);
                attempts.sleep(wait).await;
            }
        }
    }
}

async fn call<S, B, ResBody>(
    inner: &mut S,
    request: Request<B>,
) -> Result<Response<ResBody>, BoxError>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    S::Error: Into<BoxError>,
{
    inner
        .ready()
        .await
        .map_err(Into::into)?
        .call(request)
        .await
        .map_err(Into::into)
}
