//! The routes and their handlers.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State as Shared};
use axum::http::{HeaderMap, header};
use serde::Deserialize;
use tollgate_config::{
    POLICY_FIELDS, QUOTA_FIELDS, RuleFile, is_patchable, parse_rule, patch_rule,
};
use tollgate_core::RuleId;
use tollgate_tower::ResetError;
use tollgate_tower::key::KeyValueError;
use utoipa::IntoParams;

use crate::auth::{Operator, Viewer};
use crate::bodies::{RuleObject, RulePatch};
use crate::changes::ChangeError;
use crate::error::{ApiError, ErrorBody};
use crate::json_toml::{NullAt, rule_table, toml_value};
use crate::page;
use crate::report::{health_of, top_refused};
use crate::state::State;
use crate::views::{
    ChangeView, HealthView, KeyValues, ResetRequest, ResetView, RuleView, RulesView, StatsView,
};

/// How long a reset waits for the store.
const RESET_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The most top refused callers one request may ask for.
const MAX_TOP: usize = 100;

type Answer<T> = Result<Json<T>, ApiError>;

/// The rules in force.
#[utoipa::path(get, path = "/v1/rules", tag = "rules", security(("bearer" = [])),
    responses((status = 200, description = "The rules in force, as the rule file would write them", body = RulesView),
               (status = 401, description = "No token, or a wrong one", body = ErrorBody)))]
pub(crate) async fn list_rules(_: Operator, Shared(state): Shared<Arc<State>>) -> Json<RulesView> {
    Json(state.rules_view())
}

/// One rule in force.
#[utoipa::path(get, path = "/v1/rules/{id}", tag = "rules", security(("bearer" = [])),
    params(("id" = String, Path, description = "The rule's id")),
    responses((status = 200, description = "The rule", body = RuleView),
               (status = 401, description = "No token, or a wrong one", body = ErrorBody),
               (status = 404, description = "No rule in force has this id", body = ErrorBody)))]
pub(crate) async fn get_rule(
    _: Operator,
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<String>,
) -> Answer<RuleView> {
    state.find_rule(&id).map(Json).ok_or_else(|| no_rule(&id))
}

/// Replaces (or adds) a rule.
#[utoipa::path(put, path = "/v1/rules/{id}", tag = "rules", security(("bearer" = [])),
    params(("id" = String, Path, description = "The rule's id")),
    request_body(
        content(
            (String = "application/toml"),
            (RuleObject = "application/json"),
        ),
        description = "The rule: as TOML, a rule file holding exactly this one `[[rule]]` (what `GET /v1/rules/{id}` gives as `toml`); or as JSON, an object of the same fields, written as that table and checked the same way. A body of any other content type is read as TOML."),
    responses((status = 200, description = "The rule is in force", body = ChangeView),
               (status = 400, description = "A TOML body that is not UTF-8 text, or a JSON body that is not an object of values TOML can hold (no `null`)", body = ErrorBody),
               (status = 422, description = "The rule has mistakes, each at its line and column (for a JSON body, in `document`: the rule as the table it was written as); nothing changed", body = ErrorBody),
               (status = 413, description = "The body is over 64 KiB", body = ErrorBody),
               (status = 401, description = "No token, or a wrong one", body = ErrorBody),
               (status = 409, description = "Rules cannot be changed here (built in code, or a fleet document is in force)", body = ErrorBody),
               (status = 503, description = "The fleet store failed: the change may or may not be published (read the rule again)", body = ErrorBody)))]
pub(crate) async fn put_rule(
    Operator(operator): Operator,
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer<ChangeView> {
    let overlay = changeable(&state)?;
    let (name, text, written) = if is_json(&headers) {
        let table = rule_from_json(&body)?;
        ("request body as TOML", table.clone(), Some(table))
    } else {
        let text = std::str::from_utf8(&body)
            .map_err(|_| ApiError::BadRequest("the body is not UTF-8 text".to_owned()))?;
        ("request body", text.to_owned(), None)
    };
    let rule =
        parse_rule(name, &text, &id, overlay.extractors()).map_err(|errors| ApiError::Invalid {
            errors,
            document: written,
        })?;
    change(&state, &operator, &id, Edit::Put(Box::new(rule))).await
}

/// Whether the request says its body is JSON (`application/json`, or any `+json` type).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase())
        .is_some_and(|essence| essence == "application/json" || essence.ends_with("+json"))
}

