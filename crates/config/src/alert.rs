//! A rule's alert as it nears its limit: `alert_at = 0.8` or `alert_at = "80%"`, the share of
//! its limit at which any caller raises the rule's alert (see
//! [`Rule::with_alert_at`](tollgate_tower::Rule::with_alert_at)).
//!
//! ```toml
//! [[rule]]
//! id = "otp-global"
//! match = { method = "POST", path = "/otp" }
//! algorithm = "fixed_window"
//! limit = 2000
//! window = "1s"
//! key = "global"
//! alert_at = "80%"
//! ```

use tollgate_tower::{AlertShare, Rule};
use toml_span::Value;

use super::error::Report;
use super::fields::{Fields, kind};

/// `rule` alerting at the share its table's `alert_at` states; a located mistake when the value
/// is no share, or the rule is for Envoy only (its decisions never reach the HTTP layer, which
/// raises alerts).
pub(crate) fn alert_at(
    fields: &Fields<'_, '_>,
    built: Option<Rule>,
    report: &mut Report<'_>,
) -> Option<Rule> {
    let Some(value) = fields.get("alert_at") else {
        return built;
    };
    let share = share(value, report);
    if fields.get("envoy").is_some() && fields.get("match").is_none() {
        report.at(
            value.span.start,
            "`alert_at`: a rule for Envoy only is decided by tollgate-envoy, which raises no alerts; give the rule a `match` (alerts come from the HTTP layer's decisions) or leave `alert_at` out",
        );
        return None;
    }
    Some(built?.with_alert_at(share?))
}

/// What a share may be written as, for messages.
const WRITE: &str = "a share of the limit above 0 and at most 1, as a decimal number (`0.8`) or a percentage (`\"80%\"`)";

/// A share: a number above 0 and at most 1, or a string percentage above 0 and at most 100.
fn share(value: &Value<'_>, report: &mut Report<'_>) -> Option<AlertShare> {
    let at = value.span.start;
    let (share, written) = if let Some(text) = value.as_str() {
        let Some(percent) = percentage(text) else {
            report.at(at, format!("`alert_at` {text:?} is not {WRITE}"));
            return None;
        };
        (percent / 100.0, format!("{text:?}"))
    } else if let Some(number) = value.as_float() {
        (number, number.to_string())
    } else if let Some(number) = value.as_integer() {
        // An integer is a share too (`1`: the whole limit); 80 most likely meant 80 %.
        if (2..=100).contains(&number) {
            report.at(
                at,
                format!(
                    "`alert_at` {number} is above 1 (did you mean \"{number}%\"?); write {WRITE}"
                ),
            );
            return None;
        }
        (number as f64, number.to_string())
    } else {
        report.at(
            at,
            format!("`alert_at` must be {WRITE}, not {}", kind(value)),
        );
        return None;
    };
    match AlertShare::new(share) {
        Ok(share) => Some(share),
        Err(_) => {
            report.at(
                at,
                format!(
                    "`alert_at` {written} is not above 0 and at most the whole limit; write {WRITE}"
                ),
            );
            None
        }
    }
}

/// The number of a percentage such as `"80%"`, `"82.5 %"`.
fn percentage(text: &str) -> Option<f64> {
    let number = text.trim().strip_suffix('%')?.trim_end();
    let digits = number.chars().all(|c| c.is_ascii_digit() || c == '.');
    let percent: f64 = number
        .parse()
        .ok()
        .filter(|_| digits && !number.is_empty())?;
    percent.is_finite().then_some(percent)
}

#[cfg(test)]
mod tests {
    use super::percentage;

    #[test]
    fn percentages_are_a_number_and_a_percent_sign() {
        assert_eq!(percentage("80%"), Some(80.0));
        assert_eq!(percentage(" 82.5 % "), Some(82.5));
        assert_eq!(percentage("80"), None);
        assert_eq!(percentage("%"), None);
        assert_eq!(percentage("-5%"), None);
        assert_eq!(percentage("1e2%"), None);
        assert_eq!(percentage("eighty%"), None);
    }
}
