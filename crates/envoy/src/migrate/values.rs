//! A field's value read as ratelimit's Go loader (yaml.v2, YAML 1.1) reads it: text, a
//! boolean, a whole number, a list.

use super::error::Report;
use super::yaml::{Node, Shape, at, kind, shape};

/// A text field: any scalar, as written (yaml.v2 puts `value: 10` in a string as "10").
pub(crate) fn text<'n>(
    node: &'n Node<'_>,
    field: &str,
    report: &mut Report<'_>,
) -> Option<&'n str> {
    match shape(node) {
        Shape::Scalar { text, .. } => Some(text),
        _ => {
            report.at(
                at(node),
                format!("`{field}` must be text, not {}", kind(node)),
            );
            None
        }
    }
}

/// A boolean field: the unquoted words yaml.v2 takes for one (`true`, `yes`, `on`, ...).
pub(crate) fn flag(node: &Node<'_>, field: &str, report: &mut Report<'_>) -> Option<bool> {
    if let Shape::Scalar { text, plain: true } = shape(node) {
        match text {
            "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "y" | "Y" | "on" | "On" | "ON" => {
                return Some(true);
            }
            "false" | "False" | "FALSE" | "no" | "No" | "NO" | "n" | "N" | "off" | "Off"
            | "OFF" => return Some(false),
            _ => {}
        }
    }
    report.at(
        at(node),
        format!(
            "`{field}` must be true or false (unquoted), not {}",
            kind(node)
        ),
    );
    None
}

/// A whole-number field: unquoted decimal digits (`_` between them allowed, as in yaml.v2) or
/// `0x` and hexadecimal digits.
pub(crate) fn count(node: &Node<'_>, field: &str, report: &mut Report<'_>) -> Option<u64> {
    let Shape::Scalar { text, plain: true } = shape(node) else {
        report.at(
            at(node),
            format!(
                "`{field}` must be a whole number (unquoted), not {}",
                kind(node)
            ),
        );
        return None;
    };
    let unsigned = text.strip_prefix('+').unwrap_or(text);
    let parsed = match unsigned.strip_prefix("0x") {
        Some(hex) => digits(hex, 16),
        None if unsigned.len() > 1 && unsigned.starts_with('0') => {
            report.at(
                at(node),
                format!(
                    "`{field}: {text}` starts with a zero, which ratelimit's YAML 1.1 loader reads \
                     as an octal number: write it in decimal without the leading zero"
                ),
            );
            return None;
        }
        None => digits(unsigned, 10),
    };
    match parsed {
        Ok(number) => Some(number),
        Err(Digits::TooLarge) => {
            report.at(
                at(node),
                format!("`{field}: {text}` is too large: write a number of at most 4294967295"),
            );
            None
        }
        Err(Digits::NotANumber) => {
            report.at(
                at(node),
                format!("`{field}` must be a whole number, not {}", kind(node)),
            );
            None
        }
    }
}

/// Why digits are not a number.
enum Digits {
    NotANumber,
    TooLarge,
}

/// `text` as a number in `radix`: digits, with single `_` between them.
fn digits(text: &str, radix: u32) -> Result<u64, Digits> {
    if text.is_empty() || text.starts_with('_') || text.ends_with('_') || text.contains("__") {
        return Err(Digits::NotANumber);
    }
    let mut number: u64 = 0;
    for digit in text.chars().filter(|c| *c != '_') {
        let value = digit.to_digit(radix).ok_or(Digits::NotANumber)?;
        number = number
            .checked_mul(u64::from(radix))
            .and_then(|number| number.checked_add(u64::from(value)))
            .ok_or(Digits::TooLarge)?;
    }
    Ok(number)
}

/// A list field's items (none when it is not a list, which is reported).
pub(crate) fn list<'n, 't>(
    node: &'n Node<'t>,
    field: &str,
    report: &mut Report<'_>,
) -> &'n [Node<'t>] {
    match shape(node) {
        Shape::List(items) => items,
        _ => {
            report.at(
                at(node),
                format!("`{field}` must be a list, not {}", kind(node)),
            );
            &[]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_take_separators_between_digits_only() {
        assert!(matches!(digits("1_000", 10), Ok(1000)));
        assert!(matches!(digits("ff", 16), Ok(255)));
        assert!(matches!(digits("_1", 10), Err(Digits::NotANumber)));
        assert!(matches!(digits("1__0", 10), Err(Digits::NotANumber)));
        assert!(matches!(digits("12a", 10), Err(Digits::NotANumber)));
        assert!(matches!(
            digits("99999999999999999999", 10),
            Err(Digits::TooLarge)
        ));
    }
}
