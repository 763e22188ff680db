//! Quotas in words a person reads at a glance: "3 an hour, fixed window", not the rule file's
//! fields. The status page says every quota this way; anything else that shows a quota to a
//! person (a CLI, a log line, a report) can too.
//!
//! ```
//! use std::time::Duration;
//! use tollgate_admin::words::{Who, override_in_words, quota_in_words};
//! use tollgate_core::{Quota, Rate};
//!
//! let reads = Quota::token_bucket(50, Rate::per_second(10))?;
//! assert_eq!(quota_in_words(&reads), "bursts of 50, then 10 a second (token bucket)");
//! let sms = Quota::fixed_window(3, Duration::from_secs(3600))?;
//! assert_eq!(quota_in_words(&sms), "3 an hour, fixed window");
//! let pro = Quota::fixed_window(1000, Duration::from_secs(60))?;
//! assert_eq!(override_in_words(Who::Plan("pro"), &pro), "plan pro: 1,000 a minute, fixed window");
//! # Ok::<(), tollgate_core::QuotaError>(())
//! ```

use std::time::Duration;

use tollgate_core::{Algorithm, Quota};

/// `quota` in words: its numbers and its algorithm's name.
///
/// | algorithm | reads |
/// |---|---|
/// | fixed window | "3 an hour, fixed window", "10 per 15 minutes, fixed window" |
/// | sliding window counter | "about 400 in any day, sliding window counter" |
/// | sliding window log | "10 in any 15 minutes, sliding window log" |
/// | token bucket (and GCRA) | "bursts of 50, then 10 a second (token bucket)"; capacity 1: "30 an hour, no bursts (token bucket)" |
/// | leaky bucket (pacing) | "10 a second, paced, waiting at most 2 s (leaky bucket)" |
/// | concurrency | "2 at once (concurrency)" |
///
/// A rate is said as a whole number a second, minute, hour or day when the quota's interval
/// is exactly that ("3 a second": 333,334 µs each), else as "1 every 7 s".
pub fn quota_in_words(quota: &Quota) -> String {
    let limit = count(quota.limit());
    match (quota.algorithm(), quota.window(), quota.emission_interval()) {
        (Algorithm::FixedWindow, Some(window), _) => {
            format!("{limit} {}, fixed window", per_window(window))
        }
        (Algorithm::SlidingWindowCounter, Some(window), _) => {
            format!(
                "about {limit} in any {}, sliding window counter",
                span(window)
            )
        }
        (Algorithm::SlidingWindowLog, Some(window), _) => {
            format!("{limit} in any {}, sliding window log", span(window))
        }
        (Algorithm::TokenBucket, _, Some(interval)) if quota.limit() == 1 => {
            format!("{}, no bursts (token bucket)", rate(interval))
        }
        (Algorithm::TokenBucket, _, Some(interval)) => {
            format!("bursts of {limit}, then {} (token bucket)", rate(interval))
        }
        (Algorithm::LeakyBucket, _, Some(interval)) => {
            let wait = match quota.max_delay() {
                Some(delay) if !delay.is_zero() => format!("waiting at most {}", short(delay)),
                _ => "never waiting".to_owned(),
            };
            format!("{}, paced, {wait} (leaky bucket)", rate(interval))
        }
        (Algorithm::Concurrency, _, _) => format!("{limit} at once (concurrency)"),
        (algorithm, _, _) => format!("{limit} ({})", algorithm.name().replace('_', " ")),
    }
}

