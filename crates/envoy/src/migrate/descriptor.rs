//! A `descriptors` list: each entry's key and value, its rate_limit and settings, and the
//! descriptors nested under it.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use super::config::{Descriptor, Quota};
use super::error::Report;
use super::fields::{DESCRIPTOR, Fields, fields};
use super::rate_limit::limit;
use super::values::{flag, list, text};
use super::yaml::{Node, Shape, at, kind, shape};

/// How deep descriptors may nest. Envoy's descriptors have a few entries; deeper than this is
/// a mistake (and the reading recurses once per level).
const DEEPEST: usize = 32;

/// The descriptors of the `descriptors` list `node`, `depth` levels down.
pub(crate) fn descriptors(
    node: &Node<'_>,
    depth: usize,
    report: &mut Report<'_>,
) -> Vec<Descriptor> {
    let items = list(node, "descriptors", report);
    if depth >= DEEPEST && !items.is_empty() {
        report.at(
            at(node),
            format!(
                "descriptors are nested more than {DEEPEST} deep here, and an Envoy descriptor \
                 has a few entries: check the file's indentation, or flatten the nesting"
            ),
        );
        return Vec::new();
    }
    let mut read: Vec<Descriptor> = Vec::new();
    // Each name ratelimit files a descriptor under, and which descriptor has it.
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for item in items {
        let Some(descriptor) = descriptor(item, depth, report) else {
            continue;
        };
        // A descriptor without a key is reported already.
        if !descriptor.key.is_empty() {
            match names.entry(filed_as(&descriptor)) {
                Entry::Occupied(first) => {
                    if let Some(first) = read.get(*first.get()) {
                        report.at(descriptor.at, duplicate(first, &descriptor));
                    }
                }
                Entry::Vacant(free) => {
                    free.insert(read.len());
                }
            }
        }
        read.push(descriptor);
    }
    read
}

/// The name ratelimit files `descriptor` under in its list: its key, then `_` and its value if
/// it has one.
fn filed_as(descriptor: &Descriptor) -> String {
    match &descriptor.value {
        Some(value) => format!("{}_{value}", descriptor.key),
        None => descriptor.key.clone(),
    }
}

/// Why `second` cannot sit in the list that has `first`.
fn duplicate(first: &Descriptor, second: &Descriptor) -> String {
    let line = first.at.line;
    if first.key == second.key && first.value == second.value {
        let value = match &second.value {
            Some(value) => format!("value {value:?}"),
            None => "no value".to_owned(),
        };
        format!(
            "a descriptor with key {:?} and {value} is already in this list (line {line}), and \
             ratelimit refuses to load both: merge the two",
            second.key
        )
    } else {
        format!(
            "ratelimit joins key and value with `_`, so this descriptor and the one at line \
             {line} share a name and ratelimit refuses to load both: rename one key"
        )
    }
}

/// The descriptor `node`, unless it is not a mapping (reported).
fn descriptor(node: &Node<'_>, depth: usize, report: &mut Report<'_>) -> Option<Descriptor> {
    let fields = fields(node, &DESCRIPTOR, report)?;
    let key = key(&fields, report);
    let value = value(&fields, report);
    let limit = fields.get("rate_limit").map(|node| limit(node, report));
    let switch = |name: &str, report: &mut Report<'_>| {
        fields
            .get(name)
            .and_then(|node| flag(node, name, report))
            .unwrap_or(false)
    };
    let mut shadow = switch("shadow_mode", report);
    let mut dropped = Vec::new();
    for name in ["detailed_metric", "value_to_metric"] {
        if switch(name, report) {
            dropped.push(format!(
                "`{name}: true` is dropped: it only names ratelimit's statistics"
            ));
        }
    }
    let unlimited = limit
        .as_ref()
        .is_some_and(|limit| limit.quota == Some(Quota::Unlimited));
    if shadow && (limit.is_none() || unlimited) {
        let why = if unlimited {
            "an unlimited rule never refuses"
        } else {
            "without a rate_limit it has no effect, in ratelimit too"
        };
        dropped.push(format!("`shadow_mode: true` is dropped: {why}"));
        shadow = false;
    }
    refuse_the_inexpressible(&fields, report);
    let descriptors = fields
        .get("descriptors")
        .map(|node| descriptors(node, depth + 1, report))
        .unwrap_or_default();
    Some(Descriptor {
        at: fields.at(),
        key,
        value,
        limit,
        shadow,
        dropped,
        descriptors,
    })
}

/// The descriptor's `key`: required, and matched exactly.
fn key(fields: &Fields<'_, '_>, report: &mut Report<'_>) -> String {
    let Some(node) = fields.get("key") else {
        report.at(
            fields.at(),
            "this descriptor has no `key`: every descriptor needs one, the key of the Envoy \
             descriptor entry it matches; add `key: <key>`",
        );
        return String::new();
    };
    let Some(key) = text(node, "key", report) else {
        return String::new();
    };
    if key.is_empty() {
        report.at(
            at(node),
            "`key` is empty: name the Envoy descriptor entry's key",
        );
    } else if key.contains('*') {
        report.at(
            at(node),
            format!(
                "key {key:?} has a `*`, which ratelimit reads as a wildcard over keys, and \
                 tollgate matches keys exactly: name the key in full (a wildcard goes in `value`)"
            ),
        );
    }
    key.to_owned()
}

/// The descriptor's `value`: `None` for any value (left out or empty, as in ratelimit); a `*`
/// only at its end (a prefix).
fn value(fields: &Fields<'_, '_>, report: &mut Report<'_>) -> Option<String> {
    let node = fields.get("value")?;
    let value = text(node, "value", report)?;
    if value.is_empty() {
        return None;
    }
    if value.find('*').is_some_and(|star| star + 1 < value.len()) {
        report.at(
            at(node),
            format!(
                "the `*` in value {value:?} is not at its end: ratelimit matches it anywhere, \
                 and tollgate knows only a trailing `*` (a prefix); use a prefix, or one \
                 descriptor per value"
            ),
        );
    }
    Some(value.to_owned())
}

/// Reports the settings tollgate has no equivalent for.
fn refuse_the_inexpressible(fields: &Fields<'_, '_>, report: &mut Report<'_>) {
    let refused = [
        (
            "quota_mode",
            "`quota_mode: true` (over the limit only when all of a request's quota descriptors \
             are) has no tollgate equivalent: remove it to enforce this limit, or use \
             `shadow_mode: true` to only watch it",
        ),
        (
            "share_threshold",
            "`share_threshold: true` (every value matching the wildcard shares one count) has \
             no tollgate equivalent, where each value is counted on its own: remove it to count \
             each value apart, or list the values",
        ),
    ];
    for (name, why) in refused {
        if let Some(node) = fields.get(name)
            && flag(node, name, report) == Some(true)
        {
            report.at(at(node), why);
        }
    }
    if let Some(node) = fields.get("metadata") {
        let empty = matches!(shape(node), Shape::Mapping(mapping) if mapping.is_empty());
        if !empty {
            report.at(
                at(node),
                format!(
                    "`metadata` ({}, sent back to Envoy with the descriptor's status) has no \
                     tollgate equivalent: remove it, and set the metadata in Envoy if it is \
                     needed",
                    kind(node)
                ),
            );
        }
    }
}
