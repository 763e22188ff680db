//! Where a rule applies at an Envoy or Istio edge: a domain and one descriptor, as Envoy's rate
//! limit filter sends them to a rate limit service (RLS).
//!
//! ```toml
//! [[rule]]
//! id = "edge-per-address"
//! envoy = { domain = "edge", descriptor = [{ key = "remote_address" }] }   # each address its own count
//! algorithm = "fixed_window"
//! limit = 20
//! window = "1m"
//!
//! [[rule]]
//! id = "login-per-user"
//! envoy = { domain = "edge", descriptor = [{ key = "path", value = "/login" }, { key = "user" }] }
//! algorithm = "sliding_window_counter"
//! limit = 5
//! window = "1m"
//!
//! [[rule]]
//! id = "internal-callers"
//! envoy = { domain = "edge", descriptor = [{ key = "client", value = "internal-*" }], unlimited = true }
//! ```
//!
//! An entry is an exact `key` and `value`, a `key` with any value (each value its own count) or
//! a value pattern ending in `*` (a prefix). A request descriptor of n entries matches the rules
//! of n entries whose keys are its keys, in order, and whose values match; where several match,
//! the most specific wins, compared entry by entry from the first (an exact value over a prefix
//! over any value). The values of the entries that are not exact are the caller's key: through
//! the rule's `key` when it has one (`key = { peer_ip = { ipv6_prefix = 48 } }` groups the
//! address as that extractor groups a request's), else each as it is, but for an entry whose key
//! is `remote_address` (or that says `address = true`), grouped as the HTTP layer's `client_ip`
//! groups addresses (IPv4 alone, IPv6 by /64), so one rule counts a caller alike through Envoy
//! and in-process.
//!
//! A rule with `envoy` and no `match` applies to Envoy's requests only; with both, to both, in
//! one count. `unlimited = true` matches and never limits (a rule with only `id` and `envoy`);
//! `replaces = ["<id>"]` drops those rules from a request this rule applies to (a shadow rule's
//! drops nothing); a rule replacing itself, or one that replaces it in turn, is a mistake.

use std::sync::Arc;

use toml_span::Value;

use super::error::Report;
use super::fields::{Fields, boolean, one_or_many, string};
use tollgate_core::RuleId;
use tollgate_tower::key::{KeyBuilder, KeyExtractor, KeyValueError, PeerIp};

/// The fields of `envoy = { ... }`.
const ENVOY_FIELDS: &[&str] = &["domain", "descriptor", "unlimited", "replaces"];

/// The fields of one descriptor entry.
const ENTRY_FIELDS: &[&str] = &["key", "value", "address"];

/// The most entries a rule's descriptor may have (the service refuses longer request
/// descriptors too: none could match).
pub const MAX_DESCRIPTOR_ENTRIES: usize = 16;

/// The entry key whose values are client addresses unless the entry says otherwise: what
/// Envoy's `remote_address` action sends.
const REMOTE_ADDRESS: &str = "remote_address";

/// A rule's place at an Envoy edge: the domain, the descriptor it matches, and whether it
/// limits at all.
///
/// ```
/// use tollgate_config::{Extractors, RuleFile, ValueMatch};
///
/// let text = r#"
/// [[rule]]
/// id = "per-address"
/// envoy = { domain = "edge", descriptor = [{ key = "remote_address" }] }
/// algorithm = "fixed_window"
/// limit = 20
/// window = "1m"
/// "#;
/// let file = RuleFile::parse("rules.toml", text, &Extractors::new())?;
/// let rule = file.descriptor_rules().next().expect("one descriptor rule");
/// assert_eq!(rule.matcher().domain(), "edge");
/// assert_eq!(rule.matcher().entries()[0].value(), &ValueMatch::Any);
/// assert!(rule.matcher().entries()[0].is_address());
/// assert!(file.rules().is_empty()); // no `match`: Envoy's requests only
/// # Ok::<(), tollgate_config::ConfigErrors>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptorMatch {
    domain: String,
    entries: Vec<EntryMatch>,
    unlimited: bool,
    replaces: Vec<RuleId>,
}

