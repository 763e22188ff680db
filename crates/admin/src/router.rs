//! The admin router: each route and its handler, and the status page's second address when
//! the router is mounted under a path.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};

use crate::error::ApiError;
use crate::handlers::{
    get_rule, health, list_rules, patch_rule_fields, put_rule, reset_caller, rule_stats,
    status_page, withdraw_rule,
};
use crate::openapi::openapi;
use crate::page;
use crate::state::State;

/// The largest request body taken: a rule is a few hundred bytes.
const MAX_BODY: usize = 64 * 1024;

/// The router over `state`.
pub(crate) fn router(state: Arc<State>) -> Router {
    Router::new()
        .route("/v1/rules", get(list_rules))
        .route(
            "/v1/rules/{id}",
            get(get_rule).put(put_rule).patch(patch_rule_fields),
        )
        .route("/v1/rules/{id}/change", delete(withdraw_rule))
        .route("/v1/rules/{id}/stats", get(rule_stats))
        .route("/v1/rules/{id}/reset", post(reset_caller))
        .route("/v1/health", get(health))
        .route("/v1/openapi.json", get(openapi))
        .route("/", get(status_page))
        .route("/login", get(page::login_form).post(page::log_in))
        .route("/logout", post(page::log_out))
        .fallback(|| async { ApiError::NotFound("no such admin route".to_owned()) })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::map_response(crate::error::as_json))
        .with_state(state)
}

/// The router over `state` with every route under `path` (`/admin`), and the status page at
/// `path/` too: the address OpenAPI's `/` names under that mount point, which `Router::nest`
/// leaves to the service's fallback (it serves `path`, not `path/`).
pub(crate) fn router_at(state: Arc<State>, path: &str) -> Router {
    let path = path.trim_end_matches('/');
    if path.is_empty() {
        return router(state);
    }
    // Nested at `path/`, the page router's `/` is exactly `path/`; the page sees the mount point
    // as it does at `path` (`page::base_of` drops the trailing slash). No fallback of its own:
    // `path/<anything else>` is the API router's, and a method other than GET is answered `405`
    // with `Allow` by the method router.
    let page = Router::new()
        .route("/", get(status_page))
        .layer(axum::middleware::map_response(crate::error::as_json))
        .with_state(state.clone());
    Router::new()
        .nest(path, router(state))
        .nest(&format!("{path}/"), page)
}