/// A rule sent as a JSON object, as its `[[rule]]` table.
fn rule_from_json(body: &[u8]) -> Result<String, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| ApiError::BadRequest(format!("the body is not JSON: {error}")))?;
    let serde_json::Value::Object(fields) = value else {
        return Err(ApiError::BadRequest(
            "the body is a JSON object of the rule's fields, e.g. {\"id\": \"reads\", \"algorithm\": \"fixed_window\", ...}".to_owned(),
        ));
    };
    rule_table(&fields).map_err(|NullAt(at)| {
        ApiError::BadRequest(format!(
            "`{at}` is null: a rule file has no null; leave the field out or give a value"
        ))
    })
}

/// Changes a rule's quota, mode or failure policy.
#[utoipa::path(patch, path = "/v1/rules/{id}", tag = "rules", security(("bearer" = [])),
    params(("id" = String, Path, description = "The rule's id")),
    request_body(content = RulePatch, content_type = "application/json"),
    responses((status = 200, description = "The rule is in force", body = ChangeView),
               (status = 400, description = "Not a JSON object of at least one of those fields and no others, or a field is null; nothing changed", body = ErrorBody),
               (status = 422, description = "The changed rule has mistakes, each at its line and column in `document` (the rule with the change made); nothing changed", body = ErrorBody),
               (status = 413, description = "The body is over 64 KiB", body = ErrorBody),
               (status = 401, description = "No token, or a wrong one", body = ErrorBody),
               (status = 404, description = "No rule in force has this id", body = ErrorBody),
               (status = 409, description = "The rule is built in code, or rules cannot be changed here", body = ErrorBody),
               (status = 503, description = "The fleet store failed: the change may or may not be published (read the rule again)", body = ErrorBody)))]
pub(crate) async fn patch_rule_fields(
    Operator(operator): Operator,
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer<ChangeView> {
    changeable(&state)?;
    let fields = patch_fields(&body)?;
    change(&state, &operator, &id, Edit::Patch(fields)).await
}

/// Withdraws this API's change to a rule. The change is the resource deleted, not the rule:
/// the rule file's version of the rule, if it has one, is in force again (a `DELETE` of
/// `/v1/rules/{id}` would promise a rule gone that is still there).
#[utoipa::path(delete, path = "/v1/rules/{id}/change", tag = "rules", security(("bearer" = [])),
    params(("id" = String, Path, description = "The rule's id")),
    responses((status = 200, description = "The change is withdrawn: the rule file's version of the rule (if any) is in force", body = ChangeView),
               (status = 401, description = "No token, or a wrong one", body = ErrorBody),
               (status = 404, description = "No change to this rule is in force", body = ErrorBody),
               (status = 409, description = "Rules cannot be changed here", body = ErrorBody),
               (status = 503, description = "The fleet store failed: the change may or may not be published (read the rule again)", body = ErrorBody)))]
pub(crate) async fn withdraw_rule(
    Operator(operator): Operator,
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<String>,
) -> Answer<ChangeView> {
    change(&state, &operator, &id, Edit::Withdraw).await
}

/// A change to one rule.
enum Edit {
    /// The rule, whole (checked already).
    Put(Box<RuleFile>),
    /// Fields of the rule in force, as `(name, TOML value)`.
    Patch(Vec<(String, String)>),
    /// Back to the rule file's version.
    Withdraw,
}

impl Edit {
    fn name(&self) -> &'static str {
        match self {
            Edit::Put(_) => "put",
            Edit::Patch(_) => "patch",
            Edit::Withdraw => "withdraw",
        }
    }
}

/// How many times a change is built again when the fleet document changed meanwhile.
const CHANGE_ATTEMPTS: usize = 5;

/// Makes `edit` to rule `id` and logs it. Everything from reading the rule in force to
/// installing the change happens under the gateway's edit lock, so two changes on one gateway
/// never build on the same old rule; a change that finds the fleet document moved on is built
/// again on the new one.
async fn change(state: &State, operator: &str, id: &str, edit: Edit) -> Answer<ChangeView> {
    let _editing = state.editing.lock().await;
    // A fleet gateway reads the document in Redis first: a change is decided on the rules the
    // fleet has, not on what this gateway has heard of so far.
    state.changes.refresh().await;
    for _ in 0..CHANGE_ATTEMPTS {
        let before = state.find_rule(id).and_then(|view| view.toml);
        let base = state
            .changes
            .base()
            .map_err(|error| ApiError::of_change(error, None))?;
        let (document, checked) = changed_document(state, base.document.as_ref(), id, &edit)?;
        match state.changes.install(&base, &document).await {
            Ok(version) => {
                let after = state.find_rule(id);
                tracing::info!(
                    target: "tollgate::admin",
                    token = operator,
                    rule = id,
                    change = edit.name(),
                    version,
                    before = before.as_deref().map(one_line).unwrap_or_default(),
                    after = after.as_ref().and_then(|view| view.toml.as_deref()).map(one_line).unwrap_or_default(),
                    "rule changed through the admin API"
                );
                return Ok(Json(ChangeView {
                    version,
                    rule: after,
                }));
            }
            Err(ChangeError::Stale) => state.changes.refresh().await,
            Err(error) => return Err(ApiError::of_change(error, checked)),
        }
    }
    Err(ApiError::of_change(ChangeError::Stale, None))
}