impl DescriptorMatch {
    /// The domain Envoy names in its request (its filter's `domain`).
    #[must_use]
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The entries, in order.
    #[must_use]
    pub fn entries(&self) -> &[EntryMatch] {
        &self.entries
    }

    /// Whether the rule matches and never limits (`unlimited = true`).
    #[must_use]
    pub fn is_unlimited(&self) -> bool {
        self.unlimited
    }

    /// The rules this one drops from a request it applies to (`replaces`).
    #[must_use]
    pub fn replaces(&self) -> &[RuleId] {
        &self.replaces
    }

    /// Whether a request descriptor of `entries` (key, value) matches.
    #[must_use]
    pub fn matches<'e>(&self, entries: impl ExactSizeIterator<Item = (&'e str, &'e str)>) -> bool {
        entries.len() == self.entries.len()
            && self
                .entries
                .iter()
                .zip(entries)
                .all(|(own, (key, value))| own.key == key && own.value.matches(value))
    }

    /// How specific the match is, entry by entry from the first: compare two with `Ord`, the
    /// greater wins.
    #[must_use]
    pub fn specificity(&self) -> Vec<u8> {
        self.entries
            .iter()
            .map(|entry| entry.value.specificity())
            .collect()
    }

    /// The values of `entries` (a request descriptor this matches) that name the caller: those
    /// of the entries that are not an exact value, in order.
    pub fn key_values<'e>(
        &self,
        entries: impl Iterator<Item = &'e str>,
    ) -> impl Iterator<Item = &'e str> {
        self.entries
            .iter()
            .zip(entries)
            .filter(|(own, _)| !matches!(own.value, ValueMatch::Exact(_)))
            .map(|(_, value)| value)
    }

    /// Who the rule counts when it names no `key`: its caller-naming values, addresses grouped.
    pub(crate) fn own_key(&self) -> DescriptorKey {
        DescriptorKey {
            addresses: self
                .entries
                .iter()
                .filter(|entry| !matches!(entry.value, ValueMatch::Exact(_)))
                .map(|entry| entry.address)
                .collect(),
        }
    }
}

/// One entry of a rule's descriptor: a key, what its value may be, and whether the value is a
/// client address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryMatch {
    key: String,
    value: ValueMatch,
    address: bool,
}

impl EntryMatch {
    /// The entry's key (Envoy's descriptor key: `remote_address`, `generic_key`, a header's
    /// descriptor key, ...).
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// What the entry's value may be.
    #[must_use]
    pub fn value(&self) -> &ValueMatch {
        &self.value
    }

    /// Whether a value is a client address, grouped like the HTTP layer's `client_ip`.
    #[must_use]
    pub fn is_address(&self) -> bool {
        self.address
    }
}

/// What a descriptor entry's value may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueMatch {
    /// Any value, each its own count (`{ key = "remote_address" }`).
    Any,
    /// A value starting with this text (`value = "internal-*"`).
    Prefix(String),
    /// Exactly this value.
    Exact(String),
}

impl ValueMatch {
    /// Whether `value` matches.
    ///
    /// ```
    /// use tollgate_config::ValueMatch;
    /// assert!(ValueMatch::Prefix("internal-".into()).matches("internal-billing"));
    /// assert!(!ValueMatch::Exact("/login".into()).matches("/login/"));
    /// assert!(ValueMatch::Any.matches(""));
    /// ```
    #[must_use]
    pub fn matches(&self, value: &str) -> bool {
        match self {
            ValueMatch::Any => true,
            ValueMatch::Prefix(prefix) => value.starts_with(prefix.as_str()),
            ValueMatch::Exact(exact) => value == exact,
        }
    }

    /// An exact value (2) over a prefix (1) over any value (0).
    fn specificity(&self) -> u8 {
        match self {
            ValueMatch::Any => 0,
            ValueMatch::Prefix(_) => 1,
            ValueMatch::Exact(_) => 2,
        }
    }
}

