//! What a response says about when to come back: `Retry-After` (delta-seconds, or an HTTP-date
//! read against the response's own `Date`), else the `RateLimit` field's `t=` for a policy with
//! nothing left.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::{DATE, RETRY_AFTER};
use sfv::{ListEntry, Parser};

/// Where a server's wait came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HintSource {
    /// `Retry-After`, as delta-seconds or an HTTP-date.
    RetryAfter,
    /// The `RateLimit` field's `t=` of a policy with `r=0`.
    RateLimit,
}

/// The wait a response asks for, and which field said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerHint {
    /// How long from when the response was made.
    pub wait: Duration,
    /// Which field said it.
    pub source: HintSource,
}

/// The wait `headers` ask for: `Retry-After` first, then the `RateLimit` field's largest `t=`
/// among policies with `r=0`; `None` when neither says anything readable.
///
/// `Retry-After` may be delta-seconds (`120`) or an HTTP-date; a date is measured against the
/// response's own `Date` header when it has one, so a client whose clock is off by minutes
/// still waits what the server meant, and against `now` otherwise. A date already past is a
/// wait of zero. Anything unreadable (`Retry-After: soon`, a negative number) is ignored, as if
/// absent.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use http::{HeaderMap, HeaderValue};
/// use tollgate_client::{HintSource, server_wait};
///
/// let mut headers = HeaderMap::new();
/// headers.insert("retry-after", HeaderValue::from_static("30"));
/// let hint = server_wait(&headers, SystemTime::now()).unwrap();
/// assert_eq!((hint.wait, hint.source), (Duration::from_secs(30), HintSource::RetryAfter));
///
/// // A skewed client: the server's clock says 12:00:00, the date is 12:00:20.
/// let mut headers = HeaderMap::new();
/// headers.insert("date", HeaderValue::from_static("Wed, 02 Dec 2026 12:00:00 GMT"));
/// headers.insert("retry-after", HeaderValue::from_static("Wed, 02 Dec 2026 12:00:20 GMT"));
/// let far_off = SystemTime::UNIX_EPOCH; // whatever the client believes
/// assert_eq!(server_wait(&headers, far_off).unwrap().wait, Duration::from_secs(20));
///
/// let mut headers = HeaderMap::new();
/// headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=0;t=7"#));
/// let hint = server_wait(&headers, SystemTime::now()).unwrap();
/// assert_eq!((hint.wait, hint.source), (Duration::from_secs(7), HintSource::RateLimit));
/// ```
pub fn server_wait(headers: &HeaderMap, now: SystemTime) -> Option<ServerHint> {
    if let Some(wait) = retry_after(headers, now) {
        return Some(ServerHint {
            wait,
            source: HintSource::RetryAfter,
        });
    }
    exhausted_for(headers).map(|wait| ServerHint {
        wait,
        source: HintSource::RateLimit,
    })
}

/// The wait the `RateLimit` field announces for policies with nothing left (`r=0`): the
/// largest `t=` among them. `None` when no policy is exhausted or the field is not a valid
/// RFC 8941 list.
///
/// ```
/// use std::time::Duration;
/// use http::{HeaderMap, HeaderValue};
/// use tollgate_client::exhausted_for;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=0;t=3, "daily";r=50;t=9000"#));
/// assert_eq!(exhausted_for(&headers), Some(Duration::from_secs(3)));
/// ```
pub fn exhausted_for(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get_all("ratelimit")
        .iter()
        .filter_map(|value| Parser::new(value.as_bytes()).parse::<sfv::List>().ok())
        .flatten()
        .filter_map(|entry| match entry {
            ListEntry::Item(item) => Some(item.params),
            ListEntry::InnerList(_) => None,
        })
        .filter_map(|params| {
            let integer = |name: &str| {
                params
                    .iter()
                    .find(|(key, _)| key.as_str() == name)
                    .and_then(|(_, value)| value.as_integer())
                    .map(i64::from)
            };
            let (remaining, reset) = (integer("r")?, integer("t")?);
            (remaining == 0 && reset >= 0).then(|| Duration::from_secs(reset.unsigned_abs()))
        })
        .max()
}

/// `Retry-After` as a wait from the response's `Date` (else `now`).
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
        // Beyond u64 seconds is beyond any cap: read as the longest wait there is.
        return Some(Duration::from_secs(text.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(text).ok()?;
    let reference = headers
        .get(DATE)
        .and_then(|date| date.to_str().ok())
        .and_then(|date| httpdate::parse_http_date(date.trim()).ok())
        .unwrap_or(now);
    Some(at.duration_since(reference).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn retry_after_wins_over_ratelimit() {
        let both = headers(&[("retry-after", "5"), ("ratelimit", r#""a";r=0;t=60"#)]);
        let hint = server_wait(&both, SystemTime::now()).expect("a hint");
        assert_eq!(hint.wait, Duration::from_secs(5));
        assert_eq!(hint.source, HintSource::RetryAfter);
    }

    #[test]
    fn a_date_without_a_date_header_is_read_against_now() {
        let now = httpdate::parse_http_date("Wed, 02 Dec 2026 12:00:00 GMT").expect("a date");
        let later = headers(&[("retry-after", "Wed, 02 Dec 2026 12:01:00 GMT")]);
        assert_eq!(retry_after(&later, now), Some(Duration::from_secs(60)));
        let past = headers(&[("retry-after", "Wed, 02 Dec 2026 11:00:00 GMT")]);
        assert_eq!(retry_after(&past, now), Some(Duration::ZERO));
    }

    #[test]
    fn unreadable_values_are_ignored() {
        let now = SystemTime::now();
        for bad in ["soon", "-5", "5.5", "", "1e3"] {
            let value = headers(&[("retry-after", bad)]);
            assert_eq!(server_wait(&value, now), None, "{bad:?}");
        }
        let huge = headers(&[("retry-after", "99999999999999999999999")]);
        assert_eq!(retry_after(&huge, now), Some(Duration::from_secs(u64::MAX)));
        for bad in [
            r#""a";r=1;t=5"#,
            r#""a";t=5"#,
            r#""a";r=0"#,
            "not a list {",
            r#""a";r=0;t=-3"#,
        ] {
            let value = headers(&[("ratelimit", bad)]);
            assert_eq!(exhausted_for(&value), None, "{bad:?}");
        }
    }

    #[test]
    fn the_longest_exhausted_policy_decides() {
        let two = headers(&[
            ("ratelimit", r#""burst";r=0;t=2"#),
            ("ratelimit", r#""hourly";r=0;t=1800, "daily";r=10;t=9"#),
        ]);
        assert_eq!(exhausted_for(&two), Some(Duration::from_secs(1800)));
    }
}
