//! The status page's quota column: the quota a rule enforces in words, the callers that get
//! quotas of their own, and the rule file's text behind a disclosure for whoever wants it.

use maud::{Markup, html};
use tollgate_core::Quota;
use tollgate_tower::Rule;

use crate::state::State;
use crate::words::{Who, override_in_words, quota_in_words};

/// What the quota column says of one rule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QuotaCell {
    /// The quota requests are counted under: a live entry in the layer's registry, else the
    /// rule's own.
    pub(crate) enforced: Quota,
    /// The rule's own quota in words, when a live entry replaces it.
    declared: Option<String>,
    /// Each override in words: plans by name, then callers as the page shows keys.
    overrides: Vec<String>,
    /// The rule as its file wrote it (`None`: built in code).
    toml: Option<String>,
}

impl QuotaCell {
    /// What `rule`, as `state`'s layer runs it, says in its quota column.
    pub(crate) fn of(state: &State, rule: &Rule) -> QuotaCell {
        let declared = *rule.quota();
        let live = state
            .layer
            .registry()
            .and_then(|registry| registry.get(rule.id()));
        let enforced = live.unwrap_or(declared);
        let keys = state.layer.key_logging();
        let mut plans: Vec<String> = Vec::new();
        let mut callers: Vec<String> = Vec::new();
        if let Some(overrides) = rule.quota_overrides() {
            plans.extend(
                overrides
                    .by_plan()
                    .map(|(name, quota)| override_in_words(Who::Plan(name), quota)),
            );
            callers.extend(
                overrides
                    .by_key()
                    .map(|(key, quota)| override_in_words(Who::Caller(&keys.show(key)), quota)),
            );
        }
        // Entries live in hash maps: sorted, so the page does not reshuffle on each refresh.
        plans.sort();
        callers.sort();
        QuotaCell {
            enforced,
            declared: (enforced != declared).then(|| quota_in_words(&declared)),
            overrides: plans.into_iter().chain(callers).collect(),
            toml: rule.source_toml().map(str::to_owned),
        }
    }

    /// Whether some callers have quotas of their own.
    pub(crate) fn has_overrides(&self) -> bool {
        !self.overrides.is_empty()
    }

    /// The column's content.
    pub(crate) fn render(&self) -> Markup {
        html! {
            span.words { (quota_in_words(&self.enforced)) }
            @if let Some(declared) = &self.declared {
                br; span.muted.declared { "live quota set in code; the rule says " (declared) }
            }
            @if !self.overrides.is_empty() {
                ul.overrides { @for entry in &self.overrides { li { (entry) } } }
            }
            @if let Some(toml) = &self.toml {
                details.toml {
                    summary { "rule file" }
                    pre { code { (toml.trim_end()) } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tollgate_core::Rate;

    #[test]
    fn words_first_then_overrides_then_the_rule_file_behind_a_disclosure() {
        let cell = QuotaCell {
            enforced: Quota::token_bucket(200, Rate::per_second(200)).expect("quota"),
            declared: None,
            overrides: vec!["plan pro: 1,000 a second, fixed window".to_owned()],
            toml: Some("[[rule]]\nid = \"partners\"\nlimit = \"<&>\"\n".to_owned()),
        };
        let html = cell.render().into_string();
        let words = html
            .find("bursts of 200, then 200 a second (token bucket)")
            .expect("words");
        let plan = html.find("<li>plan pro: 1,000").expect("the plan");
        let details = html.find("<details class=\"toml\"><summary>rule file</summary>");
        assert!(
            words < plan && plan < details.expect("a disclosure"),
            "{html}"
        );
        assert!(
            html.contains("limit = &quot;&lt;&amp;&gt;&quot;"),
            "escaped: {html}"
        );
        assert!(!html.contains("live quota"));
    }

    #[test]
    fn a_live_quota_is_said_with_the_one_it_replaces() {
        let cell = QuotaCell {
            enforced: Quota::fixed_window(10, Duration::from_secs(60)).expect("quota"),
            declared: Some("3 an hour, fixed window".to_owned()),
            overrides: Vec::new(),
            toml: None,
        };
        let html = cell.render().into_string();
        assert!(html.contains("10 a minute, fixed window"));
        assert!(html.contains("live quota set in code; the rule says 3 an hour, fixed window"));
        assert!(
            !html.contains("<details"),
            "a rule built in code has no file text"
        );
        assert!(!html.contains("<ul"));
    }
}
