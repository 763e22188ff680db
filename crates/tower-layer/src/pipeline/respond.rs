//! The responses the layer writes itself: refusals, a missing key, a failed store.

use bytes::Bytes;
use http::Response;

use crate::headers::Problem;
use crate::pipeline::plan::Unplanned;
use crate::pipeline::refused::Refused;
use crate::settings::Settings;
use crate::{OnRefusal, Rule};

/// What a refusal by `rule` answers.
pub(crate) fn refusal(settings: &Settings, rule: &Rule, refused: Refused) -> Response<Bytes> {
    match &rule.on_refusal {
        OnRefusal::Respond(respond) => respond(&refused),
        _ => match &settings.responder {
            Some(responder) => responder(&refused),
            None => refused.default_response(),
        },
    }
}

/// A rule stopped the request before counting: it needs a key the request lacks, or its key
/// cannot be found because of the deployment.
pub(crate) fn unplanned(unplanned: &Unplanned) -> Response<Bytes> {
    problem_response(match unplanned {
        Unplanned::MissingKey { status, rule } => Problem::missing_key(rule.as_str(), *status),
        Unplanned::Misconfigured => Problem::misconfigured(),
    })
}

/// The store failed and a rule fails closed: 503 with `Retry-After` (naming no rule: which
/// store is down is the operator's business, not the caller's).
pub(crate) fn limiter_unavailable(settings: &Settings) -> Response<Bytes> {
    problem_response(Problem::limiter_unavailable(
        settings.unavailable_retry_after,
    ))
}

fn problem_response(problem: Problem) -> Response<Bytes> {
    problem.into_response()
}