/// The key of a descriptor rule that names none: one part per caller-naming value, an address
/// grouped as [`PeerIp`]'s default groups a request's (so it equals the HTTP layer's
/// `client_ip` / `peer_ip` key of the same address). It reads nothing from an HTTP request.
#[derive(Debug, Clone)]
pub(crate) struct DescriptorKey {
    addresses: Vec<bool>,
}

impl KeyExtractor for DescriptorKey {
    fn extract(&self, _request: &http::request::Parts, _key: &mut KeyBuilder) -> bool {
        false
    }

    fn key_from_values(
        &self,
        values: &mut dyn Iterator<Item = &str>,
        key: &mut KeyBuilder,
    ) -> Result<(), KeyValueError> {
        for address in &self.addresses {
            if *address {
                PeerIp::new().key_from_values(values, key)?;
            } else {
                let value = values
                    .next()
                    .ok_or(KeyValueError::Missing("a descriptor value"))?;
                key.part(value);
            }
        }
        Ok(())
    }
}

/// `envoy = { domain = "...", descriptor = [ ... ], unlimited, replaces }`.
pub(crate) fn descriptor_match(
    value: &Value<'_>,
    report: &mut Report<'_>,
) -> Option<DescriptorMatch> {
    let fields = Fields::of(value, "`envoy`", ENVOY_FIELDS, report)?;
    let at = value.span.start;
    let domain = fields
        .required("domain", "`envoy`", at, report)
        .and_then(|domain| {
            let text = string(domain, "`domain`", report)?;
            if text.is_empty() {
                report.at(domain.span.start, "`domain` is empty: name the domain Envoy's rate limit filter sends (its `domain` field)");
                return None;
            }
            Some(text.to_owned())
        });
    let entries = fields
        .required("descriptor", "`envoy`", at, report)
        .and_then(|list| entries(list, report));
    let unlimited = match fields.get("unlimited") {
        Some(flag) => boolean(flag, "`unlimited`", report),
        None => Some(false),
    };
    let replaces = match fields.get("replaces") {
        Some(list) => replaces(list, report),
        None => Some(Vec::new()),
    };
    fields.finish("`envoy`", report);
    Some(DescriptorMatch {
        domain: domain?,
        entries: entries?,
        unlimited: unlimited?,
        replaces: replaces?,
    })
}

