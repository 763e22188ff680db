//! Logging in to the status page: a token exchanged for a session cookie.

use std::sync::Arc;

use axum::Form;
use axum::extract::{OriginalUri, State as Shared};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use serde::Deserialize;
use utoipa::ToSchema;

use super::{MountPoint, page_path};
use crate::error::ErrorBody;
use crate::session::{COOKIE, SESSION_LIFETIME, cookie_of};
use crate::state::State;

/// The login form's fields.
#[derive(Debug, Deserialize, ToSchema)]
pub(crate) struct LoginForm {
    /// An admin token.
    token: String,
}

/// The login form (`problem`: why the last try failed).
pub(crate) fn login(base: &str, problem: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "tollgate — log in" }
                style { (super::render::STYLE) }
            }
            body {
                main.login {
                    h1 { "tollgate status" }
                    @if let Some(problem) = problem {
                        p.problem role="alert" { (problem) }
                    }
                    form method="post" action={ (base) "/login" } {
                        label for="token" { "Admin token" }
                        input #token type="password" name="token" autocomplete="current-password" required;
                        button #log-in type="submit" { "Log in" }
                    }
                    p.hint {
                        "Or "
                        a href={ (page_path(base)) "?auth=basic" } { "use HTTP Basic" }
                        ": any user name, the token as password."
                    }
                }
            }
        }
    }
}

/// The login form.
#[utoipa::path(get, path = "/login", tag = "page",
    responses((status = 200, description = "The login form", content_type = "text/html")))]
pub(crate) async fn login_form(MountPoint(base): MountPoint) -> Markup {
    login(&base, None)
}

/// Exchanges a token for a session cookie.
#[utoipa::path(post, path = "/login", tag = "page",
    request_body(content = LoginForm, content_type = "application/x-www-form-urlencoded"),
    responses((status = 303, description = "Logged in: a session cookie (`HttpOnly`, `SameSite=Strict`) and a redirect to the page"),
              (status = 401, description = "The token was not accepted: the login form again", content_type = "text/html"),
              (status = 413, description = "The body is over 64 KiB", body = ErrorBody),
              (status = 415, description = "The body is not a form (`Content-Type: application/x-www-form-urlencoded`, as a browser sends it)", body = ErrorBody),
              (status = 422, description = "The form has no `token` field", body = ErrorBody)))]
pub(crate) async fn log_in(
    Shared(state): Shared<Arc<State>>,
    MountPoint(base): MountPoint,
    original: OriginalUri,
    Form(form): Form<LoginForm>,
) -> Response {
    let Some(name) = state
        .tokens
        .verify(form.token.as_bytes())
        .map(str::to_owned)
    else {
        tracing::warn!(target: "tollgate::admin", path = original.0.path(), "status page login refused: 401");
        return (
            StatusCode::UNAUTHORIZED,
            login(&base, Some("That token was not accepted.")),
        )
            .into_response();
    };
    let Some(session) = state.sessions.open(&name) else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "no randomness for a session id",
        )
            .into_response();
    };
    tracing::info!(target: "tollgate::admin", token = name, "status page session opened");
    let secure = if state.secure_cookie { "; Secure" } else { "" };
    let path = page_path(&base);
    let cookie = format!(
        "{COOKIE}={session}; Path={path}; Max-Age={}; HttpOnly; SameSite=Strict{secure}",
        SESSION_LIFETIME.as_secs()
    );
    redirect(&path, &cookie)
}

/// Ends the session.
#[utoipa::path(post, path = "/logout", tag = "page",
    responses((status = 303, description = "Logged out: the cookie is cleared and the page asks for a token again")))]
pub(crate) async fn log_out(
    Shared(state): Shared<Arc<State>>,
    MountPoint(base): MountPoint,
    headers: HeaderMap,
) -> Response {
    if let Some(session) = cookie_of(&headers) {
        state.sessions.close(&session);
    }
    let path = page_path(&base);
    redirect(
        &path,
        &format!("{COOKIE}=; Path={path}; Max-Age=0; HttpOnly; SameSite=Strict"),
    )
}

fn redirect(to: &str, cookie: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    if let (Ok(location), Ok(cookie)) = (HeaderValue::from_str(to), HeaderValue::from_str(cookie)) {
        headers.insert(header::LOCATION, location);
        headers.insert(header::SET_COOKIE, cookie);
    }
    response
}
