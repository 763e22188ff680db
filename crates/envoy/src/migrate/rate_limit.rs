//! A descriptor's `rate_limit` block: its quota (or `unlimited`), `name` and `replaces`.

use super::config::{Limit, Quota, Replaced};
use super::error::{At, Report};
use super::fields::{RATE_LIMIT, REPLACES, fields, nearest};
use super::unit::{NAMES, Unit};
use super::values::{count, flag, list, text};
use super::yaml::{Node, at};

/// The most `requests_per_unit` can be: ratelimit reads it as a 32-bit number.
const MOST: u64 = u32::MAX as u64;

/// The `rate_limit` in `node`.
pub(crate) fn limit(node: &Node<'_>, report: &mut Report<'_>) -> Limit {
    let Some(fields) = fields(node, &RATE_LIMIT, report) else {
        return Limit {
            quota: None,
            name: None,
            replaces: Vec::new(),
        };
    };
    let name = fields
        .get("name")
        .and_then(|name| text(name, "name", report))
        .filter(|name| !name.is_empty())
        .map(str::to_owned);
    let unlimited = fields
        .get("unlimited")
        .and_then(|unlimited| flag(unlimited, "unlimited", report))
        .unwrap_or(false);
    let unit = fields.get("unit");
    let requests = fields.get("requests_per_unit");
    let quota = if unlimited {
        for (field, node) in [("unit", unit), ("requests_per_unit", requests)] {
            if let Some(node) = node {
                report.at(
                    at(node),
                    format!(
                        "`{field}` cannot go with `unlimited: true`: an unlimited descriptor has \
                         no quota; remove `{field}`, or `unlimited`"
                    ),
                );
            }
        }
        Some(Quota::Unlimited)
    } else {
        counted(fields.at(), unit, requests, report)
    };
    let replaces = fields
        .get("replaces")
        .map(|replaces| replaced(replaces, name.as_deref(), report))
        .unwrap_or_default();
    Limit {
        quota,
        name,
        replaces,
    }
}

/// `requests_per_unit` per `unit`, both required.
fn counted(
    block: At,
    unit: Option<&Node<'_>>,
    requests: Option<&Node<'_>>,
    report: &mut Report<'_>,
) -> Option<Quota> {
    let unit = match unit {
        None => {
            report.at(
                block,
                format!(
                    "this rate_limit has no `unit`: add one of {} (or `unlimited: true`)",
                    NAMES.join(", ")
                ),
            );
            None
        }
        Some(node) => text(node, "unit", report).and_then(|name| {
            let unit = Unit::parse(name);
            if unit.is_none() {
                let hint = nearest(&name.to_ascii_lowercase(), NAMES)
                    .map(|near| format!(" (did you mean {near:?}?)"))
                    .unwrap_or_default();
                report.at(
                    at(node),
                    format!(
                        "unknown unit {name:?}{hint}: use one of {}",
                        NAMES.join(", ")
                    ),
                );
            }
            unit
        }),
    };
    let limit = match requests {
        None => {
            report.at(
                block,
                "this rate_limit has no `requests_per_unit`: ratelimit takes that as 0, which \
                 refuses every request, and a tollgate limit is at least 1; add \
                 `requests_per_unit: <n>` (or `unlimited: true`)",
            );
            None
        }
        Some(node) => count(node, "requests_per_unit", report).and_then(|limit| match limit {
            0 => {
                report.at(
                    at(node),
                    "`requests_per_unit: 0` refuses every request, and a tollgate limit is at \
                     least 1: set 1 or more, or refuse these requests in Envoy itself",
                );
                None
            }
            limit if limit > MOST => {
                report.at(
                    at(node),
                    format!(
                        "`requests_per_unit: {limit}` is more than ratelimit reads (a 32-bit \
                         number): write at most {MOST}"
                    ),
                );
                None
            }
            limit => Some(limit),
        }),
    };
    Some(Quota::Counted {
        limit: limit?,
        unit: unit?,
    })
}

/// The `replaces` list of a rate_limit named `own` (if it is).
fn replaced(node: &Node<'_>, own: Option<&str>, report: &mut Report<'_>) -> Vec<Replaced> {
    let mut replaced = Vec::new();
    for entry in list(node, "replaces", report) {
        let Some(fields) = fields(entry, &REPLACES, report) else {
            continue;
        };
        let name = match fields.get("name") {
            // Not text: reported.
            Some(name) => match text(name, "name", report) {
                Some(name) => Some(name).filter(|name| !name.is_empty()),
                None => continue,
            },
            None => None,
        };
        match name {
            None => report.at(
                fields.at(),
                "this `replaces` entry has no `name`: give the `name` of the rate_limit this one \
                 replaces, or remove the entry",
            ),
            Some(name) if Some(name) == own => report.at(
                fields.at(),
                format!(
                    "a rate_limit cannot replace itself ({name:?}), and ratelimit refuses this \
                     too: remove the entry"
                ),
            ),
            Some(name) => replaced.push(Replaced {
                at: fields.at(),
                name: name.to_owned(),
            }),
        }
    }
    replaced
}
