//! What a refusal by a rule does: answer 429 (or 503), answer with a response of its own, or let
//! the request through flagged.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;

use crate::headers::refused::{Refused, Responder};

/// What a refusal by a rule does.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum OnRefusal {
    /// Answer `429 Too Many Requests` with `Retry-After` and a problem body (or the layer's
    /// responder).
    #[default]
    Reject,
    /// Answer with this response instead (a challenge, such as a CAPTCHA page), built from what
    /// the layer's own responder would see: the [`Refused`](crate::Refused) with its rule,
    /// decision and rate-limit headers (`Retry-After` included), so a challenge can carry them.
    Respond(Responder),
    /// Let the request through, marked with a [`Flagged`](crate::Flagged) extension naming the
    /// rule, so downstream code can, say, put a new account into review.
    Flag,
    /// Answer `503 Service Unavailable` with `Retry-After` and a problem body (or the layer's
    /// responder, which reads it from [`Refused::status`](crate::Refused::status)): for a limit
    /// that protects the service's capacity rather than metering its caller, such as a
    /// concurrency rule. A request that costs more than the rule ever allows is still 429.
    Unavailable,
}

impl OnRefusal {
    /// Answers refusals with `respond(refused)`.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use tollgate_tower::{OnRefusal, Refused};
    ///
    /// // A challenge page that keeps tollgate's headers (Retry-After, RateLimit).
    /// let challenge = OnRefusal::respond(|refused: &Refused| {
    ///     let mut page = http::Response::new(Bytes::from_static(b"<form>solve me</form>"));
    ///     page.headers_mut().extend(refused.headers().clone());
    ///     page
    /// });
    /// # let _ = challenge;
    /// ```
    pub fn respond(
        respond: impl Fn(&Refused) -> http::Response<Bytes> + Send + Sync + 'static,
    ) -> Self {
        OnRefusal::Respond(Arc::new(respond))
    }
}

impl OnRefusal {
    /// The HTTP status a refusal is answered with: 503 for
    /// [`Unavailable`](OnRefusal::Unavailable), else 429.
    pub(crate) fn http_status(&self) -> StatusCode {
        match self {
            OnRefusal::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::TOO_MANY_REQUESTS,
        }
    }
}

impl fmt::Debug for OnRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OnRefusal::Reject => f.write_str("Reject"),
            OnRefusal::Respond(_) => f.write_str("Respond(..)"),
            OnRefusal::Flag => f.write_str("Flag"),
            OnRefusal::Unavailable => f.write_str("Unavailable"),
        }
    }
}
