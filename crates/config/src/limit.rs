//! `[[limit]]` tables: the live quotas of typed limits (`tollgate_axum::Limit`), set by id in
//! the layer's registry so "follows per day" changes in the same file as every other limit.
//!
//! ```toml
//! [[limit]]
//! id = "follows-per-day"
//! algorithm = "sliding_window_counter"
//! limit = 400
//! window = "1d"
//! ```

use std::collections::HashSet;

use tollgate_core::RuleId;
use toml_span::Value;

use super::error::{Position, Report};
use super::fields::{Fields, string};
use super::quota::{QUOTA_FIELDS, quota};

/// A `[[limit]]`: the live quota of a typed limit (or any id) set in the layer's registry.
#[derive(Debug, Clone)]
pub(crate) struct LimitEntry {
    pub(crate) id: RuleId,
    pub(crate) quota: tollgate_core::Quota,
    /// Where its id is written.
    pub(crate) at: Position,
    /// Its TOML.
    pub(crate) source: String,
}

/// Every `[[limit]]` of `list`; `rules` holds the ids of the file's rules (an id is a rule's or
/// a limit's, not both: both would read the same registry entry).
pub(super) fn limits(
    list: &Value<'_>,
    rules: &HashSet<String>,
    report: &mut Report<'_>,
) -> Option<Vec<LimitEntry>> {
    let Some(tables) = list.as_array() else {
        report.at(list.span.start, "limits are `[[limit]]` tables");
        return None;
    };
    let mut limits: Vec<LimitEntry> = Vec::new();
    let mut ids: HashSet<String> = HashSet::new();
    let mut clean = true;
    for value in tables {
        let Some(limit) = one(value, report) else {
            clean = false;
            continue;
        };
        let id = limit.id.as_str();
        if rules.contains(id) {
            report.at(value.span.start, format!("id {id:?} is a `[[rule]]` already; a `[[limit]]` names a typed limit, with an id of its own"));
            clean = false;
        } else if !ids.insert(id.to_owned()) {
            report.at(
                value.span.start,
                format!("limit id {id:?} is used twice; each typed limit is set once"),
            );
            clean = false;
        } else {
            limits.push(limit);
        }
    }
    clean.then_some(limits)
}

fn one(value: &Value<'_>, report: &mut Report<'_>) -> Option<LimitEntry> {
    // A limit's fields: its id, then a quota's.
    let fields = Fields::of(value, "a `[[limit]]`", &["id"], report)?.also_knowing(QUOTA_FIELDS);
    let at = value.span.start;
    let id_value = fields.required("id", "a limit", at, report);
    let id = id_value.and_then(|value| {
        let text = string(value, "`id`", report)?;
        match RuleId::new(text) {
            Ok(id) => Some(id),
            Err(error) => {
                report.at(value.span.start, format!("`id` {text:?}: {error}"));
                None
            }
        }
    });
    let quota = quota(&fields, "a limit", at, report);
    fields.finish("a `[[limit]]`", report);
    Some(LimitEntry {
        id: id?,
        quota: quota?,
        at: report.position(id_value.map_or(at, |value| value.span.start)),
        source: super::write::table("limit", true, value),
    })
}
