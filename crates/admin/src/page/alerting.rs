//! The rules alerting near their limit, as the status page lists them: each rule, the highest
//! share of its limit a caller reached, the share it alerts at, and since when.

use maud::{Markup, html};

use crate::views::AlertView;

/// The list for the health panel: "none", or one line per alerting rule.
pub(crate) fn alerting(alerts: &[AlertView]) -> Markup {
    html! {
        @if alerts.is_empty() {
            span.muted { "none" }
        } @else {
            ul.alerting-rules {
                @for alert in alerts {
                    li {
                        code { (alert.rule) } " "
                        span.alerting { (percent(alert.reached)) " of its limit" }
                        " (alerts at " (percent(alert.alert_at)) "), since " (time_of_day(alert.since)) " UTC"
                    }
                }
            }
        }
    }
}

/// `share` (0 to 1) as a percentage to a tenth at most: "80 %", "93.5 %".
fn percent(share: f64) -> String {
    let tenths = (share * 1_000.0).round();
    if tenths % 10.0 == 0.0 {
        format!("{} %", tenths / 10.0)
    } else {
        format!("{:.1} %", tenths / 10.0)
    }
}

/// `secs` since the Unix epoch as the time of day in UTC: "14:03:07".
fn time_of_day(secs: u64) -> String {
    let of_day = secs % 86_400;
    format!(
        "{:02}:{:02}:{:02}",
        of_day / 3_600,
        of_day % 3_600 / 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_times_read_easily() {
        assert_eq!(percent(0.8), "80 %");
        assert_eq!(percent(1.0), "100 %");
        assert_eq!(percent(0.935), "93.5 %");
        assert_eq!(percent(0.8125), "81.3 %");
        assert_eq!(time_of_day(1_800_000_000), "08:00:00");
        assert_eq!(time_of_day(1_800_000_000 + 3_723), "09:02:03");
    }

    #[test]
    fn each_alerting_rule_is_one_line() {
        let none = alerting(&[]).into_string();
        assert!(none.contains("none"), "{none}");
        let alert = AlertView {
            rule: "otp-global".to_owned(),
            alert_at: 0.8,
            reached: 0.935,
            since: 1_800_000_000,
        };
        let listed = alerting(&[alert]).into_string();
        assert!(
            listed.contains("<code>otp-global</code>")
                && listed.contains("93.5 % of its limit")
                && listed.contains("(alerts at 80 %), since 08:00:00 UTC"),
            "{listed}"
        );
    }
}