/// The document of changes with `edit` made to rule `id` over `base`, and (for a patch) the
/// rule file that was checked, to show with its mistakes.
fn changed_document(
    state: &State,
    base: Option<&RuleFile>,
    id: &str,
    edit: &Edit,
) -> Result<(RuleFile, Option<String>), ApiError> {
    let over = |rule: &RuleFile| base.map_or_else(|| rule.clone(), |base| base.overridden_by(rule));
    match edit {
        Edit::Put(rule) => Ok((over(rule), None)),
        Edit::Patch(fields) => {
            let overlay = changeable(state)?;
            let current = state.find_rule(id).ok_or_else(|| no_rule(id))?;
            let Some(table) = current.toml else {
                return Err(ApiError::Conflict(format!(
                    "rule {id:?} is built in code; only rules from a rule file can be changed"
                )));
            };
            let text = patch_rule(&table, fields);
            let rule = parse_rule(
                &format!("rule {id} patched"),
                &text,
                id,
                overlay.extractors(),
            )
            .map_err(|errors| ApiError::Invalid {
                errors,
                document: Some(text.clone()),
            })?;
            Ok((over(&rule), Some(text)))
        }
        Edit::Withdraw => match base {
            Some(base) if base.ids().any(|changed| changed == id) => Ok((base.without(id), None)),
            _ => Err(ApiError::NotFound(format!(
                "no change to rule {id:?} is in force; the rule file's version is"
            ))),
        },
    }
}

/// A rule's numbers.
#[utoipa::path(get, path = "/v1/rules/{id}/stats", tag = "rules", security(("bearer" = [])),
    params(("id" = String, Path, description = "The rule's id"), TopQuery),
    responses((status = 200, description = "The rule's checks and refusals, and its top refused callers", body = StatsView),
               (status = 400, description = "`top` is not a whole number from 1 to 100", body = ErrorBody),
               (status = 401, description = "No token, or a wrong one", body = ErrorBody),
               (status = 404, description = "No rule in force has this id", body = ErrorBody)))]
pub(crate) async fn rule_stats(
    _: Operator,
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<String>,
    Query(query): Query<TopQuery>,
) -> Answer<StatsView> {
    let rule_id = RuleId::new(&id).map_err(|_| no_rule(&id))?;
    state.find_rule(&id).ok_or_else(|| no_rule(&id))?;
    let stats = state.layer.stats(&rule_id).ok_or_else(|| no_rule(&id))?;
    let top = match query.top {
        None => 10,
        Some(top) if (1..=MAX_TOP).contains(&top) => top,
        Some(top) => {
            return Err(ApiError::BadRequest(format!(
                "`top` is from 1 to {MAX_TOP}, not {top}"
            )));
        }
    };
    Ok(Json(StatsView::new(
        &id,
        stats,
        top_refused(&state, &rule_id, top).await,
    )))
}

/// How many top refused callers to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct TopQuery {
    /// How many of the most refused callers to list (1–100, default 10; others are `400`).
    #[param(minimum = 1, maximum = 100)]
    top: Option<usize>,
}

/// Forgets what a rule counted for one caller.
#[utoipa::path(post, path = "/v1/rules/{id}/reset", tag = "rules", security(("bearer" = [])),
    params(("id" = String, Path, description = "The rule's id")),
    request_body(content = ResetRequest, content_type = "application/json"),
    responses((status = 200, description = "The caller's count (and an escalating rule's strikes and block) is gone; the caller gets through at once", body = ResetView),
               (status = 400, description = "The body is not `{\"key\": \"<value>\"}` or `{\"key\": [\"<part>\", ...]}`", body = ErrorBody),
               (status = 409, description = "The rule's key is built by code from requests (an extension or a closure): no value names its callers, so it cannot be reset here", body = ErrorBody),
               (status = 422, description = "The values name no caller of this rule's key (not an IP address for an IP rule, fewer or more values than the key has parts)", body = ErrorBody),
               (status = 413, description = "The body is over 64 KiB", body = ErrorBody),
               (status = 401, description = "No token, or a wrong one", body = ErrorBody),
               (status = 404, description = "No rule in force has this id", body = ErrorBody),
               (status = 503, description = "The store failed or did not answer within 2 s (the reset may be repeated; a FallbackStore has cleared its local count)", body = ErrorBody)))]
