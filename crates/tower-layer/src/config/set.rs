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
use crate::PathPattern;
use crate::client_ip::Cidr;
use crate::headers::HeaderStyle;

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

/// A mistake for each rule an exempt path covers wholly: a rule that would never apply.
pub(super) fn covered<'r>(
    exempt: &Exempt,
    rules: impl Iterator<Item = (&'r str, &'r Applies)> + Clone,
) -> Vec<ConfigError> {
    let mut mistakes = Vec::new();
    for (path, at) in &exempt.paths {
        let Ok(pattern) = PathPattern::new(path) else {
            continue;
        };
        let everything = ["/", "/a", "/a/b"].iter().all(|path| pattern.matches(path));
        for (id, applies) in rules.clone() {
            let covered = match applies {
                Applies::Everywhere => everything,
                Applies::Route { pattern: route, .. } => pattern.matches(route),
            };
            if covered {
                mistakes.push(at.error(format!("exempt path {path:?} covers every request rule {id:?} applies to: that rule would never limit anything")));
            }
        }
    }
    mistakes
}

/// `headers = { ietf = true, legacy = false }` (each defaults to the layer's default: IETF on,
/// legacy off).
pub(super) fn headers(value: &Value<'_>, report: &mut Report<'_>) -> Option<HeaderStyle> {
    let fields = Fields::of(value, "`headers`", &["ietf", "legacy"], report)?;
    let mut style = HeaderStyle::default();
    let mut clean = true;
    if let Some(value) = fields.get("ietf") {
        match boolean(value, "`ietf`", report) {
            Some(on) => style = style.with_ietf(on),
            None => clean = false,
        }
    }
    if let Some(value) = fields.get("legacy") {
        match boolean(value, "`legacy`", report) {
            Some(on) => style = style.with_legacy(on),
            None => clean = false,
        }
    }
    fields.finish("`headers`", report);
    clean.then_some(style)
}
