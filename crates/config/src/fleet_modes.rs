//! A rule's fleet modes beside `counting`: `split = 4` (each of 4 gateways allows its part),
//! `sub_buckets = 8` (a hot key spread over 8 sub-keys), `cache_blocked = true` (refused
//! callers refused here until their `Retry-After`), `store = "home"` (counted in a named
//! store of the layer's `Stores`) and `replica_ack = "50ms"` (answered once a Redis replica
//! holds the count).

use tollgate_core::{Counting, SplitSettings};
use toml_span::Value;

use super::error::Report;
use super::fields::{Fields, boolean, duration, positive, string};
use tollgate_tower::Rule;

/// The most sub-buckets one key may be spread over.
const MAX_SUB_BUCKETS: u64 = tollgate_core::MAX_SUB_BUCKETS as u64;

/// The longest store name, in bytes.
const MAX_STORE_NAME: usize = 64;

/// `rule` with the fleet modes its table sets; `None` when one is a mistake (recorded).
pub(crate) fn fleet_modes(
    fields: &Fields<'_, '_>,
    mut rule: Option<Rule>,
    report: &mut Report<'_>,
) -> Option<Rule> {
    let counted = rule.as_ref().map(Rule::counting);
    let counting = fields
        .get("counting")
        .filter(|_| !matches!(counted, Some(Counting::Exact) | None));
    // What a rule counted otherwise than exactly says so with: its counting, or its split.
    let counted_otherwise = counting.or(fields.get("split"));
    if let Some(value) = fields.get("split") {
        if let Some(other) = fields.get("counting") {
            report.at(
                later(value, other),
                "`split` and `counting` both say how the rule is counted across a fleet: keep one",
            );
            rule = None;
        }
        let parts = positive(value, "`split`", report).and_then(|parts| {
            let parts = u32::try_from(parts).ok();
            if parts.is_none() {
                report.at(value.span.start, "`split` is too large");
            }
            parts
        });
        rule = match (rule, parts) {
            (Some(rule), Some(parts)) => splittable(rule, parts, value, report),
            _ => None,
        };
    }
    if let Some(value) = fields.get("sub_buckets") {
        let sub_buckets = positive(value, "`sub_buckets`", report).filter(|&sub_buckets| {
            let fits = sub_buckets <= MAX_SUB_BUCKETS;
            if !fits {
                report.at(
                    value.span.start,
                    format!("`sub_buckets` {sub_buckets} is above the most, {MAX_SUB_BUCKETS}"),
                );
            }
            fits
        });
        if let Some(other) = counted_otherwise {
            report.at(
                later(value, other),
                "`sub_buckets` is for rules counted exactly in the shared store, not with \
                 `counting` or `split`",
            );
            rule = None;
        }
        rule = match (rule, sub_buckets) {
            (Some(rule), Some(sub_buckets)) => {
                let sub_buckets = u32::try_from(sub_buckets).unwrap_or(u32::MAX);
                match rule.quota().part(0, u64::from(sub_buckets)) {
                    Ok(_) => Some(rule.sub_buckets(sub_buckets)),
                    Err(error) => {
                        report.at(value.span.start, format!("`sub_buckets`: {error}"));
                        None
                    }
                }
            }
            _ => None,
        };
    }
    if let Some(value) = fields.get("cache_blocked") {
        let cache = boolean(value, "`cache_blocked`", report);
        if let Some(other) = counted_otherwise.filter(|_| cache == Some(true)) {
            report.at(
                later(value, other),
                "`cache_blocked` is for rules counted exactly in the shared store: leased and \
                 synced rules remember their refusals already, and split ones ask no store",
            );
            rule = None;
        }
        rule = rule
            .zip(cache)
            .map(|(rule, cache)| rule.cache_blocked(cache));
    }
    if let Some(value) = fields.get("store") {
        let name = string(value, "`store`", report).filter(|name| {
            let valid = is_store_name(name);
            if !valid {
                report.at(
                    value.span.start,
                    format!(
                        "`store` {name:?} is not a store name: 1 to {MAX_STORE_NAME} bytes of \
                         A-Z a-z 0-9 _ - ."
                    ),
                );
            }
            valid
        });
        rule = rule.zip(name).map(|(rule, name)| rule.with_store(name));
    }
    if let Some(value) = fields.get("replica_ack") {
        let most = tollgate_core::MAX_REPLICA_ACK;
        let wait = duration(value, "`replica_ack`", report).filter(|&wait| {
            let fits = wait <= most;
            if !fits {
                report.at(
                    value.span.start,
                    format!("`replica_ack` {wait:?} is above the most, {most:?}"),
                );
            }
            fits
        });
        if let Some(other) = counted_otherwise {
            report.at(
                later(value, other),
                "`replica_ack` is for rules counted exactly in the shared store: a leased or \
                 synced rule's store calls are leases and pushes, and a split one asks no store",
            );
            rule = None;
        }
        rule = rule.zip(wait).map(|(rule, wait)| rule.replica_ack(wait));
    }
    rule
}

/// Where to report two fields that cannot go together: at the one written later.
fn later(one: &Value<'_>, other: &Value<'_>) -> usize {
    one.span.start.max(other.span.start)
}

/// `rule` split `parts` ways, when its quota can be.
fn splittable(rule: Rule, parts: u32, value: &Value<'_>, report: &mut Report<'_>) -> Option<Rule> {
    match rule.quota().part(0, u64::from(parts)) {
        Ok(_) => Some(rule.with_counting(Counting::Split(SplitSettings::new(parts)))),
        Err(error) => {
            report.at(value.span.start, format!("`split`: {error}"));
            None
        }
    }
}

/// Whether `name` can name a store: the characters of a rule id.
fn is_store_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_STORE_NAME
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.'))
}