pub(crate) async fn reset_caller(
    Operator(operator): Operator,
    Shared(state): Shared<Arc<State>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer<ResetView> {
    let request: ResetRequest = serde_json::from_slice(&body).map_err(|error| {
        ApiError::BadRequest(format!(
            "the body is not {{\"key\": \"<value>\"}} or {{\"key\": [\"<part>\", ...]}}: {error}"
        ))
    })?;
    let values: Vec<String> = match request.key {
        KeyValues::One(value) => vec![value],
        KeyValues::Parts(parts) => parts,
    };
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    let reset = tokio::time::timeout(RESET_TIMEOUT, state.layer.reset(&id, &values));
    let done = reset
        .await
        .map_err(|_| {
            ApiError::Unavailable(format!(
                "the store did not answer within {} s; the reset may be repeated",
                RESET_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|error| match error {
            ResetError::UnknownRule(_) => no_rule(&id),
            ResetError::Key {
                error: KeyValueError::Unsupported,
                ..
            } => ApiError::Conflict(error.to_string()),
            ResetError::Key { .. } => ApiError::Unprocessable(error.to_string()),
            other => ApiError::Unavailable(other.to_string()),
        })?;
    tracing::info!(target: "tollgate::admin", token = operator, rule = id, caller = done.caller, "caller reset through the admin API");
    Ok(Json(ResetView {
        caller: done.caller,
        cleared: done
            .cleared
            .iter()
            .map(|rule| rule.as_str().to_owned())
            .collect(),
    }))
}

/// The limiter's health.
#[utoipa::path(get, path = "/v1/health", tag = "health", security(("bearer" = [])),
    responses((status = 200, description = "The store, the rules' versions and the last config error", body = HealthView),
               (status = 401, description = "No token, or a wrong one", body = ErrorBody)))]
pub(crate) async fn health(_: Operator, Shared(state): Shared<Arc<State>>) -> Json<HealthView> {
    Json(health_of(&state).await)
}

/// The status page.
#[utoipa::path(get, path = "/", tag = "page",
    security(("bearer" = []), ("basic" = []), ("cookie" = [])),
    params(("auth" = Option<String>, Query, description = "`basic`: answer a Basic challenge when not authenticated (browsers then ask for the token)")),
    responses((status = 200, description = "The status page (HTML, refreshes itself)", content_type = "text/html"),
               (status = 303, description = "Not authenticated: to the login form"),
               (status = 401, description = "Wrong credentials, or `?auth=basic`: a Basic challenge, with the login form", content_type = "text/html")))]
pub(crate) async fn status_page(
    Viewer(_viewer): Viewer,
    Shared(state): Shared<Arc<State>>,
    page::MountPoint(base): page::MountPoint,
) -> maud::Markup {
    page::render(&state, &base).await
}

/// The fields of a PATCH body, as `(name, TOML value)` pairs.
fn patch_fields(body: &[u8]) -> Result<Vec<(String, String)>, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| ApiError::BadRequest(format!("the body is not JSON: {error}")))?;
    let serde_json::Value::Object(object) = value else {
        return Err(ApiError::BadRequest(
            "the body is a JSON object of fields, e.g. {\"limit\": 100}".to_owned(),
        ));
    };
    if object.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "nothing to change; a PATCH changes {}",
            patchable()
        )));
    }
    object
        .iter()
        .map(|(name, value)| {
            if !is_patchable(name) {
                return Err(ApiError::BadRequest(format!(
                    "a PATCH cannot change {name:?}; it changes {} (PUT the whole rule to change the rest)",
                    patchable()
                )));
            }
            let value = toml_value(value).map_err(|null| {
                let NullAt(at) = null.under(name);
                ApiError::BadRequest(format!("`{at}` is null; give a value"))
            })?;
            Ok((name.clone(), value))
        })
        .collect()
}

/// The fields a PATCH may change, for messages.
fn patchable() -> String {
    QUOTA_FIELDS
        .iter()
        .chain(POLICY_FIELDS)
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

fn no_rule(id: &str) -> ApiError {
    ApiError::NotFound(format!("no rule {id:?} is in force"))
}

/// The overlay changes go through, or why rules cannot be changed here (`409`).
fn changeable(state: &State) -> Result<&tollgate_config::RuleOverlay, ApiError> {
    state.changes.overlay().ok_or_else(|| {
        let why =
            state.changes.base().err().unwrap_or_else(|| {
                ChangeError::Conflict("rules cannot be changed here".to_owned())
            });
        ApiError::of_change(why, None)
    })
}

/// A rule's TOML on one line, for a log field.
fn one_line(toml: &str) -> String {
    toml.lines().skip(1).collect::<Vec<_>>().join("; ")
}
