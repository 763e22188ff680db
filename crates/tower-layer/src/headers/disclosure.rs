//! The policies an allowed response will show, kept until the response exists.

use http::HeaderMap;
use smallvec::SmallVec;
use tollgate_core::{Decision, Quota, RuleId};

use crate::headers::report::PolicyReport;
use crate::headers::style::HeaderStyle;

/// What an allowed response will carry in its rate-limit fields: written straight into the
/// inner service's response headers, so the allowed path builds no header map of its own.
#[derive(Debug, Clone)]
pub(crate) struct Disclosure {
    style: HeaderStyle,
    policies: SmallVec<[(RuleId, Quota, Decision); 3]>,
}

impl Disclosure {
    /// Shows nothing.
    pub(crate) fn nothing() -> Self {
        Disclosure {
            style: HeaderStyle::none(),
            policies: SmallVec::new(),
        }
    }

    /// Will show `shown` (policies, their live quotas and decisions, in order) in `style`.
    pub(crate) fn of<'r>(
        style: HeaderStyle,
        shown: impl IntoIterator<Item = (&'r RuleId, Quota, &'r Decision)>,
    ) -> Self {
        if style.is_none() {
            return Disclosure::nothing();
        }
        let policies = shown
            .into_iter()
            .map(|(rule, quota, decision)| (rule.clone(), quota, *decision))
            .collect();
        Disclosure { style, policies }
    }

    /// The fields as a header map of their own (for refusals, which the layer writes itself).
    pub(crate) fn to_headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        self.write(&mut headers);
        headers
    }

    /// Writes the fields into `headers`.
    pub(crate) fn write(&self, headers: &mut HeaderMap) {
        if self.policies.is_empty() {
            return;
        }
        let reports: SmallVec<[PolicyReport<'_>; 3]> = self
            .policies
            .iter()
            .map(|(rule, quota, decision)| PolicyReport::new(rule.as_str(), quota, decision))
            .collect();
        self.style.insert(headers, &reports);
    }
}