/// Whether the rule table `value` is an unlimited descriptor rule (`envoy.unlimited = true`).
pub(crate) fn is_unlimited(value: &Value<'_>) -> bool {
    value
        .as_table()
        .and_then(|table| table.get("envoy"))
        .and_then(Value::as_table)
        .and_then(|envoy| envoy.get("unlimited"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// `descriptor = [{ key = "remote_address" }, { key = "path", value = "/login" }]`.
fn entries(list: &Value<'_>, report: &mut Report<'_>) -> Option<Vec<EntryMatch>> {
    let Some(items) = list.as_array() else {
        report.at(
            list.span.start,
            "`descriptor` is a list of entries such as [{ key = \"remote_address\" }]",
        );
        return None;
    };
    if items.is_empty() {
        report.at(list.span.start, "`descriptor` has no entries: Envoy never sends an empty descriptor, so the rule would never apply");
        return None;
    }
    if items.len() > MAX_DESCRIPTOR_ENTRIES {
        report.at(
            list.span.start,
            format!(
                "`descriptor` has {} entries; at most {MAX_DESCRIPTOR_ENTRIES}",
                items.len()
            ),
        );
        return None;
    }
    let read: Vec<Option<EntryMatch>> = items.iter().map(|item| entry(item, report)).collect();
    read.into_iter().collect()
}

/// `{ key = "path", value = "/login" }`, `{ key = "client", value = "internal-*" }`,
/// `{ key = "x-client-ip", address = true }`.
fn entry(item: &Value<'_>, report: &mut Report<'_>) -> Option<EntryMatch> {
    let fields = Fields::of(item, "a descriptor entry", ENTRY_FIELDS, report)?;
    let key = fields
        .required("key", "a descriptor entry", item.span.start, report)
        .and_then(|key| {
            let text = string(key, "`key`", report)?;
            if text.is_empty() {
                report.at(key.span.start, "a descriptor entry's `key` is empty");
                return None;
            }
            Some(text.to_owned())
        });
    let value = match fields.get("value") {
        Some(value) => value_match(value, report),
        None => Some(ValueMatch::Any),
    };
    let address = match fields.get("address") {
        Some(flag) => boolean(flag, "`address`", report),
        None => Some(key.as_deref() == Some(REMOTE_ADDRESS)),
    };
    fields.finish("a descriptor entry", report);
    let (key, value, address) = (key?, value?, address?);
    if address && !matches!(value, ValueMatch::Any) {
        report.at(item.span.start, format!("descriptor entry {key:?} is an address with a `value`: an address entry counts each address, so leave `value` out (or say `address = false`)"));
        return None;
    }
    Some(EntryMatch {
        key,
        value,
        address,
    })
}

/// `"exact"` or `"prefix*"`; a `*` elsewhere is refused.
fn value_match(value: &Value<'_>, report: &mut Report<'_>) -> Option<ValueMatch> {
    let text = string(value, "`value`", report)?;
    let (body, prefix) = match text.strip_suffix('*') {
        Some(body) => (body, true),
        None => (text, false),
    };
    if body.contains('*') {
        report.at(value.span.start, format!("value {text:?} has a `*` before its end; a pattern is a prefix followed by one `*` (\"internal-*\")"));
        return None;
    }
    Some(match (prefix, body.is_empty()) {
        (true, true) => ValueMatch::Any,
        (true, false) => ValueMatch::Prefix(body.to_owned()),
        (false, _) => ValueMatch::Exact(body.to_owned()),
    })
}

/// `replaces = ["other-rule"]`.
fn replaces(list: &Value<'_>, report: &mut Report<'_>) -> Option<Vec<RuleId>> {
    let mut ids = Vec::new();
    let mut clean = true;
    for item in one_or_many(list) {
        match string(item, "a replaced rule's id", report).map(RuleId::new) {
            Some(Ok(id)) => ids.push(id),
            Some(Err(error)) => {
                report.at(item.span.start, format!("`replaces`: {error}"));
                clean = false;
            }
            None => clean = false,
        }
    }
    clean.then_some(ids)
}

/// A rule that matches descriptors and never limits (`envoy = { ..., unlimited = true }`): it
/// counts nothing, so it has no quota and no key.
#[derive(Debug, Clone)]
pub(crate) struct UnlimitedRule {
    pub(crate) id: RuleId,
    pub(crate) matcher: DescriptorMatch,
    /// Its table, as TOML (for write-back).
    pub(crate) source: String,
    /// Its place among the file's `[[rule]]` tables (see `Entry::order`).
    pub(crate) order: usize,
}

/// An unlimited rule's table: only `id` and `envoy`; with where its id is.
pub(crate) fn unlimited_rule(
    value: &Value<'_>,
    order: usize,
    report: &mut Report<'_>,
) -> Option<(UnlimitedRule, usize)> {
    let fields = Fields::of(
        value,
        "an unlimited `[[rule]]` (it counts nothing, so it takes only `id` and `envoy`)",
        &["id", "envoy"],
        report,
    )?;
    let at = value.span.start;
    let id_value = fields.required("id", "a rule", at, report);
    let id = id_value
        .and_then(|id| string(id, "`id`", report))
        .and_then(|text| match RuleId::new(text) {
            Ok(id) => Some(id),
            Err(error) => {
                report.at(
                    id_value.map_or(at, |value| value.span.start),
                    format!("`id` {text:?}: {error}"),
                );
                None
            }
        });
    let matcher = fields
        .get("envoy")
        .and_then(|value| descriptor_match(value, report));
    fields.finish(
        "an unlimited `[[rule]]` (it counts nothing, so it takes only `id` and `envoy`)",
        report,
    );
    let rule = UnlimitedRule {
        id: id?,
        matcher: matcher?,
        source: super::write::table("rule", true, value),
        order,
    };
    Some((rule, id_value.map_or(at, |value| value.span.start)))
}

/// A rule of a file at an Envoy edge ([`RuleFile::descriptor_rules`](crate::RuleFile::descriptor_rules)):
/// its id, the descriptor it matches and, unless it is unlimited, the rule that counts.
#[derive(Debug, Clone, Copy)]
pub struct DescriptorRule<'f> {
    pub(crate) id: &'f RuleId,
    pub(crate) matcher: &'f DescriptorMatch,
    pub(crate) rule: Option<&'f tollgate_tower::Rule>,
}

impl<'f> DescriptorRule<'f> {
    /// The rule's id: the limit's name in Envoy's answer.
    #[must_use]
    pub fn id(&self) -> &'f RuleId {
        self.id
    }

    /// The domain and descriptor it matches.
    #[must_use]
    pub fn matcher(&self) -> &'f DescriptorMatch {
        self.matcher
    }

    /// The rule that counts; `None` for an unlimited rule.
    #[must_use]
    pub fn rule(&self) -> Option<&'f tollgate_tower::Rule> {
        self.rule
    }
}

