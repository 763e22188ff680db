//! A mapping read as fields: each name known where it is written, or refused with a hint.

use super::error::{At, Report};
use super::yaml::{Node, Shape, at, kind, shape};

/// A place in ratelimit's format and the fields it has.
pub(crate) struct Place {
    /// The place in words: "the file's top level", "a descriptor".
    pub(crate) what: &'static str,
    /// Where its fields are written, for a misplaced one: "at the top level of the file".
    pub(crate) home: &'static str,
    pub(crate) fields: &'static [&'static str],
}

/// The file itself.
pub(crate) const TOP: Place = Place {
    what: "the file's top level",
    home: "at the top level of the file",
    fields: &["domain", "descriptors"],
};

/// One entry of a `descriptors` list.
pub(crate) const DESCRIPTOR: Place = Place {
    what: "a descriptor",
    home: "in a descriptor",
    fields: &[
        "key",
        "value",
        "rate_limit",
        "descriptors",
        "shadow_mode",
        "detailed_metric",
        "value_to_metric",
        "quota_mode",
        "share_threshold",
        "metadata",
    ],
};

/// A descriptor's `rate_limit`.
pub(crate) const RATE_LIMIT: Place = Place {
    what: "a rate_limit",
    home: "in a descriptor's `rate_limit`",
    fields: &["unit", "requests_per_unit", "unlimited", "name", "replaces"],
};

/// One entry of a rate_limit's `replaces` list.
pub(crate) const REPLACES: Place = Place {
    what: "a replaces entry",
    home: "in a `replaces` entry",
    fields: &["name"],
};

/// Where a misplaced field is sent, first match first (`descriptors` to a descriptor, `name` to
/// a rate_limit).
const PLACES: [&Place; 4] = [&DESCRIPTOR, &RATE_LIMIT, &TOP, &REPLACES];

/// A mapping's fields, each name once; a field whose value is null counts as left out, as in
/// ratelimit.
pub(crate) struct Fields<'n, 't> {
    at: At,
    entries: Vec<(&'n str, &'n Node<'t>)>,
}

impl<'n, 't> Fields<'n, 't> {
    /// Where the mapping starts (its first field).
    pub(crate) fn at(&self) -> At {
        self.at
    }

    /// The value of the field `name`, unless left out or null.
    pub(crate) fn get(&self, name: &str) -> Option<&'n Node<'t>> {
        self.entries
            .iter()
            .find(|(field, _)| *field == name)
            .map(|(_, value)| *value)
            .filter(|value| !matches!(shape(value), Shape::Absent))
    }
}

/// The fields of `node`, which must be a mapping of `place`'s fields; unknown and repeated
/// names are reported (and left out), the rest kept. `None` if `node` is not a mapping.
pub(crate) fn fields<'n, 't>(
    node: &'n Node<'t>,
    place: &Place,
    report: &mut Report<'_>,
) -> Option<Fields<'n, 't>> {
    let Shape::Mapping(mapping) = shape(node) else {
        report.at(
            at(node),
            format!(
                "{} must be a mapping of fields ({}), not {}",
                place.what,
                listed(place.fields),
                kind(node)
            ),
        );
        return None;
    };
    let mut entries: Vec<(&'n str, &'n Node<'t>)> = Vec::new();
    let mut seen: Vec<(&'n str, At)> = Vec::new();
    for (key, value) in mapping {
        let Shape::Scalar { text: name, .. } = shape(key) else {
            report.at(
                at(key),
                format!("a field name must be text, not {}", kind(key)),
            );
            continue;
        };
        if let Some((_, first)) = seen.iter().find(|(seen, _)| *seen == name) {
            report.at(
                at(key),
                format!(
                    "`{name}` is given twice in {} (first at line {}): keep one",
                    place.what, first.line
                ),
            );
            continue;
        }
        seen.push((name, at(key)));
        if place.fields.contains(&name) {
            entries.push((name, value));
        } else {
            report.at(at(key), unknown(name, place));
        }
    }
    Some(Fields {
        at: at(node),
        entries,
    })
}

/// Why the field `name` is refused in `place`, and what to do.
fn unknown(name: &str, place: &Place) -> String {
    if name == "<<" {
        return "YAML merge keys (`<<`) are not read: write the fields out in full".to_owned();
    }
    if let Some(home) = PLACES.iter().find(|other| other.fields.contains(&name)) {
        return format!(
            "`{name}` belongs {}, not in {}: ratelimit ignores it here; move it or remove it",
            home.home, place.what
        );
    }
    let hint = nearest(name, place.fields)
        .map(|near| format!(" (did you mean `{near}`?)"))
        .unwrap_or_default();
    format!(
        "unknown field `{name}` in {}{hint}: ratelimit refuses unknown fields; {} has {}",
        place.what,
        place.what,
        listed(place.fields)
    )
}

/// `names` in backticks, separated by commas.
pub(crate) fn listed(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The known name closest to `name`, if it is close enough to be a typo (at most a third of its
/// letters differ).
pub(crate) fn nearest<'k>(name: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|candidate| (strsim::osa_distance(name, candidate), *candidate))
        .filter(|(distance, candidate)| *distance <= candidate.len().max(3) / 3)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses_are_suggested_and_far_ones_are_not() {
        assert_eq!(nearest("uint", RATE_LIMIT.fields), Some("unit"));
        assert_eq!(
            nearest("requests_per_units", RATE_LIMIT.fields),
            Some("requests_per_unit")
        );
        assert_eq!(nearest("colour", RATE_LIMIT.fields), None);
    }

    #[test]
    fn a_misplaced_field_is_sent_home() {
        let message = unknown("unit", &DESCRIPTOR);
        assert!(
            message
                .starts_with("`unit` belongs in a descriptor's `rate_limit`, not in a descriptor")
        );
    }

    #[test]
    fn an_unknown_field_lists_the_known_ones() {
        let message = unknown("shadow", &DESCRIPTOR);
        assert!(
            message.contains("unknown field `shadow` in a descriptor"),
            "{message}"
        );
        assert!(message.contains("`shadow_mode`"), "{message}");
    }
}
