//! The admin router: each route and its handler.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

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
            get(get_rule)
                .put(put_rule)
                .patch(patch_rule_fields)
                .delete(withdraw_rule),
        )
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
