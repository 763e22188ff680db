//! Just enough JSON writing for problem details: strings and their escapes (RFC 8259 §7).

use std::fmt::Write as _;

/// Appends `text` to `out` as a JSON string, quoted and escaped.
///
/// `"` and `\` are escaped, control characters (U+0000–U+001F) use their short escape or
/// `\u00XX`, and everything else is kept as UTF-8. U+2028 and U+2029 are escaped as well, so
/// the output is also safe to embed in JavaScript.
pub(crate) fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\u{00}'..='\u{1f}' | '\u{2028}' | '\u{2029}' => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{:04x}", u32::from(ch));
            }
            _ => out.push(ch),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> String {
        let mut out = String::new();
        push_json_string(&mut out, text);
        out
    }

    #[test]
    fn escapes_what_json_requires() {
        assert_eq!(json(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(
            json("\n\r\t\u{08}\u{0c}\u{0}\u{1f}"),
            r#""\n\r\t\b\f\u0000\u001f""#
        );
        assert_eq!(json("é\u{2028}"), "\"é\\u2028\"");
    }

    #[test]
    fn every_string_round_trips_through_a_real_parser() {
        let all_low: String = (0u8..0x80).map(char::from).collect();
        for text in [
            "",
            "plain",
            r#"q"\"#,
            "ünïcødé 🚦",
            "\u{2029}\u{7f}",
            all_low.as_str(),
        ] {
            let parsed: String = serde_json::from_str(&json(text)).unwrap();
            assert_eq!(parsed, text);
        }
    }
}
