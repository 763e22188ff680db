//! The rules in force for Envoy, by domain: which rule a request descriptor (RLS) or a quota
//! bucket (RLQS) matches.

use std::collections::HashMap;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::RateLimit;
use smallvec::SmallVec;
use tollgate_config::{DescriptorMatch, RuleFile};
use tollgate_core::RuleId;
use tollgate_tower::Rule;
use tollgate_tower::headers::HeaderStyle;

use crate::observe::{AnswerCounters, RuleCounters};
use crate::unit::current_limit;

/// One rule a descriptor can match.
pub(crate) struct Candidate {
    pub(crate) id: RuleId,
    pub(crate) matcher: DescriptorMatch,
    /// `None`: unlimited.
    pub(crate) rule: Option<Rule>,
    /// Its quota as Envoy's `current_limit`, made once (`None`: unlimited, or a rule that does
    /// not disclose its limit: shadow, flag, `disclose = false`).
    pub(crate) current_limit: Option<RateLimit>,
    specificity: Vec<u8>,
    pub(crate) counters: RuleCounters,
}

/// A rule file's descriptor rules, by domain, the header style its answers use, and the
/// counters of the answers given by it.
pub(crate) struct DescriptorTable {
    domains: HashMap<String, Vec<Candidate>>,
    pub(crate) style: HeaderStyle,
    pub(crate) answers: AnswerCounters,
}

impl Default for DescriptorTable {
    fn default() -> DescriptorTable {
        DescriptorTable {
            domains: HashMap::new(),
            style: HeaderStyle::default(),
            answers: AnswerCounters::new(),
        }
    }
}

impl DescriptorTable {
    /// The descriptor rules of `file` (its `headers`, else the IETF fields alone).
    pub(crate) fn of(file: &RuleFile) -> DescriptorTable {
        let mut domains: HashMap<String, Vec<Candidate>> = HashMap::new();
        for found in file.descriptor_rules() {
            let matcher = found.matcher().clone();
            let candidate = Candidate {
                id: found.id().clone(),
                specificity: matcher.specificity(),
                counters: RuleCounters::new(found.id()),
                current_limit: found
                    .rule()
                    .filter(|rule| rule.is_disclosed())
                    .map(|rule| current_limit(found.id().as_str(), rule.quota())),
                rule: found.rule().cloned(),
                matcher,
            };
            domains
                .entry(candidate.matcher.domain().to_owned())
                .or_default()
                .push(candidate);
        }
        DescriptorTable {
            domains,
            style: file.rules().header_style(HeaderStyle::default()),
            answers: AnswerCounters::new(),
        }
    }

    /// Whether any rule names `domain`.
    pub(crate) fn knows(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    /// The rule a descriptor of `entries` in `domain` matches: of those that match, the most
    /// specific (entry by entry from the first: an exact value over a prefix over any value),
    /// the first written among equals.
    pub(crate) fn resolve(&self, domain: &str, entries: &[Entry]) -> Option<&Candidate> {
        let pairs = || {
            entries
                .iter()
                .map(|entry| (entry.key.as_str(), entry.value.as_str()))
        };
        self.most_specific(domain, |matcher| matcher.matches(pairs()))
    }

    /// The rule a quota bucket of `bucket` (key → value, in no order) in `domain` matches: the
    /// rules whose entries have the bucket's keys, the bucket's values read in the rule's entry
    /// order; of those that match, the most specific, as for [`resolve`](Self::resolve).
    pub(crate) fn resolve_bucket(
        &self,
        domain: &str,
        bucket: &HashMap<String, String>,
    ) -> Option<&Candidate> {
        self.most_specific(domain, |matcher| {
            in_rule_order(matcher, bucket).is_some_and(|pairs| matcher.matches(pairs.into_iter()))
        })
    }

    /// Of the rules of `domain` that `matches`, the most specific, the first written among
    /// equals.
    fn most_specific(
        &self,
        domain: &str,
        matches: impl Fn(&DescriptorMatch) -> bool,
    ) -> Option<&Candidate> {
        let mut best: Option<&Candidate> = None;
        for candidate in self.domains.get(domain)? {
            if !matches(&candidate.matcher) {
                continue;
            }
            if best.is_none_or(|best| candidate.specificity > best.specificity) {
                best = Some(candidate);
            }
        }
        best
    }
}

/// `bucket`'s (key, value) pairs in the order of `matcher`'s entries; `None` unless the bucket
/// has exactly the rule's keys (a rule naming one key twice matches no bucket: a map holds a
/// key once).
pub(crate) fn in_rule_order<'b>(
    matcher: &DescriptorMatch,
    bucket: &'b HashMap<String, String>,
) -> Option<SmallVec<[(&'b str, &'b str); 4]>> {
    let entries = matcher.entries();
    if entries.len() != bucket.len() {
        return None;
    }
    let repeats = |at: usize| entries[..at].iter().any(|e| e.key() == entries[at].key());
    if (0..entries.len()).any(repeats) {
        return None;
    }
    entries
        .iter()
        .map(|entry| {
            bucket
                .get_key_value(entry.key())
                .map(|(key, value)| (key.as_str(), value.as_str()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_config::Extractors;

    fn table(text: &str) -> DescriptorTable {
        let file = RuleFile::parse("rules.toml", text, &Extractors::new())
            .unwrap_or_else(|errors| panic!("{errors}"));
        DescriptorTable::of(&file)
    }

    fn bucket(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect()
    }

    fn matched(table: &DescriptorTable, pairs: &[(&str, &str)]) -> Option<String> {
        let found = table.resolve_bucket("edge", &bucket(pairs));
        found.map(|candidate| candidate.id.as_str().to_owned())
    }

    #[test]
    fn a_bucket_matches_a_rule_with_its_keys_in_any_order_the_most_specific_winning() {
        let rule = |id: &str, entries: &str| {
            format!(
                "[[rule]]\nid = \"{id}\"\nenvoy = {{ domain = \"edge\", descriptor = [{entries}] }}\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\n"
            )
        };
        let text = rule("per-user", "{ key = \"path\" }, { key = \"user\" }")
            + &rule(
                "login",
                "{ key = \"path\", value = \"/login\" }, { key = \"user\" }",
            )
            + &rule("twice", "{ key = \"a\" }, { key = \"a\" }");
        let table = table(&text);
        let login = [("user", "alice"), ("path", "/login")];
        assert_eq!(matched(&table, &login).as_deref(), Some("login"));
        let feed = [("path", "/feed"), ("user", "alice")];
        assert_eq!(matched(&table, &feed).as_deref(), Some("per-user"));
        let map = bucket(&login);
        let pairs = in_rule_order(&table.domains["edge"][1].matcher, &map);
        assert_eq!(
            pairs.as_deref(),
            Some(&[("path", "/login"), ("user", "alice")][..])
        );
        // Other keys, more keys or fewer: no rule.
        assert_eq!(matched(&table, &[("user", "alice")]), None);
        assert_eq!(
            matched(&table, &[("path", "/"), ("user", "a"), ("x", "y")]),
            None
        );
        // A rule naming a key twice matches no map, whatever its other key.
        assert_eq!(matched(&table, &[("a", "1"), ("b", "2")]), None);
        assert_eq!(
            table.resolve_bucket("other", &bucket(&login)).map(|_| ()),
            None
        );
    }
}
