//! Error answers: a status and a JSON body saying what went wrong (for a rule with mistakes,
//! each at its line and column, exactly as a rule file's are reported).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tollgate_config::ConfigErrors;
use utoipa::ToSchema;

use crate::changes::ChangeError;

/// Every error answer's body.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorBody {
    /// What went wrong, in a sentence.
    error: String,
    /// A rule's mistakes, each at its line and column (empty for other errors).
    errors: Vec<Mistake>,
    /// The rule file that was checked, when it is not the request body as sent (a `PATCH`
    /// merged into the rule in force): the lines and columns are in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    document: Option<String>,
}

/// One mistake in a rule.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Mistake {
    /// The document it is in (`request body`, or the merged document's name).
    file: String,
    /// Its line, from 1.
    line: usize,
    /// Its column, from 1.
    column: usize,
    /// What is wrong and how to fix it.
    message: String,
}

impl ErrorBody {
    /// A body with `error` alone.
    pub(crate) fn message(error: String) -> ErrorBody {
        ErrorBody {
            error,
            errors: Vec::new(),
            document: None,
        }
    }
}

/// Gives the answers axum writes itself as plain text — a query or path that does not parse,
/// a body too large (`413`), a method not served (`405`) — the JSON body every other error
/// has, keeping their status and headers (`Allow`, say).
pub(crate) async fn as_json(response: Response) -> Response {
    let status = response.status();
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_none_or(|kind| kind.as_bytes().starts_with(b"text/plain"));
    if !(status.is_client_error() || status.is_server_error()) || !plain {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 16 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_owned();
    let error = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_lowercase()
    } else {
        text
    };
    parts.headers.remove(header::CONTENT_TYPE);
    parts.headers.remove(header::CONTENT_LENGTH);
    let json = Json(ErrorBody::message(error)).into_response();
    let (json_parts, json_body) = json.into_parts();
    parts.headers.extend(json_parts.headers);
    Response::from_parts(parts, json_body)
}

/// Why a request failed.
#[derive(Debug)]
pub(crate) enum ApiError {
    /// No token, or a wrong one.
    Unauthorized { wrong: bool },
    /// No such rule (or change).
    NotFound(String),
    /// A request that is not what the endpoint takes (not the body's documented shape, a
    /// query out of its range): `400`.
    BadRequest(String),
    /// A body of the documented shape that still cannot be carried out (values that name no
    /// caller of the rule's key): `422`.
    Unprocessable(String),
    /// A rule with mistakes, each at its line and column; nothing changed: `422`.
    Invalid {
        errors: ConfigErrors,
        document: Option<String>,
    },
    /// The change cannot be made here.
    Conflict(String),
    /// The store (or fleet store) failed.
    Unavailable(String),
}

impl ApiError {
    /// A change's failure, with the document that was checked when it is not the body.
    pub(crate) fn of_change(error: ChangeError, document: Option<String>) -> ApiError {
        match error {
            ChangeError::Invalid(errors) => ApiError::Invalid { errors, document },
            ChangeError::Conflict(message) => ApiError::Conflict(message),
            ChangeError::Unavailable(message) => ApiError::Unavailable(message),
            ChangeError::Stale => ApiError::Conflict(
                "the fleet document kept changing while this change was made; try again".to_owned(),
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, error, errors, document) = match self {
            ApiError::Unauthorized { wrong } => {
                let message = if wrong {
                    "the token was not accepted"
                } else {
                    "this endpoint needs `Authorization: Bearer <admin token>`"
                };
                let mut response = (
                    StatusCode::UNAUTHORIZED,
                    Json(ErrorBody {
                        error: message.to_owned(),
                        errors: Vec::new(),
                        document: None,
                    }),
                )
                    .into_response();
                let challenge = if wrong {
                    "Bearer realm=\"tollgate-admin\", error=\"invalid_token\""
                } else {
                    "Bearer realm=\"tollgate-admin\""
                };
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(challenge),
                );
                return response;
            }
            ApiError::NotFound(message) => (StatusCode::NOT_FOUND, message, Vec::new(), None),
            ApiError::BadRequest(message) => (StatusCode::BAD_REQUEST, message, Vec::new(), None),
            ApiError::Unprocessable(message) => {
                (StatusCode::UNPROCESSABLE_ENTITY, message, Vec::new(), None)
            }
            ApiError::Invalid { errors, document } => (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("the rule has {} mistake(s); nothing changed", errors.len()),
                errors
                    .iter()
                    .map(|mistake| Mistake {
                        file: mistake.file.clone(),
                        line: mistake.line,
                        column: mistake.column,
                        message: mistake.message.clone(),
                    })
                    .collect(),
                document,
            ),
            ApiError::Conflict(message) => (StatusCode::CONFLICT, message, Vec::new(), None),
            ApiError::Unavailable(message) => {
                (StatusCode::SERVICE_UNAVAILABLE, message, Vec::new(), None)
            }
        };
        (
            status,
            Json(ErrorBody {
                error,
                errors,
                document,
            }),
        )
            .into_response()
    }
}
