//! Changing one rule at runtime (what an admin API does): a rule given as its own small file, a
//! rule's fields patched, a rule taken out of a document.

use super::error::Report;
use super::quota::QUOTA_FIELDS;
use crate::error::ConfigErrors;
use crate::file::{Contents, RuleFile};
use crate::key::Extractors;

/// The policy fields [`patch_rule`] may change besides the quota's ([`QUOTA_FIELDS`]).
pub const POLICY_FIELDS: &[&str] = &["mode", "on_store_failure"];

/// Whether [`patch_rule`] may change the field `name`: a quota field or a policy field.
pub fn is_patchable(name: &str) -> bool {
    QUOTA_FIELDS.contains(&name) || POLICY_FIELDS.contains(&name)
}

/// Reads `text` (named `name` in messages) as a rule file that holds exactly one `[[rule]]`,
/// with id `id`, and nothing else: what `PUT /v1/rules/{id}` accepts. The file's own mistakes
/// first, each at its line and column; then, at line 1, a file that is not that one rule.
///
/// ```
/// use tollgate_config::{Extractors, parse_rule};
///
/// let text = "[[rule]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\nlimit = 50\nwindow = \"1s\"\nkey = \"peer_ip\"\n";
/// let file = parse_rule("request body", text, "reads", &Extractors::new())?;
/// assert_eq!(file.ids().collect::<Vec<_>>(), ["reads"]);
/// assert!(parse_rule("request body", text, "writes", &Extractors::new()).is_err());
/// # Ok::<(), tollgate_config::ConfigErrors>(())
/// ```
pub fn parse_rule(
    name: &str,
    text: &str,
    id: &str,
    extractors: &Extractors,
) -> Result<RuleFile, ConfigErrors> {
    let file = RuleFile::parse(name, text, extractors)?;
    let ids: Vec<&str> = file.ids().collect();
    let contents = &file.contents;
    let problem = if ids.as_slice() != [id] {
        Some(format!(
            "expected exactly one `[[rule]]` with id {id:?}, found {}",
            if ids.is_empty() {
                "none".to_owned()
            } else {
                format!("{ids:?}")
            }
        ))
    } else if !contents.limits.is_empty() || contents.exempt.is_some() || contents.headers.is_some()
    {
        Some("a rule change holds one `[[rule]]` and nothing else (no `[[limit]]`, `[exempt]` or `headers`)".to_owned())
    } else {
        None
    };
    match problem {
        Some(message) => {
            let mut report = Report::new(name, text);
            report.at(0, message);
            Err(report.into_errors())
        }
        None => Ok(file),
    }
}

/// A rule's TOML table (`[[rule]]` and one `key = value` line per field, as
/// [`RuleFile::to_toml`] writes it) with `fields` — `(name, TOML value)` pairs of
/// [`QUOTA_FIELDS`] and [`POLICY_FIELDS`] — put in place of the ones it had. A patch that names the `algorithm`
/// replaces the whole quota: every quota field of the old rule goes. The result is a rule file
/// to check like any other; nothing is checked here.
///
/// ```
/// use tollgate_config::patch_rule;
///
/// let rule = "[[rule]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\nkey = \"peer_ip\"\nlimit = 50\nwindow = \"1s\"\n";
/// let patched = patch_rule(rule, &[("limit".into(), "100".into()), ("mode".into(), "\"shadow\"".into())]);
/// assert!(patched.contains("limit = 100\n") && patched.contains("mode = \"shadow\"\n"));
/// assert!(!patched.contains("limit = 50"));
/// ```
pub fn patch_rule(table: &str, fields: &[(String, String)]) -> String {
    let replaces_quota = fields.iter().any(|(name, _)| name == "algorithm");
    let dropped = |name: &str| {
        fields.iter().any(|(field, _)| field == name)
            || (replaces_quota && QUOTA_FIELDS.contains(&name))
    };
    let mut out = String::with_capacity(table.len() + 64);
    for line in table.lines() {
        let name = line
            .split_once(" = ")
            .map(|(name, _)| name.trim_matches('"'));
        if name.is_some_and(dropped) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    for (name, value) in fields {
        out.push_str(name);
        out.push_str(" = ");
        out.push_str(value);
        out.push('\n');
    }
    out
}

impl RuleFile {
    /// This file without the rule or `[[limit]]` named `id` (the rest unchanged).
    #[must_use]
    pub fn without(&self, id: &str) -> RuleFile {
        let contents = &self.contents;
        RuleFile::of(Contents {
            entries: (contents.entries.iter())
                .filter(|entry| entry.rule.id().as_str() != id)
                .cloned()
                .collect(),
            limits: (contents.limits.iter())
                .filter(|limit| limit.id.as_str() != id)
                .cloned()
                .collect(),
            exempt: contents.exempt.clone(),
            headers: contents.headers.clone(),
            unlimited: (contents.unlimited.iter())
                .filter(|rule| rule.id.as_str() != id)
                .cloned()
                .collect(),
        })
    }

    /// Whether the file holds nothing: no rule, limit, exemption or header style.
    pub fn is_empty(&self) -> bool {
        let contents = &self.contents;
        contents.entries.is_empty()
            && contents.unlimited.is_empty()
            && contents.limits.is_empty()
            && contents.exempt.is_none()
            && contents.headers.is_none()
    }

    /// The TOML table the rule `id` was read from, as [`to_toml`](Self::to_toml) writes it.
    pub fn rule_toml(&self, id: &str) -> Option<&str> {
        self.contents
            .entries
            .iter()
            .find(|entry| entry.rule.id().as_str() == id)
            .and_then(|entry| entry.rule.source_toml())
            .or_else(|| {
                (self.contents.unlimited.iter())
                    .find(|rule| rule.id.as_str() == id)
                    .map(|rule| rule.source.as_str())
            })
    }
}
