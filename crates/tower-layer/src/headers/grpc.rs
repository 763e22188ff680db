//! What a gRPC caller sees (feature `grpc`): a request whose `content-type` is
//! `application/grpc` (or `application/grpc+proto`, ...) is answered the way gRPC clients read, a trailers-only response (HTTP 200,
//! the status in `grpc-status`, `grpc-message` and `grpc-status-details-bin`), never an HTTP
//! error status a gRPC client would read as `UNAVAILABLE` or `INTERNAL`:
//!
//! * a refusal: `RESOURCE_EXHAUSTED` (8) with a `google.rpc.RetryInfo` (the rule's wait) and a
//!   `google.rpc.QuotaFailure` naming the policy; a rule answering 503
//!   ([`OnRefusal::Unavailable`](crate::OnRefusal::Unavailable)): `UNAVAILABLE` (14), the same
//!   details; a cost that can never fit: `RESOURCE_EXHAUSTED` with no `RetryInfo`;
//! * a rule failing closed while the store is down: `UNAVAILABLE` with `RetryInfo`;
//! * a rule whose key cannot be found because of the deployment: `INTERNAL` (13), nothing of
//!   the rule said;
//! * a request refused for want of a key: the gRPC code of the rule's HTTP status
//!   (`401` → `UNAUTHENTICATED`, `403` → `PERMISSION_DENIED`, `429` → `RESOURCE_EXHAUSTED`,
//!   `503` → `UNAVAILABLE`, any other → `INVALID_ARGUMENT`).
//!
//! The `RateLimit` fields (and `Retry-After`) go with a refusal as metadata, as they go with
//! allowed calls' response headers. A rule's own responder, or the layer's, still wins: it was
//! asked for. Without the feature, gRPC requests get the HTTP answers.
//!
//! A message refused mid-call by a per-message rule ([`Rule::per_message`](crate::Rule::per_message))
//! ends the call with the same status in the response's trailers; no responder is asked (the
//! response has begun), and the `RateLimit` fields are not sent with it.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use tollgate_core::{Algorithm, Decision, Quota, RefusalReason, RuleId};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// A refusal's `status`, answered as a trailers-only response carrying `headers` (the
/// rate-limit fields) as metadata.
pub(crate) fn refusal_response(status: Status, headers: &HeaderMap) -> Response<Bytes> {
    let mut response = status_response(status);
    for (name, value) in headers {
        response.headers_mut().insert(name, value.clone());
    }
    response
}

/// The gRPC status of a refusal by `rule` under `quota` with `decision`, which HTTP would
/// answer with `http_status`: `RESOURCE_EXHAUSTED` (or `UNAVAILABLE` for a rule answering 503)
/// with `RetryInfo` and `QuotaFailure` details.
pub(crate) fn status_of_refusal(
    rule: &RuleId,
    quota: &Quota,
    decision: &Decision,
    http_status: StatusCode,
) -> Status {
    let policy = rule.as_str();
    let never = decision.refusal() == Some(RefusalReason::CostExceedsLimit);
    let wait = decision.retry_after();
    let (code, message) = match (never, http_status) {
        (true, _) => (
            Code::ResourceExhausted,
            format!("rate limit {policy}: this call costs more than the limit ever allows"),
        ),
        (false, StatusCode::SERVICE_UNAVAILABLE) => (
            Code::Unavailable,
            format!(
                "rate limit {policy}: at capacity; retry after {} s",
                whole_seconds(wait)
            ),
        ),
        (false, _) => (
            Code::ResourceExhausted,
            format!(
                "rate limit {policy} reached; retry after {} s",
                whole_seconds(wait)
            ),
        ),
    };
    let mut details = if never {
        ErrorDetails::new()
    } else {
        ErrorDetails::with_retry_info(Some(wait))
    };
    details.add_quota_failure_violation(policy, describe(quota));
    Status::with_error_details(code, message, details)
}

/// A rule fails closed while the store is down: `UNAVAILABLE`, retry after `wait`.
pub(crate) fn unavailable(wait: Duration) -> Response<Bytes> {
    status_response(unavailable_status(wait))
}

/// `UNAVAILABLE` with `RetryInfo`: the limiter cannot answer.
pub(crate) fn unavailable_status(wait: Duration) -> Status {
    let details = ErrorDetails::with_retry_info(Some(wait));
    let message = format!(
        "the rate limiter cannot answer; retry after {} s",
        whole_seconds(wait)
    );
    Status::with_error_details(Code::Unavailable, message, details)
}

/// The limiter is misconfigured for this request: `INTERNAL`, no detail of the rule.
pub(crate) fn misconfigured() -> Response<Bytes> {
    status_response(Status::new(
        Code::Internal,
        "the rate limiter is misconfigured, so this call was not processed",
    ))
}

/// A request without the key `policy` needs, refused with the rule's HTTP `status`.
pub(crate) fn missing_key(policy: &str, status: StatusCode) -> Response<Bytes> {
    let code = match status {
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::TOO_MANY_REQUESTS => Code::ResourceExhausted,
        StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
        _ => Code::InvalidArgument,
    };
    status_response(Status::new(
        code,
        format!("this call needs the key of rate limit {policy}"),
    ))
}

/// A trailers-only response carrying `status`.
fn status_response(status: Status) -> Response<Bytes> {
    status.into_http()
}

/// What a quota allows, for a `QuotaFailure` violation's description.
fn describe(quota: &Quota) -> String {
    match quota.algorithm() {
        Algorithm::Concurrency => format!("{} calls at once", quota.limit()),
        algorithm => format!(
            "{} per {:?} ({})",
            quota.limit(),
            quota.replenish_time(),
            algorithm.name()
        ),
    }
}

fn whole_seconds(wait: Duration) -> u64 {
    tollgate_core::whole_seconds_up(wait)
}
