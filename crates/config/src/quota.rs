//! A quota from a rule's fields: the algorithm and its numbers.
//!
//! ```toml
//! algorithm = "token_bucket"    # or "gcra": capacity, and `refill` per period
//! capacity = 5
//! refill = { amount = 30, per = "1h" }
//!
//! algorithm = "fixed_window"    # or "sliding_window_counter", "sliding_window_log"
//! limit = 400
//! window = "1d"
//!
//! algorithm = "pacing"          # leaky bucket as pacing: `rate` per period, `max_delay`
//! rate = { amount = 10, per = "1s" }
//! max_delay = "2s"
//!
//! algorithm = "concurrency"     # at most `limit` requests in flight at once
//! limit = 20
//! retry_after = "2s"            # optional: the wait a refusal announces (default 1s)
//! slot_ttl = "60s"              # optional: how long Redis keeps a slot its gateway stopped
//!                               # renewing (default 60s, at least 1s)
//! ```

use tollgate_core::{Quota, Rate};
use toml_span::Value;

use super::error::Report;
use super::fields::{Fields, duration, positive, string};

/// The algorithms a rule file may name as `algorithm`; any other is a located error listing
/// these.
///
/// ```
/// assert!(tollgate_config::ALGORITHMS.contains(&"token_bucket"));
/// ```
pub const ALGORITHMS: &[&str] = &[
    "token_bucket",
    "gcra",
    "fixed_window",
    "sliding_window_counter",
    "sliding_window_log",
    "pacing",
    "concurrency",
];

/// The fields a quota is read from (a rule's table holds them beside its own).
pub const QUOTA_FIELDS: &[&str] = &[
    "algorithm",
    "capacity",
    "refill",
    "limit",
    "window",
    "rate",
    "max_delay",
    "retry_after",
    "slot_ttl",
];

/// The quota `fields` describe (in `owner`, for messages: "a rule"); `None` when a mistake was
/// recorded. `at` locates the table.
pub(crate) fn quota(
    fields: &Fields<'_, '_>,
    owner: &str,
    at: usize,
    report: &mut Report<'_>,
) -> Option<Quota> {
    let algorithm = fields.required("algorithm", owner, at, report)?;
    let name = string(algorithm, "`algorithm`", report)?;
    quota_of(name, algorithm.span.start, fields, at, report)
}

/// The quota of algorithm `name` (written at `algorithm_at`) with the numbers in `fields`.
pub(crate) fn quota_of(
    name: &str,
    algorithm_at: usize,
    fields: &Fields<'_, '_>,
    at: usize,
    report: &mut Report<'_>,
) -> Option<Quota> {
    if let Some(takes) = fields_of(name) {
        let mut stray = false;
        for field in QUOTA_FIELDS
            .iter()
            .filter(|field| **field != "algorithm" && !takes.contains(field))
        {
            if let Some(value) = fields.get(field) {
                let listed = takes
                    .iter()
                    .map(|field| format!("`{field}`"))
                    .collect::<Vec<_>>();
                report.at(
                    value.span.start,
                    format!(
                        "`{field}` is not a field of {name:?}, which takes {}",
                        listed.join(", ")
                    ),
                );
                stray = true;
            }
        }
        if stray {
            return None;
        }
    }
    let built = match name {
        "token_bucket" | "gcra" => {
            let capacity = positive(
                fields.required("capacity", name, at, report)?,
                "`capacity`",
                report,
            );
            let refill = rate(
                fields.required("refill", name, at, report)?,
                "`refill`",
                report,
            );
            let (capacity, refill) = (capacity?, refill?);
            if name == "gcra" {
                Quota::gcra(refill, capacity)
            } else {
                Quota::token_bucket(capacity, refill)
            }
        }
        "fixed_window" | "sliding_window_counter" | "sliding_window_log" => {
            let limit = positive(
                fields.required("limit", name, at, report)?,
                "`limit`",
                report,
            );
            let window = duration(
                fields.required("window", name, at, report)?,
                "`window`",
                report,
            );
            let (limit, window) = (limit?, window?);
            match name {
                "fixed_window" => Quota::fixed_window(limit, window),
                "sliding_window_counter" => Quota::sliding_window_counter(limit, window),
                _ => Quota::sliding_window_log(limit, window),
            }
        }
        "pacing" => {
            let rate = rate(fields.required("rate", name, at, report)?, "`rate`", report);
            let max_delay = duration(
                fields.required("max_delay", name, at, report)?,
                "`max_delay`",
                report,
            );
            Quota::leaky_bucket(rate?, max_delay?)
        }
        "concurrency" => {
            let limit = positive(
                fields.required("limit", name, at, report)?,
                "`limit`",
                report,
            );
            let optional = |field: &str, default: std::time::Duration, report: &mut Report<'_>| {
                fields.get(field).map_or(Some(default), |value| {
                    duration(value, &format!("`{field}`"), report)
                })
            };
            let retry_after = optional("retry_after", std::time::Duration::from_secs(1), report);
            let slot_ttl = optional("slot_ttl", tollgate_core::DEFAULT_SLOT_TTL, report);
            Quota::concurrency_with(limit?, retry_after?, slot_ttl?)
        }
        other => {
            let hint = super::fields::nearest(other, ALGORITHMS)
                .map(|name| format!(" (did you mean {name:?}?)"))
                .unwrap_or_default();
            report.at(
                algorithm_at,
                format!(
                    "unknown algorithm {other:?}{hint}; one of: {}",
                    ALGORITHMS.join(", ")
                ),
            );
            return None;
        }
    };
    match built {
        Ok(quota) => Some(quota),
        Err(error) => {
            // Point at the field that sets the period or the size, whichever this algorithm has.
            let culprit = [
                "window",
                "max_delay",
                "slot_ttl",
                "retry_after",
                "refill",
                "rate",
                "limit",
                "capacity",
            ]
            .into_iter()
            .find_map(|name| fields.get(name))
            .map_or(algorithm_at, |value| value.span.start);
            report.at(culprit, format!("this quota is not valid: {error}"));
            None
        }
    }
}

/// The fields algorithm `name` takes (`None`: not an algorithm).
fn fields_of(name: &str) -> Option<&'static [&'static str]> {
    match name {
        "token_bucket" | "gcra" => Some(&["capacity", "refill"]),
        "fixed_window" | "sliding_window_counter" | "sliding_window_log" => {
            Some(&["limit", "window"])
        }
        "pacing" => Some(&["rate", "max_delay"]),
        "concurrency" => Some(&["limit", "retry_after", "slot_ttl"]),
        _ => None,
    }
}

/// A rate: `{ amount = 30, per = "1h" }`.
fn rate(value: &Value<'_>, what: &str, report: &mut Report<'_>) -> Option<Rate> {
    let fields = Fields::of(value, what, &["amount", "per"], report)?;
    let amount = fields
        .required("amount", what, value.span.start, report)
        .and_then(|amount| positive(amount, "`amount`", report));
    let per = fields
        .required("per", what, value.span.start, report)
        .and_then(|per| duration(per, "`per`", report));
    fields.finish(what, report);
    Some(Rate::per(amount?, per?))
}
