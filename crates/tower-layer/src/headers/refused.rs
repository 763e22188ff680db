//! A refusal as the responder hooks see it, and the hook's type.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use tollgate_core::{Decision, Quota, RuleId};

use crate::headers::disclosure::Disclosure;
use crate::headers::problem::Problem;
use crate::headers::report::PolicyReport;
use crate::headers::retry_after::{insert_retry_after, refusal_retry_after_secs};
use crate::headers::style::HeaderStyle;

/// Renders a refusal the service's own way (custom JSON, a gRPC status): the hook
/// [`RateLimitLayer::responder`](crate::RateLimitLayer::responder) sets, and a rule's own
/// [`OnRefusal::Respond`](crate::OnRefusal::Respond).
pub type Responder = Arc<dyn Fn(&Refused) -> Response<Bytes> + Send + Sync>;

/// A refusal, as the layer's responder hook sees it: which rule refused, its decision, the
/// rate-limit headers the layer would send, and the response it would send by default.
///
/// ```
/// use bytes::Bytes;
/// use tollgate_core::MemoryStore;
/// use tollgate_tower::{RateLimitLayer, Refused};
///
/// // Answer refusals as a JSON error of the service's own shape, keeping tollgate's headers
/// // (`retry_after_secs` is the number the `Retry-After` header carries).
/// let layer = RateLimitLayer::new(MemoryStore::new()).responder(|refused: &Refused| {
///     let body = format!(r#"{{"error":"slow_down","retry_in":{}}}"#, refused.decision().retry_after_secs());
///     let mut response = http::Response::new(Bytes::from(body));
///     *response.status_mut() = http::StatusCode::TOO_MANY_REQUESTS;
///     response.headers_mut().extend(refused.headers().clone());
///     response
/// });
/// # let _ = layer;
/// ```
#[derive(Debug, Clone)]
pub struct Refused {
    rule: RuleId,
    quota: Quota,
    decision: Decision,
    headers: HeaderMap,
    status: StatusCode,
    grpc: bool,
}

impl Refused {
    /// A refusal by `rule` with `decision`; `headers` are the rate-limit fields to send, to which
    /// `Retry-After` is added (whole seconds, rounded up; none when the cost can never fit).
    pub(crate) fn new(
        rule: &RuleId,
        quota: Quota,
        decision: Decision,
        mut headers: HeaderMap,
    ) -> Self {
        if let Some(secs) = refusal_retry_after_secs(&decision) {
            insert_retry_after(&mut headers, secs);
        }
        Refused {
            rule: rule.clone(),
            quota,
            decision,
            headers,
            status: StatusCode::TOO_MANY_REQUESTS,
            grpc: false,
        }
    }

    /// The refusal of a gRPC call (`content-type: application/grpc`), or not.
    pub(crate) fn of_grpc_call(mut self, grpc: bool) -> Self {
        self.grpc = grpc;
        self
    }

    /// Whether the refused request is a gRPC call (`content-type: application/grpc`, or a
    /// subtype, in any case): a responder for a service that serves both HTTP and gRPC answers
    /// such a call as gRPC clients read (with the `grpc` feature, `Refused::grpc_response` is
    /// the layer's own gRPC answer). Always `false` without the `grpc` feature, which is what
    /// tells gRPC calls apart.
    pub fn is_grpc_call(&self) -> bool {
        self.grpc
    }

    /// The layer's own gRPC answer to this refusal (feature `grpc`): a trailers-only
    /// `RESOURCE_EXHAUSTED` (or `UNAVAILABLE` for a rule that answers 503) with `RetryInfo`
    /// and `QuotaFailure` details and the rate-limit fields as metadata.
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_tower::{RateLimitLayer, Refused};
    ///
    /// // JSON errors for HTTP callers; gRPC callers keep the layer's gRPC answer.
    /// let layer = RateLimitLayer::new(MemoryStore::new()).responder(|refused: &Refused| {
    ///     if refused.is_grpc_call() {
    ///         return refused.grpc_response();
    ///     }
    ///     let mut response = http::Response::new(bytes::Bytes::from_static(b"{\"error\":\"slow_down\"}"));
    ///     *response.status_mut() = refused.status();
    ///     response.headers_mut().extend(refused.headers().clone());
    ///     response
    /// });
    /// # let _ = layer;
    /// ```
    #[cfg(feature = "grpc")]
    pub fn grpc_response(&self) -> Response<Bytes> {
        crate::headers::grpc::refusal_response(self.grpc_status(), &self.headers)
    }

    /// The refusal as a gRPC status (feature `grpc`): what [`grpc_response`](Self::grpc_response)
    /// carries, and what ends a call whose inbound message was refused.
    #[cfg(feature = "grpc")]
    pub(crate) fn grpc_status(&self) -> tonic::Status {
        crate::headers::grpc::status_of_refusal(
            &self.rule,
            &self.quota,
            &self.decision,
            self.status(),
        )
    }

    /// The refusal answered with `status` (a rule's [`OnRefusal::Unavailable`] answers 503).
    ///
    /// [`OnRefusal::Unavailable`]: crate::OnRefusal::Unavailable
    pub(crate) fn answered_with(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// The status the refusal is answered with: `429 Too Many Requests`, or `503 Service
    /// Unavailable` for a rule that asks for it ([`OnRefusal::Unavailable`]); a request that
    /// costs more than the rule ever allows is always 429.
    ///
    /// [`OnRefusal::Unavailable`]: crate::OnRefusal::Unavailable
    pub fn status(&self) -> StatusCode {
        if self.decision.refusal() == Some(tollgate_core::RefusalReason::CostExceedsLimit) {
            return StatusCode::TOO_MANY_REQUESTS;
        }
        self.status
    }

    /// The refusal of policy `rule` under `quota` with `decision`, with the rate-limit fields
    /// `style` asks for (this policy alone): what code outside the layer — a typed limit in a
    /// handler — uses to answer exactly as the layer would.
    pub fn for_policy(rule: &RuleId, quota: Quota, decision: Decision, style: HeaderStyle) -> Self {
        let headers = Disclosure::of(style, [(rule, quota, &decision)]).to_headers();
        Refused::new(rule, quota, decision, headers)
    }

    /// The quota in force when refused.
    pub fn quota(&self) -> &Quota {
        &self.quota
    }

    /// The refusing rule.
    pub fn rule(&self) -> &RuleId {
        &self.rule
    }

    /// Its decision.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The headers a refusal carries: `Retry-After` (unless the cost can never fit) and the
    /// `RateLimit` / `RateLimit-Policy` (and, if asked, legacy) fields, refusing policy first.
    /// A responder should send them.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The response the layer sends without a responder: [`status`](Self::status) (`429 Too
    /// Many Requests` unless the rule asks for 503), `Retry-After` in whole seconds rounded up,
    /// the rate-limit headers and an RFC 9457 problem body (its own problem type when the cost
    /// can never fit).
    pub fn default_response(&self) -> Response<Bytes> {
        let report = PolicyReport::new(self.rule.as_str(), &self.quota, &self.decision);
        let problem = Problem::for_refusal(&report)
            .unwrap_or_else(|| {
                Problem::rate_limited(self.rule.as_str(), self.decision.retry_after())
            })
            .answered_with(self.status());
        let mut response = problem.into_response();
        for (name, value) in &self.headers {
            response.headers_mut().insert(name, value.clone());
        }
        response
    }
}
