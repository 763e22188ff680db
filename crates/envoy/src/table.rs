//! The rules in force for Envoy, by domain: which rule a request descriptor matches.

use std::collections::HashMap;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use tollgate_config::{DescriptorMatch, RuleFile};
use tollgate_core::RuleId;
use tollgate_tower::Rule;
use tollgate_tower::headers::HeaderStyle;

use crate::observe::RuleCounters;

/// One rule a descriptor can match.
pub(crate) struct Candidate {
    pub(crate) id: RuleId,
    pub(crate) matcher: DescriptorMatch,
    /// `None`: unlimited.
    pub(crate) rule: Option<Rule>,
    specificity: Vec<u8>,
    pub(crate) counters: RuleCounters,
}

/// A rule file's descriptor rules, by domain, and the header style its answers use.
#[derive(Default)]
pub(crate) struct DescriptorTable {
    domains: HashMap<String, Vec<Candidate>>,
    pub(crate) style: HeaderStyle,
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
        let mut best: Option<&Candidate> = None;
        for candidate in self.domains.get(domain)? {
            if !candidate.matcher.matches(pairs()) {
                continue;
            }
            if best.is_none_or(|best| candidate.specificity > best.specificity) {
                best = Some(candidate);
            }
        }
        best
    }
}