/// A mistake for each `replaces` entry of `tables` that names no descriptor rule of `ids`, that
/// names its own rule, or that closes a cycle (a rule replaced, through `replaces`, by one it
/// replaces): where all the rules of a cycle apply to a request, each drops the next and none
/// limits.
pub(crate) fn replaced_rules_exist<'i>(
    tables: &[Value<'_>],
    ids: impl Iterator<Item = &'i RuleId>,
    report: &mut Report<'_>,
) {
    let ids: Vec<&str> = ids.map(RuleId::as_str).collect();
    let replaces = |table: &Value<'_>| -> Vec<String> {
        let Some(list) = table
            .as_table()
            .and_then(|table| table.get("envoy")?.as_table()?.get("replaces"))
        else {
            return Vec::new();
        };
        one_or_many(list)
            .into_iter()
            .filter_map(|item| item.as_str().map(str::to_owned))
            .collect()
    };
    // Each rule's id and the ids it replaces, to follow cycles.
    let edges: Vec<(String, Vec<String>)> = tables
        .iter()
        .filter_map(|table| {
            let id = table.as_table()?.get("id")?.as_str()?.to_owned();
            Some((id, replaces(table)))
        })
        .collect();
    // Whether `to` is reached from `from` through `replaces`.
    let reaches = |from: &str, to: &str| {
        let mut seen: Vec<&str> = Vec::new();
        let mut next: Vec<&str> = vec![from];
        while let Some(at) = next.pop() {
            if at == to {
                return true;
            }
            if seen.contains(&at) {
                continue;
            }
            seen.push(at);
            let onward = edges.iter().filter(|(id, _)| id == at);
            next.extend(onward.flat_map(|(_, replaced)| replaced.iter().map(String::as_str)));
        }
        false
    };
    for table in tables {
        let own = table
            .as_table()
            .and_then(|table| table.get("id"))
            .and_then(Value::as_str);
        let Some(list) = table
            .as_table()
            .and_then(|table| table.get("envoy")?.as_table()?.get("replaces"))
        else {
            continue;
        };
        for item in one_or_many(list) {
            let Some(id) = item.as_str() else { continue };
            if !ids.contains(&id) {
                report.at(
                    item.span.start,
                    format!("`replaces` names {id:?}, which is no rule with `envoy` in this file"),
                );
            } else if own == Some(id) {
                report.at(
                    item.span.start,
                    format!("`replaces` names {id:?}, the rule itself: it would drop itself from every request it applies to and never limit"),
                );
            } else if let Some(own) = own
                && reaches(id, own)
            {
                report.at(
                    item.span.start,
                    format!("`replaces` names {id:?}, which replaces {own:?} in turn (through `replaces`): where both apply to a request, each drops the other and neither limits; keep one direction"),
                );
            }
        }
    }
}

