//! A response stream ended early by the layer: when an inbound gRPC message is refused
//! mid-call, the response ends with the refusal's status in its trailers, whatever the handler
//! goes on writing.

use std::sync::Mutex;
use std::task::{Context, Waker};

use http::HeaderMap;

/// Shared by a call's request body (which cuts) and its response body (which ends).
#[derive(Debug, Default)]
pub(crate) struct StreamCut {
    state: Mutex<CutState>,
}

#[derive(Debug, Default)]
struct CutState {
    /// The trailers to end the response with, once cut (taken when written).
    trailers: Option<HeaderMap>,
    cut: bool,
    /// The response body's task, woken when the stream is cut while it waits.
    waiting: Option<Waker>,
}

impl StreamCut {
    /// Ends the response with `trailers` (the first cut wins).
    // Only per-message rules cut, and only with the `grpc` feature.
    #[cfg_attr(not(feature = "grpc"), allow(dead_code))]
    pub(crate) fn cut(&self, trailers: HeaderMap) {
        let waiting = {
            let mut state = self
                .state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if state.cut {
                return;
            }
            state.cut = true;
            state.trailers = Some(trailers);
            state.waiting.take()
        };
        if let Some(waker) = waiting {
            waker.wake();
        }
    }

    /// The cut's trailers, if the stream was cut and they were not written yet (taken: the
    /// response body will not write them).
    pub(crate) fn take_cut(&self) -> Option<HeaderMap> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        state.trailers.take()
    }

    /// What the response body does now: goes on (remembering `cx` to be woken on a cut), ends
    /// with the cut's trailers (once), or has ended.
    pub(crate) fn poll_cut(&self, cx: &mut Context<'_>) -> Cut {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if state.cut {
            return state.trailers.take().map_or(Cut::Ended, Cut::End);
        }
        match &mut state.waiting {
            Some(waker) => waker.clone_from(cx.waker()),
            None => state.waiting = Some(cx.waker().clone()),
        }
        Cut::GoOn
    }
}

/// What a response body does about a [`StreamCut`].
#[derive(Debug)]
pub(crate) enum Cut {
    /// Nothing was cut: go on with the handler's body.
    GoOn,
    /// End with these trailers.
    End(HeaderMap),
    /// The trailers were written: the response has ended.
    Ended,
}
