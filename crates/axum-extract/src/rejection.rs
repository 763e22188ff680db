//! Why a typed limit did not let a request through, rendered exactly as the layer would.

use std::fmt;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use tollgate_tower::headers::Problem;
use tollgate_tower::{Refused, Responder};

/// A typed limit refused, or could not decide. Renders as the layer's own responses: `429` with
/// `Retry-After`, the `RateLimit` fields and an RFC 9457 problem body for a refusal; `503` for a
/// limit that fails closed while the store is down; `401` for a [`Limited`](crate::Limited)
/// extractor that found no key; `500` (and an error log) when the router was not given a
/// [`Tollgate`](crate::Tollgate).
///
/// ```
/// use axum::response::IntoResponse;
/// use tollgate_axum::LimitRejection;
///
/// fn render(rejection: LimitRejection) -> axum::response::Response {
///     if let Some(refused) = rejection.refused_by() {
///         tracing::info!(rule = %refused.rule(), "refused in a handler");
///     }
///     rejection.into_response()
/// }
/// ```
#[derive(Debug)]
pub struct LimitRejection {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Refused(Box<Refused>, Rendering),
    StoreUnavailable {
        policy: String,
        retry_after: Duration,
        error: tollgate_core::StoreError,
    },
    MissingKey {
        policy: &'static str,
    },
    NotConfigured {
        reason: String,
    },
}

/// How a refusal is rendered: by the layer's responder hook, or the default response.
#[derive(Clone)]
struct Rendering(Option<Responder>);

impl fmt::Debug for Rendering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Responder(..)"
        } else {
            "Default"
        })
    }
}

impl LimitRejection {
    /// A refusal, rendered by `responder` (the layer's hook) when there is one.
    pub(crate) fn refused(refused: Refused, responder: Option<Responder>) -> Self {
        LimitRejection {
            kind: Kind::Refused(Box::new(refused), Rendering(responder)),
        }
    }

    pub(crate) fn store_unavailable(
        policy: &str,
        retry_after: Duration,
        error: tollgate_core::StoreError,
    ) -> Self {
        LimitRejection {
            kind: Kind::StoreUnavailable {
                policy: policy.to_owned(),
                retry_after,
                error,
            },
        }
    }

    pub(crate) fn missing_key(policy: &'static str) -> Self {
        LimitRejection {
            kind: Kind::MissingKey { policy },
        }
    }

    pub(crate) fn not_configured(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        tracing::error!(target: "tollgate::config", "{reason}");
        LimitRejection {
            kind: Kind::NotConfigured { reason },
        }
    }

    /// The refusal, when a limit refused (its rule, decision and headers).
    pub fn refused_by(&self) -> Option<&Refused> {
        match &self.kind {
            Kind::Refused(refused, _) => Some(refused),
            _ => None,
        }
    }

    /// Whether a limit refused the request (`429`).
    pub fn is_refused(&self) -> bool {
        matches!(self.kind, Kind::Refused(..))
    }

    /// Whether the store could not answer and the limit fails closed (`503`).
    pub fn is_store_unavailable(&self) -> bool {
        matches!(self.kind, Kind::StoreUnavailable { .. })
    }

    /// Whether the request had no key for the limit (`401`).
    pub fn is_missing_key(&self) -> bool {
        matches!(self.kind, Kind::MissingKey { .. })
    }

    /// Whether the router was not set up for typed limits, or a limit is declared wrongly (`500`).
    pub fn is_not_configured(&self) -> bool {
        matches!(self.kind, Kind::NotConfigured { .. })
    }
}

impl fmt::Display for LimitRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Refused(refused, _) => write!(
                f,
                "refused by rate limit policy {:?}; retry after {:?}",
                refused.rule().as_str(),
                refused.decision().retry_after()
            ),
            Kind::StoreUnavailable { policy, .. } => write!(
                f,
                "rate limit store unavailable and policy {policy:?} fails closed"
            ),
            Kind::MissingKey { policy } => {
                write!(f, "the request has no key for rate limit policy {policy:?}")
            }
            Kind::NotConfigured { reason } => {
                write!(f, "rate limiting is not configured: {reason}")
            }
        }
    }
}

impl std::error::Error for LimitRejection {
    /// The store's error, when the store could not answer and the limit fails closed.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::StoreUnavailable { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl IntoResponse for LimitRejection {
    fn into_response(self) -> Response {
        match self.kind {
            Kind::Refused(refused, Rendering(responder)) => match responder {
                Some(respond) => respond(&refused).map(Body::from),
                None => refused.default_response().map(Body::from),
            },
            Kind::StoreUnavailable { retry_after, .. } => {
                Problem::limiter_unavailable(retry_after).into_response::<Body>()
            }
            Kind::MissingKey { policy } => {
                Problem::missing_key(policy, StatusCode::UNAUTHORIZED).into_response::<Body>()
            }
            Kind::NotConfigured { .. } => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "rate limiting is not configured for this route",
            )
                .into_response(),
        }
    }
}
