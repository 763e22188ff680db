//! Reading one TOML table field by field, recording every mistake instead of stopping at the
//! first: unknown fields (with the nearest known name), wrong types, values out of range.

use std::time::Duration;

use toml_span::Value;
use toml_span::value::Table;

use super::error::Report;

/// The fields of one table, read by name; [`finish`](Fields::finish) reports the ones nobody
/// asked for.
pub(crate) struct Fields<'v, 'de> {
    table: &'v Table<'de>,
    known: &'static [&'static str],
    /// More known fields ([`also_knowing`](Self::also_knowing)).
    also: &'static [&'static str],
}

impl<'v, 'de> Fields<'v, 'de> {
    /// The table `value` is, whose fields may be `known`; `None` (recorded) when it is no table.
    pub(crate) fn of(
        value: &'v Value<'de>,
        what: &str,
        known: &'static [&'static str],
        report: &mut Report<'_>,
    ) -> Option<Self> {
        match value.as_table() {
            Some(table) => Some(Fields {
                table,
                known,
                also: &[],
            }),
            None => {
                report.at(value.span.start, format!("{what} must be a table"));
                None
            }
        }
    }

    /// The same table, whose fields may also be the `also` ones (a quota's, beside a rule's or
    /// a limit's own).
    pub(crate) fn also_knowing(mut self, also: &'static [&'static str]) -> Self {
        self.also = also;
        self
    }

    /// The value of field `name`, if present.
    pub(crate) fn get(&self, name: &str) -> Option<&'v Value<'de>> {
        self.table
            .iter()
            .find(|(key, _)| key.name == name)
            .map(|(_, value)| value)
    }

    /// Field `name`, which must be present; recorded at `at` when missing.
    pub(crate) fn required(
        &self,
        name: &str,
        what: &str,
        at: usize,
        report: &mut Report<'_>,
    ) -> Option<&'v Value<'de>> {
        let value = self.get(name);
        if value.is_none() {
            report.at(at, format!("{what} needs `{name}`"));
        }
        value
    }

    /// Reports every field that is not a known one, suggesting the nearest known name.
    pub(crate) fn finish(self, what: &str, report: &mut Report<'_>) {
        let all: Vec<&str> = self.known.iter().chain(self.also).copied().collect();
        for key in self.table.keys() {
            if all.contains(&key.name.as_ref()) {
                continue;
            }
            let hint = nearest(&key.name, &all)
                .map(|name| format!(" (did you mean `{name}`?)"))
                .unwrap_or_default();
            let known = all.join("`, `");
            report.at(
                key.span.start,
                format!(
                    "unknown field `{}` in {what}{hint}; known fields: `{known}`",
                    key.name
                ),
            );
        }
    }
}

/// A string value; recorded when it is not one.
pub(crate) fn string<'v>(
    value: &'v Value<'_>,
    what: &str,
    report: &mut Report<'_>,
) -> Option<&'v str> {
    let text = value.as_str();
    if text.is_none() {
        report.at(
            value.span.start,
            format!("{what} must be a string, not {}", kind(value)),
        );
    }
    text
}

/// A positive integer value (at least 1); recorded when it is not one.
pub(crate) fn positive(value: &Value<'_>, what: &str, report: &mut Report<'_>) -> Option<u64> {
    match value.as_integer() {
        Some(number) if number >= 1 => u64::try_from(number).ok(),
        Some(number) => {
            report.at(
                value.span.start,
                format!("{what} must be at least 1, not {number}"),
            );
            None
        }
        None => {
            report.at(
                value.span.start,
                format!("{what} must be a whole number, not {}", kind(value)),
            );
            None
        }
    }
}

/// A boolean value; recorded when it is not one.
pub(crate) fn boolean(value: &Value<'_>, what: &str, report: &mut Report<'_>) -> Option<bool> {
    let flag = value.as_bool();
    if flag.is_none() {
        report.at(
            value.span.start,
            format!("{what} must be true or false, not {}", kind(value)),
        );
    }
    flag
}

/// A duration such as `"15m"`, `"1h 30m"` or `"1d"` (humantime's syntax), above zero.
pub(crate) fn duration(value: &Value<'_>, what: &str, report: &mut Report<'_>) -> Option<Duration> {
    let text = string(value, what, report)?;
    match humantime::parse_duration(text) {
        Ok(duration) if !duration.is_zero() => Some(duration),
        Ok(_) => {
            report.at(value.span.start, format!("{what} must be longer than zero"));
            None
        }
        Err(error) => {
            report.at(
                value.span.start,
                format!("{what} {text:?} is not a duration ({error}); write e.g. \"30s\", \"15m\", \"1h\" or \"1d\""),
            );
            None
        }
    }
}

/// A value as a list: an array's items, or the value alone.
pub(crate) fn one_or_many<'v, 'de>(value: &'v Value<'de>) -> Vec<&'v Value<'de>> {
    match value.as_array() {
        Some(items) => items.iter().collect(),
        None => vec![value],
    }
}

/// What kind of TOML value this is, for messages.
pub(crate) fn kind(value: &Value<'_>) -> &'static str {
    match value.as_table() {
        Some(_) => "a table",
        None if value.as_array().is_some() => "an array",
        None if value.as_str().is_some() => "a string",
        None if value.as_integer().is_some() => "a number",
        None if value.as_float().is_some() => "a decimal number",
        None if value.as_bool().is_some() => "a boolean",
        None => "another value",
    }
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
        let known = ["algorithm", "capacity", "refill", "window"];
        assert_eq!(nearest("algoritm", &known), Some("algorithm"));
        assert_eq!(nearest("windw", &known), Some("window"));
        assert_eq!(nearest("colour", &known), None);
    }
}
