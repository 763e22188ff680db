//! The mark a flag rule leaves on a request it would have refused.

use http::request::Parts;
use tollgate_core::{Decision, RuleId};

/// The rules that would have refused this request but are configured to flag it instead
/// ([`OnRefusal::Flag`](crate::OnRefusal::Flag)). The layer inserts it as a request
/// extension, so downstream code can, say, put a new account into review:
///
/// ```
/// use tollgate_tower::Flagged;
///
/// fn needs_review(request: &http::Request<()>) -> bool {
///     request.extensions().get::<Flagged>().is_some_and(|flags| !flags.is_empty())
/// }
/// # assert!(!needs_review(&http::Request::new(())));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Flagged {
    flags: Vec<(RuleId, Decision)>,
}

impl Flagged {
    /// The flagging rules and their decisions, in rule order.
    pub fn iter(&self) -> impl Iterator<Item = (&RuleId, &Decision)> {
        self.flags.iter().map(|(rule, decision)| (rule, decision))
    }

    /// Whether no rule flagged the request.
    pub fn is_empty(&self) -> bool {
        self.flags.is_empty()
    }

    /// Whether `rule` flagged the request.
    pub fn contains(&self, rule: &RuleId) -> bool {
        self.flags.iter().any(|(flagged, _)| flagged == rule)
    }

    pub(crate) fn add(request: &mut Parts, rule: RuleId, decision: Decision) {
        match request.extensions.get_mut::<Flagged>() {
            Some(flagged) => flagged.flags.push((rule, decision)),
            None => {
                request.extensions.insert(Flagged {
                    flags: vec![(rule, decision)],
                });
            }
        }
    }
}
