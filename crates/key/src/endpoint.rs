//! The method and route as the key, for "per account per endpoint" limits.

use http::request::Parts;

use super::{KeyBuilder, KeyExtractor, KeyValueError, next_value};

/// The route pattern that matched a request (`/users/{id}/follow`), as a request extension:
/// tollgate-tower's route table inserts it (a router of your own may too) so [`Endpoint`]
/// counts per route, not per concrete path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchedPattern(pub std::sync::Arc<str>);

/// Counts by method and route: the [`MatchedPattern`] when the layer's route table matched one
/// (or axum's `MatchedPath`, with the `axum` feature), else one shared "unmatched" route — never
/// the raw path, which a client could vary to mint fresh keys and escape the limit. Combine it
/// with a caller key: `(account, Endpoint)`.
///
/// ```
/// use tollgate_key::{Endpoint, Global};
/// let per_route = (Global, Endpoint);
/// # let _ = per_route;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Endpoint;

impl KeyExtractor for Endpoint {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        // A GET row also answers HEAD: one count for both, so alternating them gains nothing.
        let method = if request.method == http::Method::HEAD {
            "GET"
        } else {
            request.method.as_str()
        };
        key.part(method);
        key.part(route_of(request));
        true
    }

    /// One value, the method and the route pattern: `"GET /users/{id}"` (the method in any
    /// case; the pattern as the route was declared).
    fn key_from_values(
        &self,
        values: &mut dyn Iterator<Item = &str>,
        key: &mut KeyBuilder,
    ) -> Result<(), KeyValueError> {
        const EXPECTED: &str = "a method and route pattern, e.g. \"GET /users/{id}\"";
        let value = next_value(values, EXPECTED)?;
        let (method, route) = value
            .trim()
            .split_once(' ')
            .map(|(method, route)| (method.to_ascii_uppercase(), route.trim()))
            .filter(|(method, route)| !method.is_empty() && route.starts_with('/'))
            .ok_or_else(|| KeyValueError::Invalid {
                value: value.to_owned(),
                expected: EXPECTED,
            })?;
        key.part(method);
        key.part(route);
        Ok(())
    }
}

fn route_of(request: &Parts) -> &str {
    if let Some(pattern) = request.extensions.get::<MatchedPattern>() {
        return &pattern.0;
    }
    #[cfg(feature = "axum")]
    if let Some(matched) = request.extensions.get::<axum::extract::MatchedPath>() {
        return matched.as_str();
    }
    "(unmatched)"
}
