//! A rule whose cost is known only after the response, from a file: where its estimate comes
//! from (`cost`) and where its actual cost is read (`settle`).
//!
//! ```toml
//! cost = 500                                       # the estimate: a number,
//! cost = { header = "x-max-tokens", default = 500 } # a request header,
//! cost = { function = "prompt_tokens" }            # or a function registered in code
//! settle = { header = "x-tokens-used" }            # a response header,
//! settle = "reported"                              # what the handler reports (ActualCost, CostMeter),
//! settle = { function = "tokens_used" }            # or a function registered in code
//! ```

use http::HeaderName;
use tollgate_core::{Algorithm, Mode};
use tollgate_tower::{Rule, SettleFrom};
use toml_span::Value;

use super::error::Report;
use super::fields::{Fields, kind, positive, string};
use super::key::Extractors;

/// Where a rule's cost comes from: a fixed number (checked against the quota's limit by the
/// caller), a request header with a default, or a registered function.
pub(crate) enum CostFrom {
    Fixed(u64),
    Header(HeaderName, u64),
    Function(super::key::CostFn),
}

impl CostFrom {
    /// The cost a file states up front (a header's default): what overrides are checked with.
    pub(crate) fn stated(&self) -> u64 {
        match self {
            CostFrom::Fixed(cost) | CostFrom::Header(_, cost) => *cost,
            CostFrom::Function(_) => 1,
        }
    }

    /// `rule`, costing this.
    pub(crate) fn apply(self, rule: Rule) -> Rule {
        match self {
            CostFrom::Fixed(cost) => rule.cost(cost),
            CostFrom::Header(name, default) => rule.cost_from_header(name, default),
            CostFrom::Function(cost) => rule.cost_fn(move |request| cost(request)),
        }
    }
}

/// `cost = N`, `cost = { header = "...", default = N }` or `cost = { function = "name" }`.
pub(crate) fn cost(
    value: &Value<'_>,
    extractors: &Extractors,
    report: &mut Report<'_>,
) -> Option<CostFrom> {
    if value.as_table().is_none() {
        return positive(value, "`cost`", report).map(CostFrom::Fixed);
    }
    let (kind_name, settings) = one_kind(value, "`cost`", report)?;
    match kind_name {
        "header" => {
            let fields = Fields::of(value, "`cost`", &["header", "default"], report)?;
            let name = header(settings, "`cost`'s header", report);
            let default = fields
                .required("default", "`cost = { header }`", value.span.start, report)
                .and_then(|default| positive(default, "`cost`'s default", report));
            fields.finish("`cost`", report);
            Some(CostFrom::Header(name?, default?))
        }
        "function" => {
            let fields = Fields::of(value, "`cost`", &["function"], report)?;
            fields.finish("`cost = { function }`", report);
            let name = string(settings, "`cost`'s function", report)?;
            match extractors.find_cost(name) {
                Ok(cost) => Some(CostFrom::Function(cost)),
                Err(why) => {
                    report.at(settings.span.start, why);
                    None
                }
            }
        }
        other => {
            report.at(
                value.span.start,
                format!("`cost` takes a number, `{{ header = \"...\", default = N }}` or `{{ function = \"name\" }}`, not `{other}`"),
            );
            None
        }
    }
}

/// `settle = "reported"`, `{ header = "..." }` or `{ function = "name" }`, for a rule whose
/// quota is `algorithm` (concurrency and pacing quotas settle nothing: a located error).
pub(crate) fn settle(
    value: &Value<'_>,
    algorithm: Option<Algorithm>,
    extractors: &Extractors,
    report: &mut Report<'_>,
) -> Option<SettleFrom> {
    if let Some(algorithm @ (Algorithm::Concurrency | Algorithm::LeakyBucket)) = algorithm {
        let what = if algorithm == Algorithm::Concurrency {
            "a concurrency quota's slots are held, not spent"
        } else {
            "a pacing quota's cost is a place in its queue, not a count"
        };
        report.at(
            value.span.start,
            format!("`settle`: {what}; there is nothing to settle after the response"),
        );
        return None;
    }
    const FORMS: &str =
        "\"reported\", `{ header = \"x-tokens-used\" }` or `{ function = \"name\" }`";
    if let Some(text) = value.as_str() {
        if text == "reported" {
            return Some(SettleFrom::reported());
        }
        report.at(
            value.span.start,
            format!("`settle` is {FORMS}, not {text:?}"),
        );
        return None;
    }
    if value.as_table().is_none() {
        report.at(
            value.span.start,
            format!("`settle` is {FORMS}, not {}", kind(value)),
        );
        return None;
    }
    let (kind_name, settings) = one_kind(value, "`settle`", report)?;
    if matches!(kind_name, "header" | "function") {
        Fields::of(value, "`settle`", &["header", "function"], report)?.finish("`settle`", report);
        if value.as_table().is_some_and(|table| table.len() > 1) {
            report.at(
                value.span.start,
                format!("`settle` names one source: {FORMS}"),
            );
            return None;
        }
    }
    match kind_name {
        "header" => header(settings, "`settle`'s header", report).map(SettleFrom::header),
        "function" => {
            let name = string(settings, "`settle`'s function", report)?;
            match extractors.find_settle(name) {
                Ok(read) => Some(SettleFrom::function(move |response| read(response))),
                Err(why) => {
                    report.at(settings.span.start, why);
                    None
                }
            }
        }
        other => {
            report.at(
                value.span.start,
                format!("`settle` is {FORMS}; there is no source `{other}`"),
            );
            None
        }
    }
}

/// A settled rule must be one that can settle: enforcing (a shadow, read-only or flag rule takes
/// its cost exactly) and counted exactly (its debt lives with the shared count, its estimate
/// keeps a receipt).
pub(crate) fn can_settle(
    fields: &Fields<'_, '_>,
    mut built: Option<Rule>,
    report: &mut Report<'_>,
) -> Option<Rule> {
    if let (Some(value), Some(rule)) = (fields.get("settle"), &built)
        && (rule.mode() != Mode::Enforce || !rule.can_refuse())
    {
        report.at(
            value.span.start,
            "`settle`: a shadow, read-only or flag rule takes its cost exactly and settles nothing; settle an enforcing rule".to_owned(),
        );
        built = None;
    }
    if let (Some(value), Some(rule)) = (fields.get("settle"), &built)
        && matches!(rule.counting().name(), "lease" | "sync" | "split")
    {
        report.at(
            value.span.start,
            format!(
                "`settle`: a settled rule is counted exactly (its debt lives with the shared count, its estimate keeps a receipt); it cannot be counted by `{}`",
                rule.counting().name()
            ),
        );
        built = None;
    }
    built
}

/// The first field of table `value` (its kind) and its value; a table with none is recorded.
fn one_kind<'v, 'de>(
    value: &'v Value<'de>,
    what: &str,
    report: &mut Report<'_>,
) -> Option<(&'v str, &'v Value<'de>)> {
    let table = value.as_table()?;
    // `default` goes with a header; the kind is the other field.
    let first = table
        .iter()
        .find(|(key, _)| key.name != "default")
        .map(|(key, value)| (key.name.as_ref(), value));
    if first.is_none() {
        report.at(value.span.start, format!("{what} names no source"));
    }
    first
}

fn header(value: &Value<'_>, what: &str, report: &mut Report<'_>) -> Option<HeaderName> {
    let name = string(value, what, report)?;
    match HeaderName::try_from(name) {
        Ok(header) => Some(header),
        Err(_) => {
            report.at(value.span.start, format!("{name:?} is not a header name"));
            None
        }
    }
}
