//! gRPC methods as routes: a call to `package.Service/Method` is a request to
//! `/package.Service/Method` (a `POST`, but tonic serves the path whatever the method, so the
//! route takes any method), so a rule for a method (or every method of a service) is a route.

use super::path_pattern::{PathPattern, PathPatternError};

/// What `method` (`"chirp.v1.Feed/Get"`, or `"chirp.v1.Feed/*"` for every method of the
/// service; a leading `/` is allowed) matches, as a path pattern: `/chirp.v1.Feed/Get`, or
/// `/chirp.v1.Feed/{method}`. The service is dot-separated identifiers, the method an
/// identifier or `*`.
///
/// ```
/// use tollgate_tower::grpc_method_pattern;
///
/// assert_eq!(grpc_method_pattern("chirp.v1.Feed/Get")?.as_str(), "/chirp.v1.Feed/Get");
/// assert_eq!(grpc_method_pattern("/chirp.v1.Feed/*")?.as_str(), "/chirp.v1.Feed/{method}");
/// assert!(grpc_method_pattern("chirp.v1.Feed").is_err());
/// assert!(grpc_method_pattern("chirp..Feed/Get").is_err());
/// # Ok::<(), tollgate_tower::PathPatternError>(())
/// ```
pub fn grpc_method_pattern(method: &str) -> Result<PathPattern, PathPatternError> {
    let invalid = |why: &str| {
        PathPatternError::grpc(
            method,
            format!("{why}; a gRPC method is `package.Service/Method` or `package.Service/*`"),
        )
    };
    let text = method.strip_prefix('/').unwrap_or(method);
    let Some((service, name)) = text.split_once('/') else {
        return Err(invalid("it names no method (no `/`)"));
    };
    if service.split('.').any(|part| !is_identifier(part)) {
        return Err(invalid("the service is not dot-separated identifiers"));
    }
    let path = match name {
        "*" => format!("/{service}/{{method}}"),
        name if is_identifier(name) => format!("/{service}/{name}"),
        _ => return Err(invalid("the method is not an identifier or `*`")),
    };
    PathPattern::new(&path)
}

/// `[A-Za-z_][A-Za-z0-9_]*`, as protobuf names are.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|rest| rest.is_ascii_alphanumeric() || rest == '_')
}
