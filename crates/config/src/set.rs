//! What applies to the whole rule set rather than one rule: exemptions and the header style.
//!
//! ```toml
//! headers = { ietf = true, legacy = true }   # IETF RateLimit fields, and X-RateLimit-* too
//!
//! [exempt]
//! paths = ["/healthz", "/metrics"]
//! networks = ["10.0.0.0/8"]                  # peers, not forwarded addresses
//! ```

use toml_span::Value;

use super::error::{ConfigError, Position, Report};
use super::fields::{Fields, boolean, one_or_many, string};
use super::rule::Applies;
use tollgate_tower::PathPattern;
use tollgate_tower::client_ip::Cidr;
use tollgate_tower::headers::HeaderStyle;

/// The `[exempt]` table, read: each path with where it is written (for the coverage check).
#[derive(Debug, Clone, Default)]
pub(super) struct Exempt {
    pub(super) paths: Vec<(String, Position)>,
    pub(super) networks: Vec<Cidr>,
}

/// `[exempt]`: its valid entries even when some are not (the mistakes are recorded, so the
/// file is refused either way), so a covered rule is reported alongside a bad network.
pub(super) fn exempt(value: &Value<'_>, report: &mut Report<'_>) -> Option<Exempt> {
    let fields = Fields::of(value, "`exempt`", &["paths", "networks"], report)?;
    let mut exempt = Exempt::default();
    for item in fields.get("paths").map(one_or_many).unwrap_or_default() {
        let Some(text) = string(item, "an exempt path", report) else {
            continue;
        };
        match PathPattern::new(text) {
            Ok(_) => {
                let at = report.position(item.span.start);
                exempt.paths.push((text.to_owned(), at));
            }
            Err(error) => report.at(item.span.start, error.to_string()),
        }
    }
    for item in fields.get("networks").map(one_or_many).unwrap_or_default() {
        let Some(text) = string(item, "an exempt network", report) else {
            continue;
        };
        match text.parse::<Cidr>() {
            Ok(network) if network.prefix() == 0 => {
                report.at(
                    item.span.start,
                    format!(
                        "exempt network {text:?} is every address: nothing would ever be limited"
                    ),
                );
            }
            Ok(network) => exempt.networks.push(network),
            Err(error) => {
                report.at(item.span.start, format!("exempt network {text:?} is not a network in CIDR notation such as \"10.0.0.0/8\" ({error})"));
            }
        }
    }
    fields.finish("`exempt`", report);
    Some(exempt)
}

/// A mistake for each rule the exempt paths cover wholly, together: a rule that would never
/// apply. Coverage is decided on paths that stand for every request the rule applies to
/// ([`representatives`]), so `/api/{version}` does not cover `/api/{*rest}` (it misses
/// `/api/v1/posts`) while `["/", "/{*rest}"]` covers a rule on every request.
pub(super) fn covered<'r>(
    exempt: &Exempt,
    rules: impl Iterator<Item = (&'r str, &'r Applies)>,
) -> Vec<ConfigError> {
    let patterns: Vec<(&str, &Position, PathPattern)> = exempt
        .paths
        .iter()
        .filter_map(|(path, at)| Some((path.as_str(), at, PathPattern::new(path).ok()?)))
        .collect();
    if patterns.is_empty() {
        return Vec::new();
    }
    let mut mistakes = Vec::new();
    for (id, applies) in rules {
        if matches!(applies, Applies::Nowhere) {
            continue; // no HTTP request to cover
        }
        let paths = representatives(applies);
        let exempting = |path: &String| {
            patterns
                .iter()
                .find(|(_, _, pattern)| pattern.matches(path))
        };
        if !paths.iter().all(|path| exempting(path).is_some()) {
            continue;
        }
        // Name the one path that covers it alone, else the first that plays a part.
        let alone = patterns
            .iter()
            .find(|(_, _, pattern)| paths.iter().all(|path| pattern.matches(path)));
        let Some((text, at, _)) = alone.or_else(|| paths.first().and_then(exempting)) else {
            continue;
        };
        let together = if alone.is_some() {
            ""
        } else {
            " (with the other exempt paths)"
        };
        mistakes.push(at.error(format!("exempt path {text:?}{together} covers every request rule {id:?} applies to: that rule would never limit anything")));
    }
    mistakes
}

/// A segment no exempt literal is expected to hold: stands for any value of a parameter.
const ANY_SEGMENT: &str = "~any~";

/// Paths standing for every request a rule applies to: for a route, its pattern with escaped
/// braces as literals, each `{param}` as [`ANY_SEGMENT`], and a `{*wildcard}` as one and as two
/// segments; for a rule on every request, `/`, `/~any~` and `/~any~/~any~`.
fn representatives(applies: &Applies) -> Vec<String> {
    let Applies::Route { pattern, .. } = applies else {
        let any = ANY_SEGMENT;
        return vec!["/".to_owned(), format!("/{any}"), format!("/{any}/{any}")];
    };
    let (mut one, mut two) = (String::new(), String::new());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                one.push('{');
                two.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                one.push('}');
                two.push('}');
            }
            '{' => {
                let wildcard = chars.peek() == Some(&'*');
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                one.push_str(ANY_SEGMENT);
                two.push_str(ANY_SEGMENT);
                if wildcard {
                    two.push('/');
                    two.push_str(ANY_SEGMENT);
                }
            }
            c => {
                one.push(c);
                two.push(c);
            }
        }
    }
    if one == two {
        vec![one]
    } else {
        vec![one, two]
    }
}

/// `headers = { ietf = true, legacy = false }` (each defaults to the layer's default: IETF on,
/// legacy off).
pub(super) fn headers(value: &Value<'_>, report: &mut Report<'_>) -> Option<HeaderStyle> {
    let fields = Fields::of(value, "`headers`", &["ietf", "legacy"], report)?;
    let layer_default = HeaderStyle::default();
    let mut flag = |name: &str, default: bool| match fields.get(name) {
        Some(value) => boolean(value, &format!("`{name}`"), report),
        None => Some(default),
    };
    let (ietf, legacy) = (
        flag("ietf", layer_default.ietf()),
        flag("legacy", layer_default.legacy()),
    );
    fields.finish("`headers`", report);
    let base = if ietf? {
        layer_default
    } else {
        HeaderStyle::none()
    };
    Some(base.with_legacy(legacy?))
}

#[cfg(test)]
mod tests {
    use super::{Applies, representatives};

    fn route(pattern: &str) -> Applies {
        Applies::Route {
            methods: Vec::new(),
            pattern: pattern.to_owned(),
        }
    }

    #[test]
    fn representatives_stand_for_every_path_of_a_pattern() {
        assert_eq!(representatives(&route("/api/posts")), ["/api/posts"]);
        assert_eq!(
            representatives(&route("/users/{id}/follow")),
            ["/users/~any~/follow"]
        );
        assert_eq!(
            representatives(&route("/api/{*rest}")),
            ["/api/~any~", "/api/~any~/~any~"]
        );
        assert_eq!(representatives(&route("/a{{b}}")), ["/a{b}"]);
        assert_eq!(representatives(&Applies::Everywhere).len(), 3);
    }
}
