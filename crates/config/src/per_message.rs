//! A rule that charges each inbound message of a gRPC call instead of the call
//! (`per_message = true`; tollgate-config's feature `grpc`, which the facade's `grpc` turns on).
//!
//! ```toml
//! [[rule]]
//! id = "upload-chunks"
//! match = { grpc = "files.v1.Uploads/Put" }
//! key = "api_key"
//! limit = 100
//! per = "1m"
//! per_message = true
//! ```

use tollgate_core::Algorithm;
use tollgate_tower::Rule;

use super::error::Report;
use super::fields::{Fields, boolean};

/// `rule` charged per message when the file says `per_message = true`; a located mistake when
/// the build cannot count messages or the rule is counted in a way messages cannot be.
pub(crate) fn per_message(
    fields: &Fields<'_, '_>,
    built: Option<Rule>,
    report: &mut Report<'_>,
) -> Option<Rule> {
    let Some(value) = fields.get("per_message") else {
        return built;
    };
    let wanted = boolean(value, "`per_message`", report);
    if wanted != Some(true) {
        return built.filter(|_| wanted.is_some());
    }
    let clash = [
        ("settle", "a settled cost"),
        ("count_only_when", "`count_only_when`"),
        ("escalate", "`escalate`"),
    ]
    .into_iter()
    .find(|(field, _)| fields.get(field).is_some());
    if let Some((_, what)) = clash {
        report.at(
            value.span.start,
            format!("`per_message`: every message is counted exactly, when it arrives; {what} does not apply to messages"),
        );
        return None;
    }
    let rule = built?;
    if rule.quota().algorithm() == Algorithm::Concurrency {
        report.at(
            value.span.start,
            "`per_message`: a concurrency quota counts calls in flight, not messages".to_owned(),
        );
        return None;
    }
    charge_each_message(rule, value.span.start, report)
}

#[cfg(feature = "grpc")]
fn charge_each_message(rule: Rule, _at: usize, _report: &mut Report<'_>) -> Option<Rule> {
    Some(rule.per_message())
}

#[cfg(not(feature = "grpc"))]
fn charge_each_message(_rule: Rule, at: usize, report: &mut Report<'_>) -> Option<Rule> {
    report.at(
        at,
        "`per_message` needs the `grpc` feature (tollgate's, or tollgate-config's), which reads gRPC messages".to_owned(),
    );
    None
}
