//! The response future of [`RateLimit`](crate::RateLimit).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Response;
use pin_project_lite::pin_project;

use crate::body::ResponseBody;
use crate::headers::disclosure::Disclosure;
use crate::pipeline::after_response::AfterResponse;

/// A boxed response future, for the paths that must wait (a remote store, a pacing delay).
pub(crate) type BoxedResponse<B, E> =
    Pin<Box<dyn Future<Output = Result<Response<ResponseBody<B>>, E>> + Send>>;

pin_project! {
    /// Response future of [`RateLimit`](crate::RateLimit): the layer's own response ready at once, the inner
    /// service's future (whose response gets the rate-limit headers), or — for remote stores and
    /// pacing delays only — a boxed future.
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        state: State<F, B, E>,
    }
}

pin_project! {
    #[project = StateProjection]
    enum State<F, B, E> {
        Ready { response: Option<Response<ResponseBody<B>>> },
        Inner { #[pin] future: F, disclosure: Option<Disclosure>, after: Option<AfterResponse> },
        Boxed { future: BoxedResponse<B, E> },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    /// The layer's own `response` (a refusal, a missing key, a failed store), ready at once.
    pub(crate) fn ready(response: Response<ResponseBody<B>>) -> Self {
        ResponseFuture {
            state: State::Ready {
                response: Some(response),
            },
        }
    }

    pub(crate) fn inner(future: F, disclosure: Disclosure, after: Option<AfterResponse>) -> Self {
        ResponseFuture {
            state: State::Inner {
                future,
                disclosure: Some(disclosure),
                after,
            },
        }
    }

    pub(crate) fn boxed(future: BoxedResponse<B, E>) -> Self {
        ResponseFuture {
            state: State::Boxed { future },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProjection::Ready { response } => Poll::Ready(Ok(response
                .take()
                .expect("ResponseFuture polled after completion"))),
            StateProjection::Inner {
                future,
                disclosure,
                after,
            } => {
                let response = ready!(future.poll(cx))?;
                Poll::Ready(Ok(finish(response, disclosure.take(), after.take())))
            }
            StateProjection::Boxed { future } => future.as_mut().poll(cx),
        }
    }
}

/// The inner service's response, with the rate-limit fields added, after refunding charges
/// that its status says do not count; its body holds the request's concurrency slots until it
/// ends, and settles its estimates then.
pub(crate) fn finish<B>(
    response: Response<B>,
    disclosure: Option<Disclosure>,
    after: Option<AfterResponse>,
) -> Response<ResponseBody<B>> {
    let mut response = match after {
        None => response.map(|body| ResponseBody::holding(body, None)),
        Some(after) => {
            let (mut parts, body) = response.into_parts();
            let until_end = after.on_head(&mut parts);
            Response::from_parts(parts, ResponseBody::holding(body, Some(until_end)))
        }
    };
    if let Some(disclosure) = disclosure {
        disclosure.write(response.headers_mut());
    }
    response
}

impl<F, B, E> fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
