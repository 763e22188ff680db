//! The status page for the person on call: server-rendered HTML (no script), refreshing
//! itself, and its login.

mod alerting;
mod chart;
mod limit_line;
pub(crate) mod login;
mod quota_cell;
mod render;

pub(crate) use self::login::{log_in, log_out, login, login_form};
pub(crate) use self::render::render;

use axum::http::request::Parts;

/// Where the admin router is mounted: `/admin` when the service nests it there ("" at the
/// root), from the request's original path and the path the router saw.
pub(crate) fn base_of(original: &str, seen: &str) -> String {
    let base = if seen == "/" {
        original.trim_end_matches('/')
    } else {
        original.strip_suffix(seen).unwrap_or("")
    };
    // One leading slash: `//host` or `/\host` in a Location header would leave this site.
    let rest = base.trim_start_matches(['/', '\\']);
    if rest.is_empty() {
        String::new()
    } else {
        format!("/{rest}")
    }
}

/// The path a request was sent to, before any `nest` stripped the mount point.
pub(crate) fn original_path(parts: &Parts) -> String {
    parts
        .extensions
        .get::<axum::extract::OriginalUri>()
        .map_or_else(
            || parts.uri.path().to_owned(),
            |uri| uri.0.path().to_owned(),
        )
}

/// [`base_of`] a request's parts.
pub(crate) fn base_path(parts: &Parts) -> String {
    base_of(&original_path(parts), parts.uri.path())
}

/// Where the admin router is mounted ([`base_path`]), as an extractor.
pub(crate) struct MountPoint(pub(crate) String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for MountPoint {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(MountPoint(base_path(parts)))
    }
}

/// The answer to a page request without valid credentials: with `?auth=basic` in the address
/// (or after wrong credentials), a Basic challenge — browsers ask for the token and send it
/// with every later load of the page — with the login form as its body; otherwise a redirect
/// to the login form. (A challenge on every unauthenticated load would make browsers show
/// their password dialog, or in headless mode an empty page, instead of the form.)
pub(crate) fn unauthenticated(parts: &Parts, wrong: bool) -> axum::response::Response {
    use axum::http::{HeaderValue, StatusCode, header};
    use axum::response::IntoResponse;

    let base = base_path(parts);
    let asks_basic = parts
        .uri
        .query()
        .is_some_and(|query| query.split('&').any(|pair| pair == "auth=basic"));
    if asks_basic || wrong {
        let problem = wrong.then_some("Those credentials were not accepted.");
        let mut response = (StatusCode::UNAUTHORIZED, login(&base, problem)).into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"tollgate admin\", charset=\"UTF-8\""),
        );
        return response;
    }
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("{base}/login")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// The page's own address under `base`.
pub(crate) fn page_path(base: &str) -> String {
    if base.is_empty() {
        "/".to_owned()
    } else {
        base.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_point_is_what_the_router_did_not_see() {
        assert_eq!(base_of("/admin", "/"), "/admin");
        assert_eq!(base_of("/admin/", "/"), "/admin");
        assert_eq!(base_of("/", "/"), "");
        assert_eq!(base_of("/ops/admin/login", "/login"), "/ops/admin");
        assert_eq!(page_path(""), "/");
        assert_eq!(base_of("//evil.example/admin", "/"), "/evil.example/admin");
        assert_eq!(
            base_of("/\\evil.example/admin/login", "/login"),
            "/evil.example/admin"
        );
    }
}