/// A mistake at `key` (the rule's `key` field) when that key cannot take the values `matcher`'s
/// descriptor names a caller by — one per entry that is not an exact value: fewer or more than
/// it reads, or a key built by code only. Every request would then be `INVALID_ARGUMENT`, which
/// Envoy lets through by default: the rule would limit nothing. A value of the wrong form (a
/// request's address that is no address) is the request's mistake, not the file's: the values
/// tried are addresses, and a key that refuses one is not judged.
pub(crate) fn key_fits(
    matcher: &DescriptorMatch,
    rule: &tollgate_tower::Rule,
    key: &Value<'_>,
    report: &mut Report<'_>,
) {
    let values = matcher.own_key().addresses.len();
    let tried = vec!["192.0.2.1"; values];
    let why = match rule.key_of_values(&tried) {
        Err(KeyValueError::Missing(_)) => "it reads more values than",
        Err(KeyValueError::TooMany) => "it reads fewer values than",
        Err(KeyValueError::Unsupported) => "it is built by code from HTTP requests and cannot read",
        _ => return,
    };
    report.at(
        key.span.start,
        format!(
            "this `key` cannot name the callers of the rule's `envoy` descriptor: {why} the {values} value(s) of its entries that are not exact (each request would be INVALID_ARGUMENT, which Envoy lets through by default); leave `key` out to count by those values, or match the entries to the key"
        ),
    );
}

/// The key of a descriptor rule with no `key`, shared (one allocation per rule).
pub(crate) fn own_key(matcher: &DescriptorMatch) -> Arc<dyn KeyExtractor> {
    Arc::new(matcher.own_key())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_tower::key::key_of_values;

    fn matcher(entries: &[(&str, ValueMatch, bool)]) -> DescriptorMatch {
        DescriptorMatch {
            domain: "edge".into(),
            entries: entries
                .iter()
                .map(|(key, value, address)| EntryMatch {
                    key: (*key).into(),
                    value: value.clone(),
                    address: *address,
                })
                .collect(),
            unlimited: false,
            replaces: Vec::new(),
        }
    }

    #[test]
    fn an_address_is_grouped_as_the_http_layer_groups_it() {
        let rule = matcher(&[("remote_address", ValueMatch::Any, true)]);
        let own = rule.own_key();
        let a = key_of_values(&own, &["2001:db8::1"]).unwrap();
        let b = key_of_values(&own, &["2001:db8::ffff"]).unwrap();
        assert_eq!(a, b, "one /64");
        assert_eq!(a, key_of_values(&PeerIp::new(), &["2001:db8::1"]).unwrap());
        assert!(key_of_values(&own, &["not an address"]).is_err());
    }

    #[test]
    fn exact_entries_are_not_part_of_the_key() {
        let rule = matcher(&[
            ("path", ValueMatch::Exact("/login".into()), false),
            ("user", ValueMatch::Any, false),
        ]);
        let values: Vec<&str> = rule.key_values(["/login", "alice"].into_iter()).collect();
        assert_eq!(values, ["alice"]);
        assert!(rule.matches([("path", "/login"), ("user", "bob")].into_iter()));
        assert!(!rule.matches([("path", "/login")].into_iter()));
        assert!(!rule.matches([("user", "bob"), ("path", "/login")].into_iter()));
    }

    #[test]
    fn exact_beats_prefix_beats_any_from_the_first_entry() {
        let exact = matcher(&[
            ("a", ValueMatch::Exact("x".into()), false),
            ("b", ValueMatch::Any, false),
        ]);
        let prefix = matcher(&[
            ("a", ValueMatch::Prefix("x".into()), false),
            ("b", ValueMatch::Exact("y".into()), false),
        ]);
        let any = matcher(&[
            ("a", ValueMatch::Any, false),
            ("b", ValueMatch::Exact("y".into()), false),
        ]);
        assert!(exact.specificity() > prefix.specificity());
        assert!(prefix.specificity() > any.specificity());
    }
}