/// Whose quota an override is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who<'a> {
    /// Callers on the plan of this name.
    Plan(&'a str),
    /// The caller with this key, as the page shows keys (a fingerprint unless raw keys are
    /// enabled).
    Caller(&'a str),
}

/// A quota some callers get instead of their rule's, in words: "plan pro: 1,000 a minute,
/// fixed window", "caller 3f9a0c1d2e4b5a69: bursts of 500, then 500 a second (token bucket)".
pub fn override_in_words(who: Who<'_>, quota: &Quota) -> String {
    match who {
        Who::Plan(name) => format!("plan {name}: {}", quota_in_words(quota)),
        Who::Caller(key) => format!("caller {key}: {}", quota_in_words(quota)),
    }
}

/// `n` with thousands separators: "2,000".
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The units a span is said in, longest first: micros, singular name.
const UNITS: [(u64, &str); 6] = [
    (86_400_000_000, "day"),
    (3_600_000_000, "hour"),
    (60_000_000, "minute"),
    (1_000_000, "second"),
    (1_000, "millisecond"),
    (1, "microsecond"),
];

/// `span` in the longest unit it is a whole number of: (how many, the unit's name).
fn whole_units(span: Duration) -> (u64, &'static str) {
    let micros = u64::try_from(span.as_micros()).unwrap_or(u64::MAX);
    UNITS
        .iter()
        .find(|(unit, _)| micros.is_multiple_of(*unit))
        .map_or((micros, "microsecond"), |(unit, name)| {
            (micros / unit, name)
        })
}

/// "day", "15 minutes".
pub(crate) fn span(window: Duration) -> String {
    match whole_units(window) {
        (1, name) => name.to_owned(),
        (n, name) => format!("{} {name}s", count(n)),
    }
}

/// "an hour", "per 15 minutes".
fn per_window(window: Duration) -> String {
    match whole_units(window) {
        (1, "hour") => "an hour".to_owned(),
        (1, name) => format!("a {name}"),
        (n, name) => format!("per {} {name}s", count(n)),
    }
}

/// One unit of cost every `interval`, as a person says it: "10 a second", "30 an hour", or
/// "1 every 7 s" when no second, minute, hour or day holds a whole number of them. Intervals
/// are rounded up to whole µs when a quota is built (3 a second is 333,334 µs), so `n` a unit
/// is the answer when the interval divides the unit (1,000 µs is 1,000 a second), or when that
/// rounding of `n` gives this interval back and no other count's does: 233,334 µs is also
/// 370,285 (or 370,286) a day, which is not what anyone wrote.
fn rate(interval: Duration) -> String {
    let micros = u64::try_from(interval.as_micros())
        .unwrap_or(u64::MAX)
        .max(1);
    for (unit, name) in UNITS[..4].iter().rev() {
        let gives_back = |n: u64| n >= 1 && unit.div_ceil(n) == micros;
        let n = (unit + micros / 2) / micros;
        if unit.is_multiple_of(micros)
            || (gives_back(n) && !gives_back(n - 1) && !gives_back(n + 1))
        {
            let per = if *name == "hour" { "an" } else { "a" };
            return format!("{} {per} {name}", count(n));
        }
    }
    format!("1 every {}", short(interval))
}

/// A span in short units, to three decimals at most: "2 s", "233.334 ms", "1.5 min".
fn short(span: Duration) -> String {
    const SHORT: [(u64, &str); 6] = [
        (86_400_000_000, "d"),
        (3_600_000_000, "h"),
        (60_000_000, "min"),
        (1_000_000, "s"),
        (1_000, "ms"),
        (1, "µs"),
    ];
    let micros = u64::try_from(span.as_micros()).unwrap_or(u64::MAX);
    let (unit, name) = SHORT
        .iter()
        .find(|(unit, _)| micros >= *unit)
        .copied()
        .unwrap_or((1, "µs"));
    // Thousandths of the unit, rounded to nearest.
    let thousandths = (u128::from(micros) * 1000 + u128::from(unit) / 2) / u128::from(unit);
    let (whole, fraction) = (thousandths / 1000, thousandths % 1000);
    if fraction == 0 {
        format!("{whole} {name}")
    } else {
        let fraction = format!("{fraction:03}");
        format!("{whole}.{} {name}", fraction.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_core::Rate;

    const SECOND: Duration = Duration::from_secs(1);
    const MINUTE: Duration = Duration::from_secs(60);
    const HOUR: Duration = Duration::from_secs(3600);
    const DAY: Duration = Duration::from_secs(86_400);

    fn words(quota: Result<Quota, tollgate_core::QuotaError>) -> String {
        quota_in_words(&quota.expect("a valid quota"))
    }

    #[test]
    fn windows_say_the_limit_over_their_length() {
        assert_eq!(
            words(Quota::fixed_window(3, HOUR)),
            "3 an hour, fixed window"
        );
        assert_eq!(
            words(Quota::fixed_window(2000, SECOND)),
            "2,000 a second, fixed window"
        );
        assert_eq!(
            words(Quota::fixed_window(10, 15 * MINUTE)),
            "10 per 15 minutes, fixed window"
        );
        assert_eq!(words(Quota::fixed_window(3, DAY)), "3 a day, fixed window");
        assert_eq!(
            words(Quota::sliding_window_log(10, 15 * MINUTE)),
            "10 in any 15 minutes, sliding window log"
        );
        assert_eq!(
            words(Quota::sliding_window_counter(400, DAY)),
            "about 400 in any day, sliding window counter"
        );
        assert_eq!(
            words(Quota::sliding_window_log(5, Duration::from_millis(1500))),
            "5 in any 1,500 milliseconds, sliding window log"
        );
        assert_eq!(
            words(Quota::fixed_window(5, 90 * MINUTE)),
            "5 per 90 minutes, fixed window"
        );
    }

    #[test]
    fn buckets_say_the_burst_then_the_rate() {
        assert_eq!(
            words(Quota::token_bucket(50, Rate::per_second(10))),
            "bursts of 50, then 10 a second (token bucket)"
        );
        assert_eq!(
            words(Quota::gcra(Rate::per_hour(30), 5)),
            "bursts of 5, then 30 an hour (token bucket)"
        );
        assert_eq!(
            words(Quota::token_bucket(1, Rate::per_hour(30))),
            "30 an hour, no bursts (token bucket)"
        );
        // 1,000 a second is one per 1,000 µs, as is 1,001 a second once rounded: said as what
        // is enforced.
        assert_eq!(
            words(Quota::token_bucket(1000, Rate::per_second(1000))),
            "bursts of 1,000, then 1,000 a second (token bucket)"
        );
        assert_eq!(
            words(Quota::token_bucket(1000, Rate::per_second(1001))),
            "bursts of 1,000, then 1,000 a second (token bucket)"
        );
        // 3 a second is one per 333,334 µs: said as it was written.
        assert_eq!(
            words(Quota::token_bucket(1_000_000, Rate::per_second(3))),
            "bursts of 1,000,000, then 3 a second (token bucket)"
        );
        assert_eq!(
            words(Quota::token_bucket(5, Rate::every(Duration::from_secs(6)))),
            "bursts of 5, then 10 a minute (token bucket)"
        );
        assert_eq!(
            words(Quota::token_bucket(5, Rate::every(Duration::from_secs(7)))),
            "bursts of 5, then 1 every 7 s (token bucket)"
        );
        assert_eq!(
            words(Quota::token_bucket(
                2,
                Rate::per(3, Duration::from_millis(700))
            )),
            "bursts of 2, then 1 every 233.334 ms (token bucket)"
        );
        assert_eq!(
            words(Quota::token_bucket(2, Rate::per_day(1))),
            "bursts of 2, then 1 a day (token bucket)"
        );
        assert_eq!(
            words(Quota::token_bucket(2, Rate::per_day(100_000))),
            "bursts of 2, then 100,000 a day (token bucket)"
        );
    }

    #[test]
    fn pacing_says_its_rate_and_longest_wait() {
        assert_eq!(
            words(Quota::leaky_bucket(Rate::per_second(10), 2 * SECOND)),
            "10 a second, paced, waiting at most 2 s (leaky bucket)"
        );
        assert_eq!(
            words(Quota::leaky_bucket(
                Rate::per_minute(30),
                Duration::from_millis(1500)
            )),
            "30 a minute, paced, waiting at most 1.5 s (leaky bucket)"
        );
        assert_eq!(
            words(Quota::leaky_bucket(Rate::per_second(5), Duration::ZERO)),
            "5 a second, paced, never waiting (leaky bucket)"
        );
    }

    #[test]
    fn concurrency_says_how_many_at_once() {
        assert_eq!(words(Quota::concurrency(2)), "2 at once (concurrency)");
    }

    #[test]
    fn overrides_say_whose_quota_it_is() {
        let pro = Quota::fixed_window(1000, MINUTE).expect("quota");
        assert_eq!(
            override_in_words(Who::Plan("pro"), &pro),
            "plan pro: 1,000 a minute, fixed window"
        );
        let acme = Quota::token_bucket(500, Rate::per_second(500)).expect("quota");
        assert_eq!(
            override_in_words(Who::Caller("3f9a0c1d2e4b5a69"), &acme),
            "caller 3f9a0c1d2e4b5a69: bursts of 500, then 500 a second (token bucket)"
        );
    }

    #[test]
    fn counts_and_spans_read_easily() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(short(Duration::from_secs(90)), "1.5 min");
        assert_eq!(short(Duration::from_micros(1)), "1 µs");
        assert_eq!(short(Duration::from_micros(1_000_500)), "1.001 s");
    }
}
