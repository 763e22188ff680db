//! A rule's quotas for particular callers: `overrides` by key value, `plans` by the value of
//! another key.
//!
//! ```toml
//! overrides = { "partner-acme" = "500/s", "partner-big" = { capacity = 2000, refill = { amount = 1000, per = "1s" } } }
//! plan = "plan"                                     # any key kind; here an extractor registered in code
//! plans = { pro = "1000/1m", free = "10/1m" }
//! ```
//!
//! An entry is either `"<N>/<period>"` — N per period in the rule's own algorithm: a bucket's
//! capacity and refill, a window's limit and length, a pacing rate (with the rule's
//! `max_delay`) — or a table of the rule's algorithm's numbers (`algorithm` may be named too).

use std::time::Duration;

use tollgate_core::{Key, Quota, Rate};
use toml_span::Value;

use super::error::Report;
use super::fields::Fields;
use super::key::{Extractors, is_one_text_part, key};
use super::quota::{QUOTA_FIELDS, quota, quota_of};
use tollgate_tower::QuotaOverrides;

/// The overrides `fields` (a rule's) define; `Some(None)` when there are none, `None` when a
/// mistake was recorded. `cost` is the rule's fixed cost, which every quota must allow.
pub(crate) fn overrides(
    fields: &Fields<'_, '_>,
    extractors: &Extractors,
    cost: u64,
    report: &mut Report<'_>,
) -> Option<Option<QuotaOverrides>> {
    let by_key = fields.get("overrides");
    let plan = fields.get("plan");
    let plans = fields.get("plans");
    if by_key.is_none() && plan.is_none() && plans.is_none() {
        return Some(None);
    }
    let mut clean = true;
    let mut result = QuotaOverrides::new();
    let one_part = |value: &Value<'_>| is_one_text_part(value, extractors);
    if let (Some(table), Some(rule_key)) = (by_key, fields.get("key"))
        && !one_part(rule_key)
    {
        report.at(table.span.start, "`overrides` name values of the rule's key, so its key must be one header or one extractor registered in code; IP, endpoint, global and combined keys have no value a file can write");
        clean = false;
    } else if let Some(table) = by_key {
        match entries(table, "`overrides`", fields, cost, report) {
            Some(entries) => {
                for (name, quota) in entries {
                    result = result.key(Key::new(name), quota);
                }
            }
            None => clean = false,
        }
    }
    match (plan, plans) {
        (Some(plan), Some(plans)) => {
            let extractor = key(plan, extractors, report).filter(|_| {
                let fits = one_part(plan);
                if !fits {
                    report.at(plan.span.start, "`plan` must be one header or one extractor registered in code: `plans` name its values");
                }
                fits
            });
            let entries = entries(plans, "`plans`", fields, cost, report);
            match extractor.zip(entries) {
                Some((extractor, entries)) => {
                    result = result.plans(
                        extractor,
                        entries.iter().map(|(name, quota)| (name.as_str(), *quota)),
                    );
                }
                None => clean = false,
            }
        }
        (Some(value), None) => {
            report.at(value.span.start, "`plan` names who a caller's plan is read from, but there is no `plans` table of quotas");
            clean = false;
        }
        (None, Some(value)) => {
            report.at(value.span.start, "`plans` needs `plan`: the key that reads a caller's plan (an extractor registered in code, say)");
            clean = false;
        }
        (None, None) => {}
    }
    clean.then_some(Some(result))
}

/// A table of `name = <quota>` entries.
fn entries(
    value: &Value<'_>,
    what: &str,
    rule: &Fields<'_, '_>,
    cost: u64,
    report: &mut Report<'_>,
) -> Option<Vec<(String, Quota)>> {
    let Some(table) = value.as_table() else {
        report.at(
            value.span.start,
            format!("{what} must be a table of `\"<name>\" = \"<N>/<period>\"` entries"),
        );
        return None;
    };
    if table.is_empty() {
        report.at(
            value.span.start,
            format!("{what} has no entries; leave it out"),
        );
        return None;
    }
    let mut clean = true;
    let mut entries = Vec::new();
    for (name, entry) in table {
        match one(entry, rule, report) {
            Some(quota) if quota.limit() < cost => {
                report.at(entry.span.start, format!(
                    "this quota's limit {} is below the rule's cost {cost}: every request would be refused",
                    quota.limit()
                ));
                clean = false;
            }
            Some(quota) => entries.push((name.name.to_string(), quota)),
            None => clean = false,
        }
    }
    clean.then_some(entries)
}

