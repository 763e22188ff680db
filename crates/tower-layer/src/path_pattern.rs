//! Path patterns in axum 0.8's syntax, checked when a rule is added.

use std::fmt;
use std::sync::Arc;

/// A path pattern in axum 0.8's syntax: `/users/{id}/follow`, `/api/{*rest}`.
///
/// Segments are literals, `{name}` (any one non-empty segment) or, last, `{*name}` (any rest of
/// the path, including nothing). Matching compares whole segments, so `/post` does not match
/// `/posts`. `{{` and `}}` in a literal stand for `{` and `}`, as in axum.
///
/// Patterns are checked when they are made, so a pattern that could never match is an error at
/// start-up, not a rule that silently never applies:
///
/// * axum 0.7's `/users/:id` and `/files/*path` are rejected with a message saying how to write
///   them now (`{id}`, `{*path}`);
/// * a pattern must start with `/`; a parameter must be a whole segment and have a name; a
///   catch-all must be last.
///
/// **Deprecated form:** a last segment of a bare `*` (`/api/*`) still means "any rest", as it
/// did in earlier tollgate versions; axum reads it as a literal star, so prefer `{*rest}`.
///
/// ```
/// use tollgate_tower::PathPattern;
/// let follow = PathPattern::new("/users/{id}/follow")?;
/// assert!(follow.matches("/users/77/follow"));
/// assert!(!follow.matches("/users/77"));
/// assert!(PathPattern::new("/api/{*rest}")?.matches("/api/v1/posts"));
///
/// let old = PathPattern::new("/users/:id").unwrap_err();
/// assert!(old.to_string().contains("{id}"));
/// # Ok::<(), tollgate_tower::PathPatternError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    text: Arc<str>,
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(Box<str>),
    Param,
    Rest,
}

/// Why a string is not a [`PathPattern`]; its message says how to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPatternError {
    pattern: String,
    reason: String,
}

impl PathPatternError {
    fn new(pattern: &str, reason: impl Into<String>) -> Self {
        PathPatternError {
            pattern: pattern.to_owned(),
            reason: reason.into(),
        }
    }

    /// The pattern as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }
}

impl fmt::Display for PathPatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid path pattern {:?}: {}",
            self.pattern, self.reason
        )
    }
}

impl std::error::Error for PathPatternError {}

impl PathPattern {
    /// Parses and checks `pattern`.
    pub fn new(pattern: &str) -> Result<Self, PathPatternError> {
        let Some(path) = pattern.strip_prefix('/') else {
            return Err(PathPatternError::new(pattern, "a pattern starts with `/`"));
        };
        let pieces: Vec<&str> = path.split('/').collect();
        let last = pieces.len() - 1;
        let segments = pieces
            .iter()
            .enumerate()
            .map(|(index, piece)| segment(pattern, piece, index == last))
            .collect::<Result<_, _>>()?;
        Ok(PathPattern {
            text: Arc::from(pattern),
            segments,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The pattern as written, shared.
    pub(crate) fn text(&self) -> &Arc<str> {
        &self.text
    }

    /// Whether `path` matches.
    pub fn matches(&self, path: &str) -> bool {
        let mut pieces = path.trim_start_matches('/').split('/');
        for segment in &self.segments {
            match segment {
                Segment::Rest => return true,
                Segment::Param => match pieces.next() {
                    Some(piece) if !piece.is_empty() => {}
                    _ => return false,
                },
                Segment::Literal(literal) => {
                    if pieces.next() != Some(literal) {
                        return false;
                    }
                }
            }
        }
        pieces.next().is_none()
    }
}

/// One segment of `pattern`, checked.
fn segment(pattern: &str, piece: &str, is_last: bool) -> Result<Segment, PathPatternError> {
    let error = |reason: String| Err(PathPatternError::new(pattern, reason));
    if let Some(name) = piece.strip_prefix(':') {
        return error(format!(
            "`:{name}` is axum 0.7's syntax; write `{{{name}}}` (axum 0.8)"
        ));
    }
    if let Some(name) = piece.strip_prefix('*').filter(|name| !name.is_empty()) {
        return error(format!(
            "`*{name}` is axum 0.7's syntax; write `{{*{name}}}` (axum 0.8)"
        ));
    }
    if piece == "*" {
        return if is_last {
            Ok(Segment::Rest)
        } else {
            error("`*` is only allowed as the last segment".to_owned())
        };
    }
    if let Some(inner) = piece.strip_prefix('{').and_then(|p| p.strip_suffix('}'))
        && !piece.starts_with("{{")
    {
        let (name, rest) = match inner.strip_prefix('*') {
            Some(name) => (name, true),
            None => (inner, false),
        };
        if name.is_empty() || name.contains(['{', '}', '*']) {
            return error(format!(
                "`{piece}` is not a parameter: write `{{name}}` or `{{*name}}`"
            ));
        }
        return match (rest, is_last) {
            (false, _) => Ok(Segment::Param),
            (true, true) => Ok(Segment::Rest),
            (true, false) => error(format!("the catch-all `{piece}` must be the last segment")),
        };
    }
    literal(piece).map(Segment::Literal).or_else(error)
}

/// A literal segment, with `{{` and `}}` read as braces; a lone brace is an error, since it
/// means a parameter that is not a whole segment.
fn literal(piece: &str) -> Result<Box<str>, String> {
    let mut text = String::with_capacity(piece.len());
    let mut chars = piece.chars();
    while let Some(c) = chars.next() {
        if (c == '{' || c == '}') && chars.next() != Some(c) {
            return Err(format!(
                "`{piece}`: a parameter must be a whole segment (`/{{name}}`); \
                 write `{c}{c}` for a literal `{c}`"
            ));
        }
        text.push(c);
    }
    Ok(text.into_boxed_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> PathPattern {
        PathPattern::new(text).expect("a valid pattern")
    }

    #[test]
    fn patterns_match_whole_segments() {
        let follow = pattern("/users/{id}/follow");
        assert!(follow.matches("/users/1/follow"));
        assert!(!follow.matches("/users//follow"));
        assert!(!follow.matches("/users/1/follow/extra"));
        assert!(!pattern("/post").matches("/posts"));
        assert!(pattern("/api/{*rest}").matches("/api"));
        assert!(pattern("/api/{*rest}").matches("/api/v1/posts"));
        assert!(pattern("/").matches("/"));
        assert!(pattern("/{*all}").matches("/anything/at/all"));
        assert!(
            pattern("/api/*").matches("/api/v1"),
            "the deprecated form is kept"
        );
        assert!(
            pattern("/a*b").matches("/a*b"),
            "a star inside a segment is literal"
        );
        assert!(
            pattern("/{{x}}").matches("/{x}"),
            "doubled braces are literal"
        );
    }

    #[test]
    fn axum_0_7_syntax_is_rejected_with_the_new_spelling() {
        let colon = PathPattern::new("/users/:id").unwrap_err();
        assert!(colon.to_string().contains("write `{id}`"), "{colon}");
        let star = PathPattern::new("/files/*path").unwrap_err();
        assert!(star.to_string().contains("write `{*path}`"), "{star}");
    }

    #[test]
    fn patterns_that_could_never_match_as_meant_are_rejected() {
        for bad in [
            "users/{id}",
            "*",
            "/users/{}",
            "/users/{*}",
            "/files/{*rest}/more",
            "/api/*/more",
            "/file-{id}",
            "/{id",
            "/id}",
            "/{a{b}",
        ] {
            assert!(PathPattern::new(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
