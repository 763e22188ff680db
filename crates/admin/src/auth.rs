//! Who is asking: a named token in `Authorization: Bearer` (every endpoint), or — for the
//! status page only — HTTP Basic with the token as password, or a session cookie.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;

use crate::error::ApiError;
use crate::page;
use crate::session::cookie_of;
use crate::state::State;

/// The name of the token a write (or any `/v1` request) was authenticated with: bearer only.
#[derive(Debug, Clone)]
pub(crate) struct Operator(pub(crate) String);

/// The name of the token the status page was opened with: bearer, Basic or a session cookie.
#[derive(Debug, Clone)]
pub(crate) struct Viewer(pub(crate) String);

impl FromRequestParts<Arc<State>> for Operator {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<State>) -> Result<Self, Response> {
        let Some(presented) = bearer(&parts.headers) else {
            refused(parts, "no bearer token");
            return Err(ApiError::Unauthorized { wrong: false }.into_response());
        };
        match state.tokens.verify(presented.as_bytes()) {
            Some(name) => Ok(Operator(name.to_owned())),
            None => {
                refused(parts, "wrong bearer token");
                Err(ApiError::Unauthorized { wrong: true }.into_response())
            }
        }
    }
}

impl FromRequestParts<Arc<State>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<State>) -> Result<Self, Response> {
        let headers = &parts.headers;
        let presented = bearer(headers).or_else(|| basic_password(headers));
        let name = match &presented {
            Some(secret) => state.tokens.verify(secret.as_bytes()).map(str::to_owned),
            None => cookie_of(headers).and_then(|id| state.sessions.token(&id)),
        };
        match name {
            Some(name) => Ok(Viewer(name)),
            None => {
                let presented_wrong = presented.is_some();
                if presented_wrong {
                    refused(parts, "wrong credentials for the status page");
                }
                Err(page::unauthenticated(parts, presented_wrong))
            }
        }
    }
}

/// The token of `Authorization: Bearer <token>`.
fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(|c: char| c.is_ascii_whitespace())?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_owned())
}

/// The password of `Authorization: Basic <base64 user:password>` (the user is not checked).
fn basic_password(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(|c: char| c.is_ascii_whitespace())?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    text.split_once(':')
        .map(|(_, password)| password.to_owned())
}

/// Logs a refused request (never what was presented).
pub(crate) fn refused(parts: &Parts, reason: &str) {
    let path = page::original_path(parts);
    tracing::warn!(target: "tollgate::admin", method = %parts.method, path, reason, "admin request refused: 401");
}
