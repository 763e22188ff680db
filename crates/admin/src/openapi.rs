//! The admin API as an OpenAPI 3.1 document, generated from the handlers' annotations.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::auth::Operator;
use crate::error::ErrorBody;
use crate::handlers;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "tollgate admin API",
        description = "See and steer a running tollgate limiter. Paths are relative to where the service mounts the router.",
        license(name = "MIT OR Apache-2.0"),
    ),
    paths(
        handlers::list_rules,
        handlers::get_rule,
        handlers::put_rule,
        handlers::patch_rule_fields,
        handlers::withdraw_rule,
        handlers::rule_stats,
        handlers::reset_caller,
        handlers::health,
        openapi,
        handlers::status_page,
        crate::page::login::login_form,
        crate::page::login::log_in,
        crate::page::login::log_out,
    ),
    modifiers(&Security),
    tags(
        (name = "rules", description = "The rules in force, their numbers, and changes to them"),
        (name = "health", description = "The limiter itself"),
        (name = "page", description = "The status page for the person on call"),
    )
)]
struct AdminApi;

/// The security schemes: named bearer tokens everywhere, Basic and the session cookie for the
/// status page.
struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A named admin token"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "basic",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Basic)
                    .description(Some("Any user name; an admin token as the password"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "cookie",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::new(crate::session::COOKIE))),
        );
    }
}

/// The admin API's OpenAPI 3.1 document as JSON (what `GET /v1/openapi.json` serves).
///
/// ```
/// let document: serde_json::Value = serde_json::from_str(&tollgate_admin::openapi_json())?;
/// assert_eq!(document["openapi"], "3.1.0");
/// assert!(document["paths"]["/v1/rules/{id}"]["patch"].is_object());
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn openapi_json() -> String {
    AdminApi::openapi()
        .to_pretty_json()
        .unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"))
}

/// This API as an OpenAPI 3.1 document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "health", security(("bearer" = [])),
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", content_type = "application/json"),
               (status = 401, description = "No token, or a wrong one", body = ErrorBody)))]
pub(crate) async fn openapi(_: Operator) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        openapi_json(),
    )
}
