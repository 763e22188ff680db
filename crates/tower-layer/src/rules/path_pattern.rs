//! Path patterns in axum 0.8's syntax, checked when a rule is added.

use std::fmt;
use std::sync::Arc;

/// A path pattern in axum 0.8's syntax: `/users/{id}/follow`, `/api/{*rest}`.
///
/// Segments are literals, `{name}` (any one segment, as axum matches it: even an empty one, so
/// a rule on `/users/{id}/follow` also counts `/users//follow`, which axum routes there) or,
/// last, `{*name}` (a non-empty rest of the path). A parameter may follow a literal prefix
/// within its segment (`/@{handle}`, `/v{version}/feed`, `/files/report-{*rest}`). Matching
/// compares whole segments, so `/post` does not match `/posts`, and paths are matched as axum
/// matches them: `//healthz` is not `/healthz`, and `/feed/` is not `/feed`. `{{` and `}}` in a
/// literal stand for `{` and `}`, as in axum.
///
/// Patterns are checked when they are made, so a pattern that could never match is an error at
/// start-up, not a rule that silently never applies:
///
/// * axum 0.7's `/users/:id` and `/files/*path` are rejected with a message saying how to write
///   them now (`{id}`, `{*path}`);
/// * a pattern must start with `/`; a parameter must end its segment and have a name; a
///   catch-all must be last. (A literal suffix after a parameter, `/{id}.json`, is not
///   supported.)
///
/// **Deprecated form:** a last segment of a bare `*` (`/api/*`) still means "any non-empty
/// rest", like `{*rest}`, as in earlier tollgate versions; axum rejects it, so prefer `{*rest}`.
///
/// ```
/// use tollgate_tower::PathPattern;
/// let follow = PathPattern::new("/users/{id}/follow")?;
/// assert!(follow.matches("/users/77/follow"));
/// assert!(!follow.matches("/users/77"));
/// assert!(PathPattern::new("/api/{*rest}")?.matches("/api/v1/posts"));
/// assert!(!PathPattern::new("/healthz")?.matches("//healthz"));
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
pub(crate) enum Segment {
    /// Exactly this text.
    Literal(Box<str>),
    /// `<prefix>{name}`: any segment starting with the prefix (often empty), even an empty one.
    Param { prefix: Box<str> },
    /// `<prefix>{*name}`, last: a non-empty rest of the path starting with the prefix.
    Rest { prefix: Box<str> },
}

/// Why a string is not a [`PathPattern`]; its message says how to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPatternError {
    pattern: String,
    reason: String,
    /// What the pattern was meant to be: a path pattern, or a gRPC method.
    what: &'static str,
}

impl PathPatternError {
    fn new(pattern: &str, reason: impl Into<String>) -> Self {
        PathPatternError {
            pattern: pattern.to_owned(),
            reason: reason.into(),
            what: "path pattern",
        }
    }

