//! One policy as the caller should see it: the input to every field in this module.

use tollgate_core::{Decision, Quota};

/// One policy that applied to a request: its public name, its quota and this request's
/// decision.
///
/// A request can match several rules; the middleware passes one report per rule it chooses to
/// disclose, in the order to show them (on a refusal, the refusing policy first). The
/// `name` is emitted as an sf-string, escaped as needed, so any text is safe, although rule ids
/// are already restricted to `A-Z a-z 0-9 _ - .`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PolicyReport<'a> {
    /// The policy's public name (the rule id).
    pub name: &'a str,
    /// The rule's quota: gives `q` and `w` in `RateLimit-Policy`.
    pub quota: &'a Quota,
    /// This request's decision under that quota: gives `r` and `t` in `RateLimit`.
    pub decision: &'a Decision,
}

impl<'a> PolicyReport<'a> {
    /// A report of `decision` under `quota`, shown as `name`.
    pub(crate) const fn new(
        name: &'a str,
        quota: &'a Quota,
        decision: &'a Decision,
    ) -> PolicyReport<'a> {
        PolicyReport {
            name,
            quota,
            decision,
        }
    }
}
