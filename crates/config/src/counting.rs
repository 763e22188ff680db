//! `counting = "exact" | "lease" | "sync"`, or with settings:
//! `counting = { lease = { max_units = 20, top_up_every = "500ms", lifetime = "5s" } }`,
//! `counting = { sync = { every = "200ms", max_unsynced = 50 } }`.

use tollgate_core::{Counting, LeaseSettings, SyncSettings};
use toml_span::Value;

use super::error::Report;
use super::fields::{Fields, duration, positive};

/// How a rule is counted across a fleet; `None` when a mistake was recorded.
pub(crate) fn counting(value: &Value<'_>, report: &mut Report<'_>) -> Option<Counting> {
    if let Some(text) = value.as_str() {
        return match text {
            "exact" => Some(Counting::Exact),
            "lease" => Some(Counting::Lease(LeaseSettings::new())),
            "sync" => Some(Counting::Sync(SyncSettings::new())),
            other => {
                report.at(
                    value.span.start,
                    format!(
                        "`counting` {other:?} is not \"exact\", \"lease\", \"sync\", \
                         {{ lease = {{ ... }} }} or {{ sync = {{ ... }} }}"
                    ),
                );
                None
            }
        };
    }
    let fields = Fields::of(value, "`counting`", &["lease", "sync"], report)?;
    let (lease, sync) = (fields.get("lease"), fields.get("sync"));
    fields.finish("`counting`", report);
    match (lease, sync) {
        (Some(lease), None) => lease_settings(lease, report).map(Counting::Lease),
        (None, Some(sync)) => sync_settings(sync, report).map(Counting::Sync),
        _ => {
            report.at(
                value.span.start,
                "`counting` takes one of `lease = { ... }` or `sync = { ... }`",
            );
            None
        }
    }
}

fn lease_settings(value: &Value<'_>, report: &mut Report<'_>) -> Option<LeaseSettings> {
    let known = &["max_units", "top_up_every", "lifetime"];
    let fields = Fields::of(value, "`lease`", known, report)?;
    let mut settings = Some(LeaseSettings::new());
    if let Some(value) = fields.get("max_units") {
        let units = positive(value, "`max_units`", report);
        settings = settings.zip(units).map(|(s, units)| s.max_units(units));
    }
    if let Some(value) = fields.get("top_up_every") {
        let every = duration(value, "`top_up_every`", report);
        settings = settings.zip(every).map(|(s, every)| s.top_up_every(every));
    }
    if let Some(value) = fields.get("lifetime") {
        let lifetime = duration(value, "`lifetime`", report);
        settings = settings
            .zip(lifetime)
            .map(|(s, lifetime)| s.lifetime(lifetime));
    }
    fields.finish("`lease`", report);
    settings
}

fn sync_settings(value: &Value<'_>, report: &mut Report<'_>) -> Option<SyncSettings> {
    let fields = Fields::of(value, "`sync`", &["every", "max_unsynced"], report)?;
    let mut settings = Some(SyncSettings::new());
    if let Some(value) = fields.get("every") {
        let every = duration(value, "`every`", report);
        settings = settings.zip(every).map(|(s, every)| s.every(every));
    }
    if let Some(value) = fields.get("max_unsynced") {
        let units = positive(value, "`max_unsynced`", report);
        settings = settings.zip(units).map(|(s, units)| s.max_unsynced(units));
    }
    fields.finish("`sync`", report);
    settings
}
