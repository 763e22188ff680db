//! What answers a bucket: the rule its id matches (as a descriptor would match it), and the
//! caller that rule counts, keyed exactly as the rate limit service keys the same values.

use std::collections::HashMap;

use smallvec::SmallVec;
use tollgate_core::{Key, Mode, Quota, RuleId};
use tollgate_tower::Rule;

use crate::caps::MAX_VALUE_BYTES;
use crate::table::{Candidate, DescriptorTable, in_rule_order};

/// How a bucket is answered.
pub(crate) enum Target<'t> {
    /// Allowed, uncounted: no rule matches (an unknown domain, or no rule with the bucket's keys
    /// and values), the rule is `unlimited`, or it does not enforce (shadow, flag).
    Allowed(Option<&'t RuleId>),
    /// Refused, uncounted: the bucket's values do not name a caller of the rule (`why`).
    Refused(Option<&'t RuleId>, String),
    /// Counted: leases of `rule`'s quota for `key`.
    Counted {
        candidate: &'t Candidate,
        rule: &'t Rule,
        key: Key,
    },
}

/// What an assignment was made for, to notice when the rules in force change under a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Basis {
    Allowed(Option<RuleId>),
    Refused(Option<RuleId>),
    Counted(RuleId, Quota),
}

/// The target of a bucket of `bucket` in `domain`.
pub(crate) fn target<'t>(
    table: &'t DescriptorTable,
    domain: &str,
    bucket: &HashMap<String, String>,
) -> Target<'t> {
    if let Some((key, value)) = bucket
        .iter()
        .find(|(_, value)| value.len() > MAX_VALUE_BYTES)
    {
        let why = format!(
            "the value of {key:?} is {} bytes; at most {MAX_VALUE_BYTES}",
            value.len()
        );
        return Target::Refused(None, why);
    }
    let Some(candidate) = table.resolve_bucket(domain, bucket) else {
        return Target::Allowed(None);
    };
    let Some(rule) = candidate
        .rule
        .as_ref()
        .filter(|rule| rule.store_mode() == Mode::Enforce)
    else {
        return Target::Allowed(Some(&candidate.id));
    };
    let pairs = in_rule_order(&candidate.matcher, bucket).unwrap_or_default();
    let values: SmallVec<[&str; 4]> = candidate
        .matcher
        .key_values(pairs.iter().map(|(_, value)| *value))
        .collect();
    match rule.key_of_values(&values) {
        Ok(key) => Target::Counted {
            candidate,
            rule,
            key,
        },
        Err(error) => Target::Refused(
            Some(&candidate.id),
            format!(
                "its values do not name a caller of rule {:?}: {error}",
                candidate.id.as_str()
            ),
        ),
    }
}

impl Target<'_> {
    /// What an assignment to this target is made for.
    pub(crate) fn basis(&self) -> Basis {
        match self {
            Target::Allowed(id) => Basis::Allowed(id.cloned()),
            Target::Refused(id, _) => Basis::Refused(id.cloned()),
            Target::Counted {
                candidate, rule, ..
            } => Basis::Counted(candidate.id.clone(), *rule.quota()),
        }
    }
}
