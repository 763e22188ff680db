//! Where a rule's limit goes on its chart of decisions per minute: the most one caller can be
//! allowed in a minute, when the quota says so — a window of a minute or less, or a rate of at
//! least one a minute. A longer window, a slower rate or a count of requests in flight bounds
//! no single minute the way a line would claim, so it draws none and says why.

use std::time::Duration;

use tollgate_core::{Algorithm, Quota};

use crate::words::{count, span};

const MINUTE: Duration = Duration::from_secs(60);

/// A quota's line on a chart of minutes, or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MinuteLimit {
    /// One caller's most a minute, and the line's label.
    Line { per_minute: f64, label: String },
    /// Why no line is drawn, said to the reader.
    NoLine(String),
}

/// The line `quota` draws on a chart of decisions per minute.
pub(crate) fn minute_limit(quota: &Quota) -> MinuteLimit {
    let per_minute = |period: Duration, limit: u64| {
        limit as f64 * MINUTE.as_micros() as f64 / period.as_micros().max(1) as f64
    };
    let line = |per_minute: f64| {
        let rounded = per_minute.round();
        let about = if (per_minute - rounded).abs() < 1e-9 {
            ""
        } else {
            "about "
        };
        MinuteLimit::Line {
            per_minute,
            label: format!("{about}{} a minute per caller", count(rounded as u64)),
        }
    };
    match (quota.algorithm(), quota.window(), quota.emission_interval()) {
        (Algorithm::Concurrency, _, _) => MinuteLimit::NoLine(
            "No limit line: this limit counts requests in flight at once, not a rate.".to_owned(),
        ),
        (_, Some(window), _) if window <= MINUTE => line(per_minute(window, quota.limit())),
        (_, Some(window), _) => MinuteLimit::NoLine(format!(
            "No limit line: a bar is one minute, and this limit counts over {}.",
            with_article(&span(window))
        )),
        (_, _, Some(interval)) if interval <= MINUTE => line(per_minute(interval, 1)),
        (_, _, Some(_)) => MinuteLimit::NoLine(
            "No limit line: this limit gives back less than one a minute.".to_owned(),
        ),
        _ => MinuteLimit::NoLine("No limit line for this algorithm.".to_owned()),
    }
}

/// "an hour", "a day", "15 minutes".
fn with_article(span: &str) -> String {
    match span {
        "hour" => "an hour".to_owned(),
        one if !one.starts_with(|c: char| c.is_ascii_digit()) => format!("a {one}"),
        many => many.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_core::Rate;

    fn line(quota: Result<Quota, tollgate_core::QuotaError>) -> (f64, String) {
        match minute_limit(&quota.expect("a valid quota")) {
            MinuteLimit::Line { per_minute, label } => (per_minute, label),
            MinuteLimit::NoLine(why) => panic!("no line: {why}"),
        }
    }

    fn none(quota: Result<Quota, tollgate_core::QuotaError>) -> String {
        match minute_limit(&quota.expect("a valid quota")) {
            MinuteLimit::NoLine(why) => why,
            line => panic!("a line: {line:?}"),
        }
    }

    #[test]
    fn a_window_of_a_minute_or_less_is_its_limit_per_minute() {
        assert_eq!(
            line(Quota::fixed_window(2, MINUTE)),
            (2.0, "2 a minute per caller".to_owned())
        );
        assert_eq!(
            line(Quota::sliding_window_log(5, Duration::from_secs(10))),
            (30.0, "30 a minute per caller".to_owned())
        );
        assert_eq!(
            line(Quota::fixed_window(2000, Duration::from_secs(1))),
            (120_000.0, "120,000 a minute per caller".to_owned())
        );
        let (per_minute, label) = line(Quota::fixed_window(1, Duration::from_secs(7)));
        assert!((per_minute - 60.0 / 7.0).abs() < 1e-9);
        assert_eq!(label, "about 9 a minute per caller");
    }

    #[test]
    fn a_rate_of_one_a_minute_or_more_is_its_steady_rate() {
        assert_eq!(
            line(Quota::token_bucket(50, Rate::per_second(10))),
            (600.0, "600 a minute per caller".to_owned())
        );
        assert_eq!(
            line(Quota::leaky_bucket(
                Rate::per_second(10),
                Duration::from_secs(2)
            )),
            (600.0, "600 a minute per caller".to_owned())
        );
        assert_eq!(
            line(Quota::token_bucket(5, Rate::per_minute(1))),
            (1.0, "1 a minute per caller".to_owned())
        );
    }

    #[test]
    fn longer_windows_slower_rates_and_concurrency_draw_no_line() {
        assert_eq!(
            none(Quota::fixed_window(3, Duration::from_secs(3600))),
            "No limit line: a bar is one minute, and this limit counts over an hour."
        );
        assert_eq!(
            none(Quota::sliding_window_log(10, Duration::from_secs(900))),
            "No limit line: a bar is one minute, and this limit counts over 15 minutes."
        );
        assert_eq!(
            none(Quota::sliding_window_counter(
                400,
                Duration::from_secs(86_400)
            )),
            "No limit line: a bar is one minute, and this limit counts over a day."
        );
        assert!(
            none(Quota::token_bucket(5, Rate::per_hour(30))).contains("less than one a minute")
        );
        assert!(none(Quota::concurrency(2)).contains("in flight"));
    }
}