/// One entry: `"N/period"` or a table of numbers.
fn one(value: &Value<'_>, rule: &Fields<'_, '_>, report: &mut Report<'_>) -> Option<Quota> {
    // A missing or unknown algorithm was reported at the rule: not again for each entry.
    let algorithm = rule
        .get("algorithm")
        .and_then(Value::as_str)
        .filter(|name| super::quota::ALGORITHMS.contains(name));
    if let Some(text) = value.as_str() {
        // The rule's algorithm was reported if it is missing or unknown.
        let algorithm = algorithm?;
        let Some((amount, period)) = shorthand(text) else {
            report.at(
                value.span.start,
                format!(
                    "{text:?} is not `\"<N>/<period>\"`, such as \"500/s\", \"30/1h\" or \"400/1d\""
                ),
            );
            return None;
        };
        let max_delay = rule
            .get("max_delay")
            .and_then(Value::as_str)
            .and_then(|text| humantime::parse_duration(text).ok());
        let built = match algorithm {
            "token_bucket" => Quota::token_bucket(amount, Rate::per(amount, period)),
            "gcra" => Quota::gcra(Rate::per(amount, period), amount),
            "fixed_window" => Quota::fixed_window(amount, period),
            "sliding_window_counter" => Quota::sliding_window_counter(amount, period),
            "sliding_window_log" => Quota::sliding_window_log(amount, period),
            "pacing" => Quota::leaky_bucket(Rate::per(amount, period), max_delay?),
            "concurrency" => {
                report.at(
                    value.span.start,
                    "a concurrency rule's override has no period: write `{ limit = <N> }`",
                );
                return None;
            }
            _ => return None,
        };
        return match built {
            Ok(quota) => Some(quota),
            Err(error) => {
                report.at(
                    value.span.start,
                    format!("this quota is not valid: {error}"),
                );
                None
            }
        };
    }
    let fields = Fields::of(value, "an override", QUOTA_FIELDS, report)?;
    let quota = if fields.get("algorithm").is_some() {
        quota(&fields, "an override", value.span.start, report)
    } else {
        quota_of(
            algorithm?,
            value.span.start,
            &fields,
            value.span.start,
            report,
        )
    };
    fields.finish("an override", report);
    quota
}

/// `"500/s"`, `"30/1h"`, `"10/15m"`: a positive count and a period (a bare unit means one).
fn shorthand(text: &str) -> Option<(u64, Duration)> {
    let (amount, period) = text.split_once('/')?;
    let amount: u64 = amount.trim().parse().ok().filter(|&amount| amount > 0)?;
    let period = period.trim();
    let period = if period.starts_with(|c: char| c.is_ascii_digit()) {
        humantime::parse_duration(period).ok()?
    } else {
        humantime::parse_duration(&format!("1{period}")).ok()?
    };
    (!period.is_zero()).then_some((amount, period))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::shorthand;

    #[test]
    fn shorthands_read_a_count_and_a_period() {
        assert_eq!(shorthand("500/s"), Some((500, Duration::from_secs(1))));
        assert_eq!(shorthand("30/1h"), Some((30, Duration::from_secs(3600))));
        assert_eq!(
            shorthand(" 10 / 15m "),
            Some((10, Duration::from_secs(900)))
        );
        assert_eq!(shorthand("400/d"), Some((400, Duration::from_secs(86_400))));
        for bad in ["0/s", "500", "/s", "x/s", "5/0s", "5/parsec", "-1/s"] {
            assert_eq!(shorthand(bad), None, "{bad}");
        }
    }
}
