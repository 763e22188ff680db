//! Answers for gRPC callers (feature `grpc`): a request whose `content-type` is
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
use http::header::CONTENT_TYPE;
use http::request::Parts;
use http::{Response, StatusCode};
use tollgate_core::{Algorithm, Quota, RefusalReason};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::pipeline::refused::Refused;

mod framing;
pub(crate) mod messages;

/// Whether `request` is a gRPC call: `content-type: application/grpc`, or a subtype such as
/// `application/grpc+proto` (any case). gRPC-Web (`application/grpc-web*`) frames its status
/// otherwise, and is answered as HTTP.
pub(crate) fn is_grpc(request: &Parts) -> bool {
    let Some(kind) = request.headers.get(CONTENT_TYPE) else {
        return false;
    };
    let kind = kind.as_bytes();
    const GRPC: &[u8] = b"application/grpc";
    kind.len() >= GRPC.len()
        && kind[..GRPC.len()].eq_ignore_ascii_case(GRPC)
        && matches!(kind.get(GRPC.len()), None | Some(b'+' | b';' | b' '))
}

/// A refusal, as a gRPC status with its details and the rate-limit fields as metadata.
pub(crate) fn refusal(refused: &Refused) -> Response<Bytes> {
    let mut response = status_response(refusal_status(refused));
    for (name, value) in refused.headers() {
        response.headers_mut().insert(name, value.clone());
    }
    response
}

/// A refusal as a gRPC status: `RESOURCE_EXHAUSTED` (or `UNAVAILABLE` for a rule answering
/// 503) with `RetryInfo` and `QuotaFailure` details.
pub(crate) fn refusal_status(refused: &Refused) -> Status {
    let policy = refused.rule().as_str();
    let decision = refused.decision();
    let never = decision.refusal() == Some(RefusalReason::CostExceedsLimit);
    let wait = decision.retry_after();
    let (code, message) = match (never, refused.status()) {
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
    details.add_quota_failure_violation(policy, describe(refused.quota()));
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
