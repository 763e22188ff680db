//! What a rule does with a request that has no key for it.

use http::StatusCode;

/// What a rule does with a request that has no key for it (an anonymous caller for an account
/// rule, a request without an API key).
///
/// A key that cannot be found because of how the service is deployed — an IP rule on a request
/// that carries no peer address — is not a missing key: the request is answered `500
/// Internal Server Error` (problem type `urn:tollgate:problem:misconfigured`) and the fix is
/// logged at `error`, at most once a minute per rule, whatever this says, unless it says
/// [`SkipAlways`](MissingKey::SkipAlways). A shadow or flag rule logs the same error but never
/// stops a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MissingKey {
    /// The rule does not apply to this request (the default: other rules, such as a per-IP one,
    /// still do).
    #[default]
    Skip,
    /// Refuse the request with this status (for example 401 for an API that needs a key) and a
    /// `urn:tollgate:problem:missing-key` problem body. The status must be a client error
    /// (4xx); anything else is sent as 400. The layer's responder hook is for rate-limit
    /// refusals and does not render this one.
    Refuse(StatusCode),
    /// Skip the rule even when its key cannot be found because of the deployment (no peer
    /// address): for a service that is knowingly served without one, such as a test that
    /// builds requests by hand. No `500` and no `error`; every skip is still counted
    /// ([`Rule::keyless_skips`](crate::Rule::keyless_skips)) and the first one logged at `warn`, as with `Skip`.
    SkipAlways,
}
