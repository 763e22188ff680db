//! The rules to write: one per descriptor with a rate_limit, whose descriptor is the path of
//! entries from the top of the file to it; ids given, and `replaces` names turned into ids.

use std::collections::BTreeMap;

use super::config::{Config, Descriptor, Quota};
use super::error::Report;
use super::fields::nearest;
use super::ids::{Wanted, assign};

/// One entry of a rule's descriptor.
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) value: Option<String>,
}

/// A rule of the rule file.
pub(crate) struct Rule {
    pub(crate) id: String,
    pub(crate) descriptor: Vec<Entry>,
    pub(crate) quota: Quota,
    pub(crate) shadow: bool,
    /// The ids of the rules it replaces.
    pub(crate) replaces: Vec<String>,
    /// Comment lines above it: what was changed or dropped.
    pub(crate) notes: Vec<String>,
}

/// The rule file's contents.
pub(crate) struct Plan {
    pub(crate) domain: String,
    pub(crate) rules: Vec<Rule>,
    /// Comment lines for the head of the file: what was dropped where no rule is written.
    pub(crate) notes: Vec<String>,
}

/// A descriptor with a rate_limit, and the path to it.
struct Found<'c> {
    descriptor: &'c Descriptor,
    path: Vec<&'c Descriptor>,
}

/// The rules `config` makes.
pub(crate) fn plan(config: &Config, report: &mut Report<'_>) -> Plan {
    let mut found = Vec::new();
    let mut notes = Vec::new();
    walk(&config.descriptors, &mut Vec::new(), &mut found, &mut notes);
    if found.is_empty() && !report.has_errors() {
        report.at(
            config.at,
            "no descriptor in the file has a `rate_limit`, so there is no rule to write, and an \
             empty tollgate rule file is refused: add a rate_limit, or leave this file out",
        );
    }
    let wanted: Vec<Wanted<'_>> = found
        .iter()
        .map(|found| Wanted {
            name: found
                .descriptor
                .limit
                .as_ref()
                .and_then(|limit| limit.name.as_deref()),
            made_from: std::iter::once(config.domain.clone())
                .chain(found.path.iter().map(|step| match &step.value {
                    Some(value) => format!("{}_{value}", step.key),
                    None => step.key.clone(),
                }))
                .collect(),
            line: found.descriptor.at.line,
        })
        .collect();
    let assigned = assign(&wanted);
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (want, assigned) in wanted.iter().zip(&assigned) {
        if let Some(name) = want.name {
            by_name.entry(name).or_default().push(&assigned.id);
        }
    }
    let mut rules = Vec::new();
    for (found, assigned) in found.iter().zip(&assigned) {
        let Some(limit) = &found.descriptor.limit else {
            continue;
        };
        let mut replaces: Vec<String> = Vec::new();
        for replaced in &limit.replaces {
            match by_name.get(replaced.name.as_str()) {
                Some(ids) => replaces.extend(ids.iter().map(|id| (*id).to_owned())),
                None => {
                    let names: Vec<&str> = by_name.keys().copied().collect();
                    let hint = nearest(&replaced.name, &names)
                        .map(|near| format!(" (did you mean {near:?}?)"))
                        .unwrap_or_default();
                    report.at(
                        replaced.at,
                        format!(
                            "no rate_limit in this file is named {:?}{hint}: `replaces` refers to \
                             another rate_limit's `name`; fix the name or remove the entry",
                            replaced.name
                        ),
                    );
                }
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        replaces.retain(|id| seen.insert(id.clone()));
        // A rate_limit that could not be read is reported; there is no rule to write then.
        let Some(quota) = limit.quota else {
            continue;
        };
        let mut notes = assigned.notes.clone();
        notes.extend(found.descriptor.dropped.iter().cloned());
        rules.push(Rule {
            id: assigned.id.clone(),
            descriptor: found
                .path
                .iter()
                .map(|step| Entry {
                    key: step.key.clone(),
                    value: step.value.clone(),
                })
                .collect(),
            quota,
            shadow: found.descriptor.shadow,
            replaces,
            notes,
        });
    }
    Plan {
        domain: config.domain.clone(),
        rules,
        notes,
    }
}

/// Collects, depth first in file order, the descriptors with a rate_limit under `path`, and
/// the notes of those without one.
fn walk<'c>(
    descriptors: &'c [Descriptor],
    path: &mut Vec<&'c Descriptor>,
    found: &mut Vec<Found<'c>>,
    notes: &mut Vec<String>,
) {
    for descriptor in descriptors {
        path.push(descriptor);
        if descriptor.limit.is_some() {
            found.push(Found {
                descriptor,
                path: path.clone(),
            });
        } else {
            let line = descriptor.at.line;
            notes.extend(
                descriptor
                    .dropped
                    .iter()
                    .map(|note| format!("line {line}: {note}")),
            );
        }
        walk(&descriptor.descriptors, path, found, notes);
        path.pop();
    }
}
