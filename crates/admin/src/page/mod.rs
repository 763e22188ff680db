//! The status page for the person on call: server-rendered HTML (no script), refreshing
//! itself, and its login.

pub(crate) mod login;
mod render;

pub(crate) use self::login::{log_in, log_out, login};
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
    base.to_owned()
}

/// [`base_of`] a request's parts.
pub(crate) fn base_path(parts: &Parts) -> String {
    let original = parts
        .extensions
        .get::<axum::extract::OriginalUri>()
        .map_or_else(
            || parts.uri.path().to_owned(),
            |uri| uri.0.path().to_owned(),
        );
    base_of(&original, parts.uri.path())
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
    }
}
