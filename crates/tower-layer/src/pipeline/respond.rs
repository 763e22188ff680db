//! The responses the layer writes itself: refusals, a missing key, a failed store.

use bytes::Bytes;
use http::Response;

use crate::headers::Problem;
#[cfg(feature = "grpc")]
use crate::headers::grpc;
use crate::headers::refused::Refused;
use crate::pipeline::plan::Unplanned;
use crate::rules::on_refusal::OnRefusal;
use crate::rules::rule::Rule;
use crate::settings::Settings;

/// Whether the layer answers `request` as a gRPC call (feature `grpc`, else never):
/// `content-type: application/grpc`, or a subtype such as `application/grpc+proto` (any case).
/// gRPC-Web (`application/grpc-web*`) frames its status otherwise, and is answered as HTTP.
pub(crate) fn is_grpc(request: &http::request::Parts) -> bool {
    #[cfg(feature = "grpc")]
    {
        let Some(kind) = request.headers.get(http::header::CONTENT_TYPE) else {
            return false;
        };
        let kind = kind.as_bytes();
        const GRPC: &[u8] = b"application/grpc";
        kind.len() >= GRPC.len()
            && kind[..GRPC.len()].eq_ignore_ascii_case(GRPC)
            && matches!(kind.get(GRPC.len()), None | Some(b'+' | b';' | b' '))
    }
    #[cfg(not(feature = "grpc"))]
    {
        let _ = request;
        false
    }
}

/// What a refusal by `rule` answers (to a gRPC call when `grpc`): the rule's own responder,
/// else the layer's, else the default.
pub(crate) fn answer_refusal(
    settings: &Settings,
    rule: &Rule,
    refused: Refused,
    grpc: bool,
) -> Response<Bytes> {
    match &rule.on_refusal {
        OnRefusal::Respond(respond) => respond(&refused),
        _ => match &settings.responder {
            Some(responder) => responder(&refused),
            #[cfg(feature = "grpc")]
            None if grpc => refused.grpc_response(),
            None => {
                let _ = grpc;
                refused.default_response()
            }
        },
    }
}

/// A rule stopped the request before counting: it needs a key the request lacks, or its key
/// cannot be found because of the deployment.
pub(crate) fn unplanned(unplanned: &Unplanned, grpc: bool) -> Response<Bytes> {
    #[cfg(feature = "grpc")]
    if grpc {
        return match unplanned {
            Unplanned::MissingKey { status, rule } => grpc::missing_key(rule.as_str(), *status),
            Unplanned::Misconfigured => grpc::misconfigured(),
        };
    }
    let _ = grpc;
    problem_response(match unplanned {
        Unplanned::MissingKey { status, rule } => Problem::missing_key(rule.as_str(), *status),
        Unplanned::Misconfigured => Problem::misconfigured(),
    })
}

/// The store failed and a rule fails closed: 503 with `Retry-After` (naming no rule: which
/// store is down is the operator's business, not the caller's).
pub(crate) fn limiter_unavailable(settings: &Settings, grpc: bool) -> Response<Bytes> {
    #[cfg(feature = "grpc")]
    if grpc {
        return grpc::unavailable(settings.unavailable_retry_after);
    }
    let _ = grpc;
    problem_response(Problem::limiter_unavailable(
        settings.unavailable_retry_after,
    ))
}

fn problem_response(problem: Problem) -> Response<Bytes> {
    problem.into_response()
}
