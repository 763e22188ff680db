//! Which rules apply to a request: rules for every request, and a table of method + path
//! pattern rows.

use std::sync::Arc;

use http::Method;
use http::request::Parts;

use crate::Rule;
use crate::key::MatchedPattern;

/// A path pattern: `/users/{id}/follow`, `/api/*` (or `/api/{*rest}`).
///
/// Segments are literals, `{name}` (any one segment) or, last, `*` / `{*name}` (any rest of the
/// path, including nothing). Every string is a pattern; matching compares whole segments, so
/// `/post` does not match `/posts`.
///
/// ```
/// use tollgate_tower::PathPattern;
/// let follow = PathPattern::new("/users/{id}/follow");
/// assert!(follow.matches("/users/77/follow"));
/// assert!(!follow.matches("/users/77"));
/// assert!(PathPattern::new("/api/*").matches("/api/v1/posts"));
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

impl PathPattern {
    /// Parses `pattern`.
    pub fn new(pattern: &str) -> Self {
        let pieces: Vec<&str> = pattern.trim_start_matches('/').split('/').collect();
        let last = pieces.len() - 1;
        let segments = pieces
            .iter()
            .enumerate()
            .map(|(index, piece)| {
                let is_rest = *piece == "*" || (piece.starts_with("{*") && piece.ends_with('}'));
                if index == last && is_rest {
                    Segment::Rest
                } else if piece.len() > 2 && piece.starts_with('{') && piece.ends_with('}') {
                    Segment::Param
                } else {
                    Segment::Literal(Box::from(*piece))
                }
            })
            .collect();
        PathPattern {
            text: Arc::from(pattern),
            segments,
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
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

/// Where a rule sits in a [`RuleSet`], so a request's plan can outlive a borrow of the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleRef {
    Everywhere(usize),
    Route(usize),
}

/// One row of the route table.
#[derive(Debug, Clone)]
struct Route {
    method: Option<Method>,
    pattern: PathPattern,
    rule: Rule,
}

/// Every rule a layer knows: rules for every request, and route rows. Swappable at runtime
/// through [`RateLimitLayer::replace_rules`](crate::RateLimitLayer::replace_rules).
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    everywhere: Vec<Rule>,
    routes: Vec<Route>,
}

impl RuleSet {
    /// An empty set.
    pub fn new() -> Self {
        RuleSet::default()
    }

    /// Adds a rule for every request.
    #[must_use]
    pub fn rule(mut self, rule: Rule) -> Self {
        self.everywhere.push(rule);
        self
    }

    /// Adds a rule for requests with `method` whose path matches `pattern` (a `GET` row also
    /// matches `HEAD`, which servers answer with the GET handler).
    #[must_use]
    pub fn route(mut self, method: Method, pattern: &str, rule: Rule) -> Self {
        self.routes.push(Route {
            method: Some(method),
            pattern: PathPattern::new(pattern),
            rule,
        });
        self
    }

    /// Adds a rule for requests of any method whose path matches `pattern`.
    #[must_use]
    pub fn any_method(mut self, pattern: &str, rule: Rule) -> Self {
        self.routes.push(Route {
            method: None,
            pattern: PathPattern::new(pattern),
            rule,
        });
        self
    }

    /// Every rule that applies to `request` — rules for every request first, then matching rows
    /// in the order they were added — and the first matching row's pattern.
    pub(crate) fn matching(
        &self,
        request: &Parts,
        mut each: impl FnMut(RuleRef),
    ) -> Option<MatchedPattern> {
        (0..self.everywhere.len()).for_each(|index| each(RuleRef::Everywhere(index)));
        let mut first = None;
        let path = request.uri.path();
        for (index, route) in self.routes.iter().enumerate() {
            let method_matches = route.method.as_ref().is_none_or(|method| {
                // A HEAD request runs the GET handler (axum's `get` serves both), so GET rows
                // count it too.
                *method == request.method
                    || (*method == Method::GET && request.method == Method::HEAD)
            });
            if method_matches && route.pattern.matches(path) {
                first.get_or_insert_with(|| MatchedPattern(Arc::clone(&route.pattern.text)));
                each(RuleRef::Route(index));
            }
        }
        first
    }

    /// The rule `at` names (`None` only for a reference into another set).
    pub(crate) fn get(&self, at: RuleRef) -> Option<&Rule> {
        match at {
            RuleRef::Everywhere(index) => self.everywhere.get(index),
            RuleRef::Route(index) => self.routes.get(index).map(|route| &route.rule),
        }
    }

    /// Whether the set has no rules at all.
    pub fn is_empty(&self) -> bool {
        self.everywhere.is_empty() && self.routes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_segments() {
        let pattern = PathPattern::new("/users/{id}/follow");
        assert!(pattern.matches("/users/1/follow"));
        assert!(!pattern.matches("/users//follow"));
        assert!(!pattern.matches("/users/1/follow/extra"));
        assert!(!PathPattern::new("/post").matches("/posts"));
        assert!(PathPattern::new("/api/{*rest}").matches("/api"));
        assert!(PathPattern::new("/").matches("/"));
        assert!(PathPattern::new("*").matches("/anything/at/all"));
        assert!(
            PathPattern::new("/a*b").matches("/a*b"),
            "a star inside a segment is literal"
        );
    }
}
