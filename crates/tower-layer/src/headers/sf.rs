//! The two Structured Field Values (RFC 8941) pieces the rate-limit fields need: sf-strings and
//! sf-integers. Nothing here can produce an invalid field value, whatever the input.

use std::time::Duration;

use tollgate_core::whole_seconds_up;

/// The largest sf-integer: RFC 8941 allows at most 15 decimal digits.
pub(crate) const MAX_SF_INTEGER: u64 = 999_999_999_999_999;

/// `value`, clamped to what an sf-integer can carry.
pub(crate) const fn sf_integer(value: u64) -> u64 {
    if value > MAX_SF_INTEGER {
        MAX_SF_INTEGER
    } else {
        value
    }
}

/// `duration` in whole seconds rounded **up**, clamped to an sf-integer.
///
/// Clamping first also keeps [`whole_seconds_up`] away from its overflow at `Duration::MAX`
/// (a configured wait, unlike a decision's, can be any `Duration`).
pub(crate) fn sf_seconds_up(duration: Duration) -> u64 {
    whole_seconds_up(duration.min(Duration::from_secs(MAX_SF_INTEGER)))
}

/// Appends `text` to `out` as an sf-string: quoted, with `"` and `\` escaped.
///
/// An sf-string may only hold printable ASCII (0x20–0x7E). Rule ids never contain anything
/// else, but this takes any `&str`, so every other character becomes `?` rather than producing a
/// field a client cannot parse (or a header value `http` would reject).
pub(crate) fn push_sf_string(out: &mut String, text: &str) {
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' | '\\' => {
                out.push('\\');
                out.push(ch);
            }
            ' '..='~' => out.push(ch),
            _ => out.push('?'),
        }
    }
    out.push('"');
}

/// Appends `;key=value` (an integer parameter) to `out`, clamping `value` to an sf-integer.
pub(crate) fn push_integer_param(out: &mut String, key: &str, value: u64) {
    out.push(';');
    out.push_str(key);
    out.push('=');
    out.push_str(itoa::Buffer::new().format(sf_integer(value)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sf_string(text: &str) -> String {
        let mut out = String::new();
        push_sf_string(&mut out, text);
        out
    }

    #[test]
    fn plain_names_are_quoted() {
        assert_eq!(sf_string("burst"), r#""burst""#);
        assert_eq!(sf_string(""), r#""""#);
    }

    #[test]
    fn quotes_and_backslashes_are_escaped() {
        assert_eq!(sf_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn characters_outside_printable_ascii_become_question_marks() {
        assert_eq!(sf_string("tab\there\u{7f}é\n"), r#""tab?here???""#);
    }

    #[test]
    fn every_output_parses_as_the_same_text_where_it_can() {
        for name in [
            "a",
            "x-y.z_1",
            r#"q"uote"#,
            r"back\slash",
            "sp ace",
            "\\\"\\",
        ] {
            let item: sfv::Item = sfv::Parser::new(&sf_string(name)).parse().unwrap();
            assert_eq!(item.bare_item.as_string().unwrap().as_str(), name);
        }
    }

    #[test]
    fn integers_are_clamped_to_fifteen_digits() {
        assert_eq!(sf_integer(7), 7);
        assert_eq!(sf_integer(MAX_SF_INTEGER), MAX_SF_INTEGER);
        assert_eq!(sf_integer(MAX_SF_INTEGER + 1), MAX_SF_INTEGER);
        assert_eq!(sf_integer(u64::MAX), MAX_SF_INTEGER);
        let mut out = String::new();
        push_integer_param(&mut out, "q", u64::MAX);
        assert_eq!(out, ";q=999999999999999");
    }

    #[test]
    fn seconds_round_up_and_clamp() {
        assert_eq!(sf_seconds_up(Duration::ZERO), 0);
        assert_eq!(sf_seconds_up(Duration::from_millis(300)), 1);
        assert_eq!(sf_seconds_up(Duration::from_secs(2)), 2);
        assert_eq!(sf_seconds_up(Duration::from_millis(2001)), 3);
        let max = Duration::from_secs(MAX_SF_INTEGER);
        assert_eq!(sf_seconds_up(max - Duration::from_nanos(1)), MAX_SF_INTEGER);
        assert_eq!(sf_seconds_up(max + Duration::from_nanos(1)), MAX_SF_INTEGER);
        assert_eq!(sf_seconds_up(Duration::MAX), MAX_SF_INTEGER);
    }
}