    /// `method` is not a gRPC method (`package.Service/Method`), for `reason`.
    pub(crate) fn grpc(method: &str, reason: impl Into<String>) -> Self {
        PathPatternError {
            what: "gRPC method",
            ..PathPatternError::new(method, reason)
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
            "invalid {} {:?}: {}",
            self.what, self.pattern, self.reason
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
            .map(|(index, piece)| segment(piece, index == last))
            .collect::<Result<_, String>>()
            .map_err(|reason| PathPatternError::new(pattern, reason))?;
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

    /// Its segments, in order.
    pub(crate) fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Whether `path` matches, as axum's router would route it to this pattern.
    pub fn matches(&self, path: &str) -> bool {
        // `None` once the path is used up; `Some("")` is an empty segment still to match.
        let mut remaining = path.strip_prefix('/');
        for segment in &self.segments {
            let Some(rest) = remaining else {
                return false;
            };
            let (piece, after) = match rest.split_once('/') {
                Some((piece, after)) => (piece, Some(after)),
                None => (rest, None),
            };
            match segment {
                Segment::Rest { prefix } => {
                    return rest.len() > prefix.len() && rest.starts_with(&**prefix);
                }
                Segment::Param { prefix } if !piece.starts_with(&**prefix) => return false,
                Segment::Literal(literal) if piece != &**literal => return false,
                _ => {}
            }
            remaining = after;
        }
        remaining.is_none()
    }
}

/// One segment, checked; the error says why and how to write it.
fn segment(piece: &str, is_last: bool) -> Result<Segment, String> {
    if let Some(name) = piece.strip_prefix(':') {
        return Err(match name {
            "" => {
                "`:` starts a parameter in axum 0.7's syntax; write `{name}` (axum 0.8)".to_owned()
            }
            name => format!("`:{name}` is axum 0.7's syntax; write `{{{name}}}` (axum 0.8)"),
        });
    }
    if let Some(name) = piece.strip_prefix('*').filter(|name| !name.is_empty()) {
        return Err(format!(
            "`*{name}` is axum 0.7's syntax; write `{{*{name}}}` (axum 0.8)"
        ));
    }
    if piece == "*" {
        return if is_last {
            Ok(Segment::Rest {
                prefix: Box::from(""),
            })
        } else {
            Err("`*` is only allowed as the last segment".to_owned())
        };
    }
    let (prefix, parameter) = split_parameter(piece)?;
    let Some(inner) = parameter else {
        return Ok(Segment::Literal(prefix));
    };
    let (name, is_rest) = match inner.strip_prefix('*') {
        Some(name) => (name, true),
        None => (inner, false),
    };
    if name.is_empty() || name.contains(['{', '}', '*', ':']) {
        return Err(format!(
            "`{piece}` holds no valid parameter: write `{{name}}` or `{{*name}}`"
        ));
    }
    match (is_rest, is_last) {
        (false, _) => Ok(Segment::Param { prefix }),
        (true, true) => Ok(Segment::Rest { prefix }),
        (true, false) => Err(format!(
            "the catch-all in `{piece}` must be in the last segment"
        )),
    }
}

/// A segment's literal text (with `{{` and `}}` read as braces) and, when it has one, the
/// parameter that ends it (the text between its braces). A parameter must end its segment and
/// there is one at most; a lone brace anywhere else is an error.
fn split_parameter(piece: &str) -> Result<(Box<str>, Option<&str>), String> {
    let mut literal = String::with_capacity(piece.len());
    let mut rest = piece;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("{{") || rest.starts_with("}}") {
            literal.push(c);
            rest = &rest[2..];
            continue;
        }
        match c {
            '{' => {
                let Some(inner) = rest[1..].strip_suffix('}') else {
                    return Err(format!(
                        "`{piece}`: a parameter must end its segment (`/{{name}}`, `/v{{name}}`); \
                         write `{{{{` and `}}}}` for literal braces"
                    ));
                };
                return Ok((literal.into_boxed_str(), Some(inner)));
            }
            '}' => {
                return Err(format!(
                    "`{piece}`: an unmatched `}}`; write `}}}}` for a literal one"
                ));
            }
            _ => {
                literal.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    Ok((literal.into_boxed_str(), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> PathPattern {
        PathPattern::new(text).expect("a valid pattern")
    }

    #[test]
    fn patterns_match_as_axum_routes() {
        let follow = pattern("/users/{id}/follow");
        assert!(follow.matches("/users/1/follow"));
        assert!(
            follow.matches("/users//follow"),
            "axum routes an empty segment to {{id}}"
        );
        assert!(!follow.matches("/users/1/follow/extra"));
        assert!(!follow.matches("/users/1/follow/"));
        assert!(!pattern("/post").matches("/posts"));
        assert!(
            !pattern("/healthz").matches("//healthz"),
            "one leading slash only"
        );
        assert!(pattern("//x").matches("//x"));
        assert!(
            !pattern("/api/{*rest}").matches("/api"),
            "a catch-all is never empty"
        );
        assert!(!pattern("/api/{*rest}").matches("/api/"));
        assert!(pattern("/api/{*rest}").matches("/api/v1/posts"));
        assert!(pattern("/").matches("/"));
        assert!(!pattern("/").matches("//"));
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
        assert!(pattern("/@{handle}").matches("/@ada"));
        assert!(!pattern("/@{handle}").matches("/ada"));
        assert!(pattern("/v{version}/feed").matches("/v2/feed"));
        assert!(pattern("/files/report-{*rest}").matches("/files/report-2026/q4"));
        assert!(!pattern("/files/report-{*rest}").matches("/files/report-"));
        assert!(pattern("/}}{a}").matches("/}x"));
    }

    #[test]
    fn axum_0_7_syntax_is_rejected_with_the_new_spelling() {
        let colon = PathPattern::new("/users/:id").unwrap_err();
        assert!(colon.to_string().contains("write `{id}`"), "{colon}");
        let star = PathPattern::new("/files/*path").unwrap_err();
        assert!(star.to_string().contains("write `{*path}`"), "{star}");
        let bare = PathPattern::new("/:").unwrap_err();
        assert!(bare.to_string().contains("write `{name}`"), "{bare}");
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
            "/{id}.json",
            "/{a}{b}",
            "/{id",
            "/id}",
            "/{a{b}",
        ] {
            assert!(PathPattern::new(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
