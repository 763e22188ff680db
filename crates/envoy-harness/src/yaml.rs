//! The small pieces of YAML the config is written with: scalars, durations, indentation.

use std::fmt::Write as _;
use std::time::Duration;

/// `text` as a YAML scalar: bare when it reads as the same string bare (`tollgate`,
/// `x-user-id`), double-quoted and escaped otherwise (spaces, `:`, `true`, `123`, ...).
///
/// YAML's double-quoted strings accept JSON's escapes, so quoting writes those.
pub(crate) fn scalar(text: &str) -> String {
    if is_plain(text) {
        return text.to_owned();
    }
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_control() => {
                // Writing to a `String` cannot fail.
                let _ = write!(quoted, "\\u{:04x}", u32::from(c));
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Words YAML 1.1 (and so some parsers) read as booleans or null.
const RESERVED: &[&str] = &[
    "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~",
];

fn is_plain(text: &str) -> bool {
    let starts_with_letter = text.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    starts_with_letter
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && !RESERVED.contains(&text.to_ascii_lowercase().as_str())
}

/// A `google.protobuf.Duration` as Envoy's YAML takes it: `1s`, `0.250s`.
pub(crate) fn duration(duration: Duration) -> String {
    let nanos = duration.subsec_nanos();
    if nanos == 0 {
        return format!("{}s", duration.as_secs());
    }
    let fraction = format!("{nanos:09}");
    format!("{}.{}s", duration.as_secs(), fraction.trim_end_matches('0'))
}

/// `text` with its common leading indentation removed and every line then indented by
/// `indent` spaces; blank lines stay empty. No trailing newline.
pub(crate) fn reindent(text: &str, indent: usize) -> String {
    let lines: Vec<&str> = text.trim_matches('\n').lines().collect();
    let common = lines
        .iter()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    let pad = " ".repeat(indent);
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        if line.trim().is_empty() {
            out.push(String::new());
        } else {
            let body = line.get(common..).unwrap_or_else(|| line.trim_start());
            out.push(format!("{pad}{}", body.trim_end()));
        }
    }
    out.join("\n")
}

/// `text` (a YAML mapping) as an item of a block list whose `-` is at column `indent`.
pub(crate) fn list_item(text: &str, indent: usize) -> String {
    let block = reindent(text, indent + 2);
    let first_at = " ".repeat(indent + 2);
    let block = block.strip_prefix(&first_at).unwrap_or(&block);
    format!("{}- {block}", " ".repeat(indent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_stay_bare_and_the_rest_is_quoted() {
        assert_eq!(scalar("tollgate"), "tollgate");
        assert_eq!(scalar("x-user-id"), "x-user-id");
        assert_eq!(scalar("true"), "\"true\"");
        assert_eq!(scalar("On"), "\"On\"");
        assert_eq!(scalar("123"), "\"123\"");
        assert_eq!(scalar(""), "\"\"");
        assert_eq!(scalar("a b: \"c\"\\"), "\"a b: \\\"c\\\"\\\\\"");
        assert_eq!(scalar("line\nbreak"), "\"line\\nbreak\"");
    }

    #[test]
    fn durations_in_seconds() {
        assert_eq!(duration(Duration::from_secs(1)), "1s");
        assert_eq!(duration(Duration::from_millis(250)), "0.25s");
        assert_eq!(duration(Duration::from_micros(1_500_001)), "1.500001s");
    }

    #[test]
    fn a_mapping_becomes_a_list_item() {
        let text = "\n    name: a\n    typed_config:\n      x: 1\n";
        assert_eq!(
            list_item(text, 4),
            "    - name: a\n      typed_config:\n        x: 1"
        );
    }
}
