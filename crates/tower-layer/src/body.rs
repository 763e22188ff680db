//! The response body of the middleware: the inner service's, or the layer's own.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::pipeline::after_response::UntilBodyEnds;
use crate::pipeline::cut::Cut;

pin_project! {
    /// The body of a response that went through [`RateLimit`](crate::RateLimit): the inner
    /// service's body, or one the layer wrote itself (a refusal, a missing key, a failed store).
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProjection]
    enum Kind<B> {
        // `until_end`: the request's concurrency slots, given back once the body has ended
        // (or when it is dropped before), and its estimates, settled then.
        Inner { #[pin] body: B, until_end: Option<UntilBodyEnds> },
        LayerWritten { data: Option<Bytes> },
    }
}

impl<B> ResponseBody<B> {
    /// Wraps the inner service's body, keeping `until_end` until it ends.
    pub(crate) fn holding(body: B, until_end: Option<UntilBodyEnds>) -> Self {
        let until_end = until_end.filter(|kept| !kept.is_empty());
        ResponseBody {
            kind: Kind::Inner { body, until_end },
        }
    }

    /// A body of `data`, written by the layer.
    pub(crate) fn layer_written(data: Bytes) -> Self {
        ResponseBody {
            kind: Kind::LayerWritten { data: Some(data) },
        }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.project().kind.project() {
            KindProjection::Inner { body, until_end } => {
                if let Some(cut) = until_end.as_ref().and_then(|kept| kept.cut.as_ref()) {
                    match cut.poll_cut(cx) {
                        Cut::GoOn => {}
                        Cut::End(trailers) => {
                            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                        }
                        Cut::Ended => {
                            until_end.take();
                            return Poll::Ready(None);
                        }
                    }
                }
                let frame = body.poll_frame(cx);
                // The handler may have ended its response while the cut happened (polling
                // its inbound stream from inside this poll): the cut's status wins.
                let ending = match &frame {
                    Poll::Ready(None) => true,
                    Poll::Ready(Some(Ok(frame))) => frame.is_trailers(),
                    _ => false,
                };
                if ending
                    && let Some(cut) = until_end.as_ref().and_then(|kept| kept.cut.as_ref())
                    && let Cut::End(trailers) = cut.poll_cut(cx)
                {
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
                // Ended, or failed (it will not be polled again): the request is over.
                if matches!(frame, Poll::Ready(None | Some(Err(_)))) {
                    until_end.take();
                }
                frame
            }
            KindProjection::LayerWritten { data } => Poll::Ready(
                data.take()
                    .filter(|data| !data.is_empty())
                    .map(|data| Ok(Frame::data(data))),
            ),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.is_end_stream(),
            Kind::LayerWritten { data } => data.as_ref().is_none_or(Bytes::is_empty),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.size_hint(),
            Kind::LayerWritten { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |data| data.len() as u64))
            }
        }
    }
}
