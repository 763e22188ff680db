//! Which rate-limit fields a response carries: the IETF pair, the legacy trio, both or none.

use http::HeaderMap;
use tollgate_core::{Decision, Quota};

use crate::headers::ietf::insert_rate_limit_fields;
use crate::headers::legacy::insert_legacy_fields;
use crate::headers::report::PolicyReport;

/// Which rate-limit fields to send. The default sends the IETF `RateLimit` and
/// `RateLimit-Policy` fields only; the legacy `X-RateLimit-*` fields are off unless asked for.
///
/// `Retry-After` is not governed by this: a refusal that a retry can cure always carries it,
/// because HTTP clients and proxies rely on it: the decision's wait in whole seconds, rounded
/// up ([`Decision::retry_after_secs`](tollgate_core::Decision::retry_after_secs)).
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{Decision, Quota};
/// use tollgate_tower::headers::HeaderStyle;
///
/// let quota = Quota::fixed_window(100, Duration::from_secs(60))?;
/// let decision = Decision::allowed(100, 99, Duration::from_secs(60));
///
/// let headers = HeaderStyle::default().with_legacy(true).fields([("burst", &quota, &decision)]);
/// assert_eq!(headers["ratelimit"], r#""burst";r=99;t=60"#);
/// assert_eq!(headers["x-ratelimit-remaining"], "99");
///
/// assert!(HeaderStyle::none().fields([("burst", &quota, &decision)]).is_empty());
/// # Ok::<(), tollgate_core::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeaderStyle {
    ietf: bool,
    legacy: bool,
}

impl Default for HeaderStyle {
    /// IETF fields on, legacy fields off.
    fn default() -> HeaderStyle {
        HeaderStyle {
            ietf: true,
            legacy: false,
        }
    }
}

impl HeaderStyle {
    /// No rate-limit fields at all (for services that disclose nothing about their limits).
    pub const fn none() -> HeaderStyle {
        HeaderStyle {
            ietf: false,
            legacy: false,
        }
    }

    /// Whether to send `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`,
    /// for the first policy only (default: no).
    #[must_use]
    pub const fn with_legacy(mut self, on: bool) -> HeaderStyle {
        self.legacy = on;
        self
    }

    /// Whether the IETF fields are sent.
    pub const fn ietf(&self) -> bool {
        self.ietf
    }

    /// Whether the legacy fields are sent.
    pub const fn legacy(&self) -> bool {
        self.legacy
    }

    /// Whether any field is sent at all (lets the middleware skip gathering reports).
    pub const fn is_none(&self) -> bool {
        !self.ietf && !self.legacy
    }

    /// The chosen fields for `policies` — each a policy name, the quota it was counted under
    /// and this request's decision, in the order they should be listed — for a response the
    /// layer does not write itself (a typed limit's, a custom handler's). An empty list gives
    /// no field.
    pub fn fields<'a>(
        self,
        policies: impl IntoIterator<Item = (&'a str, &'a Quota, &'a Decision)>,
    ) -> HeaderMap {
        let reports: Vec<PolicyReport<'a>> = policies
            .into_iter()
            .map(|(name, quota, decision)| PolicyReport::new(name, quota, decision))
            .collect();
        let mut headers = HeaderMap::new();
        self.insert(&mut headers, &reports);
        headers
    }

    /// Sets the chosen fields in `headers` for `policies` (in the order given), replacing any
    /// values already there. An empty list sets nothing.
    pub(crate) fn insert(self, headers: &mut HeaderMap, policies: &[PolicyReport<'_>]) {
        if self.ietf {
            insert_rate_limit_fields(headers, policies);
        }
        if self.legacy {
            insert_legacy_fields(headers, policies);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tollgate_core::{Decision, Quota};

    use super::*;
    use crate::headers::{
        ietf::{RATELIMIT, RATELIMIT_POLICY},
        legacy::{X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET},
    };

    fn names(style: HeaderStyle) -> Vec<String> {
        let quota = Quota::fixed_window(10, Duration::from_secs(60)).unwrap();
        let decision = Decision::allowed(10, 3, Duration::from_secs(20));
        let mut headers = HeaderMap::new();
        style.insert(&mut headers, &[PolicyReport::new("p", &quota, &decision)]);
        let mut names: Vec<_> = headers
            .keys()
            .map(|name| name.as_str().to_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn default_is_ietf_only() {
        let style = HeaderStyle::default();
        assert!(style.ietf() && !style.legacy() && !style.is_none());
        assert_eq!(
            names(style),
            [RATELIMIT.as_str(), RATELIMIT_POLICY.as_str()]
        );
    }

    #[test]
    fn legacy_is_added_on_request() {
        assert_eq!(
            names(HeaderStyle::default().with_legacy(true)),
            [
                RATELIMIT.as_str(),
                RATELIMIT_POLICY.as_str(),
                X_RATELIMIT_LIMIT.as_str(),
                X_RATELIMIT_REMAINING.as_str(),
                X_RATELIMIT_RESET.as_str(),
            ]
        );
        assert_eq!(
            names(HeaderStyle::none().with_legacy(true)),
            [
                X_RATELIMIT_LIMIT.as_str(),
                X_RATELIMIT_REMAINING.as_str(),
                X_RATELIMIT_RESET.as_str(),
            ]
        );
    }

    #[test]
    fn none_sends_nothing() {
        assert!(HeaderStyle::none().is_none());
        assert!(names(HeaderStyle::none()).is_empty());
        let ietf_off = HeaderStyle {
            ietf: false,
            ..HeaderStyle::default()
        };
        assert!(names(ietf_off).is_empty());
    }

    #[test]
    fn no_policies_means_no_fields_in_any_style() {
        let mut headers = HeaderMap::new();
        HeaderStyle::default()
            .with_legacy(true)
            .insert(&mut headers, &[]);
        assert!(headers.is_empty());
    }
}
