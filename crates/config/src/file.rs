//! A rule file, read and checked as a whole: the rules it defines, where each applies, the
//! `[[limit]]`s, `[exempt]` and `headers` beside them, and how two files merge.

use std::collections::HashSet;

use tollgate_tower::RuleSet;

use crate::descriptor::{DescriptorMatch, DescriptorRule, UnlimitedRule};
use crate::error::{self, ConfigError, ConfigErrors, Report};
use crate::fields::Fields;
use crate::key::Extractors;
use crate::limit::LimitEntry;
use crate::rule::Applies;
use crate::{descriptor, limit, rule, set, write};

/// A rule file, read and checked: the rules it defines.
///
/// ```
/// use tollgate_config::{Extractors, RuleFile};
///
/// let text = r#"
/// [[rule]]
/// id = "reads"
/// algorithm = "token_bucket"
/// capacity = 50
/// refill = { amount = 10, per = "1s" }
/// key = "peer_ip"
/// "#;
/// let file = RuleFile::parse("rules.toml", text, &Extractors::new())?;
/// assert_eq!(file.rules().rules().count(), 1);
/// # Ok::<(), tollgate_config::ConfigErrors>(())
/// ```
#[derive(Debug, Clone)]
pub struct RuleFile {
    pub(crate) contents: Contents,
    rules: RuleSet,
}

/// What a file says, before it becomes a [`RuleSet`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Contents {
    pub(crate) entries: Vec<Entry>,
    pub(crate) limits: Vec<LimitEntry>,
    /// `[exempt]`, and its TOML.
    pub(crate) exempt: Option<(set::Exempt, String)>,
    /// `headers`, and its TOML.
    pub(crate) headers: Option<(tollgate_tower::headers::HeaderStyle, String)>,
    /// The rules that match Envoy's descriptors and never limit.
    pub(crate) unlimited: Vec<UnlimitedRule>,
}

/// One rule of a file and where it applies.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) rule: tollgate_tower::Rule,
    pub(crate) applies: Applies,
    /// Where it applies at an Envoy edge.
    pub(crate) envoy: Option<DescriptorMatch>,
    /// What it asks of the layer's store, and where.
    pub(crate) asks: Asks,
    /// Its place among the file's `[[rule]]` tables, unlimited ones included: which of two
    /// equally specific descriptor rules was written first.
    pub(crate) order: usize,
}

/// Where each of a rule's fleet modes (what it asks of the layer's store,
/// `Rule::fleet_modes`) is written: what a layer whose store cannot do it is told, at that
/// field.
#[derive(Debug, Clone)]
pub(crate) struct Asks {
    /// Each fleet-mode field written (`counting` or `split`, `sub_buckets`, `cache_blocked`,
    /// `store`, `replica_ack`) and where its value is.
    pub(crate) written: Vec<(&'static str, error::Position)>,
    /// Where the rule's table is (for a mistake no field is written for).
    pub(crate) rule_at: error::Position,
}

impl Asks {
    /// What the rule's table `value` asks; positions from `report`.
    fn of(value: &toml_span::Value<'_>, report: &mut Report<'_>) -> Asks {
        let table = value.as_table();
        let field = |name: &str| table.and_then(|table| table.get(name));
        let rule_at = report.position(value.span.start);
        let mut written: Vec<(&'static str, usize)> = [
            "counting",
            "split",
            "sub_buckets",
            "cache_blocked",
            "store",
            "replica_ack",
        ]
        .into_iter()
        .filter_map(|name| Some((name, field(name)?.span.start)))
        .collect();
        // Positions are cheapest asked for in file order.
        written.sort_by_key(|(_, offset)| *offset);
        let written = written
            .into_iter()
            .map(|(name, offset)| (name, report.position(offset)))
            .collect();
        Asks { written, rule_at }
    }

    /// The field `unsupported` is about, and where it is written.
    fn field(&self, unsupported: &tollgate_core::Unsupported) -> (&'static str, &error::Position) {
        let fields: &[&str] = if unsupported.is_unknown_store() {
            &["store"]
        } else if unsupported.is_counting() {
            &["counting", "split"]
        } else if unsupported.is_sub_buckets() {
            &["sub_buckets"]
        } else if unsupported.is_cache_blocked() {
            &["cache_blocked"]
        } else if unsupported.is_replica_ack() {
            &["replica_ack"]
        } else {
            &[]
        };
        self.written
            .iter()
            .find(|(name, _)| fields.contains(name))
            .map_or(("the rule", &self.rule_at), |(name, at)| (*name, at))
    }
}

impl RuleFile {
    /// Reads `text` (named `file` in messages), resolving named keys through `extractors`.
    /// Never panics, whatever the text.
    pub fn parse(
        file: &str,
        text: &str,
        extractors: &Extractors,
    ) -> Result<RuleFile, ConfigErrors> {
        let mut report = Report::new(file, text);
        let read = match toml_span::parse(text) {
            Ok(document) => entries(&document, extractors, &mut report),
            Err(error) => {
                report.at(error.span.start, syntax(&error.kind));
                None
            }
        };
        match read {
            Some(contents) if report.is_clean() => Ok(RuleFile::of(contents)),
            _ => Err(report.into_errors()),
        }
    }

    pub(crate) fn of(contents: Contents) -> RuleFile {
        let mut rules = contents.entries.iter().fold(RuleSet::new(), |set, entry| {
            add(set, entry.rule.clone(), &entry.applies)
        });
        if let Some((exempt, _)) = &contents.exempt {
            // Checked when read; added in one pass (no copy of the set per path).
            let patterns = exempt
                .paths
                .iter()
                .filter_map(|(path, _)| tollgate_tower::PathPattern::new(path).ok());
            rules = rules.exempt_patterns(patterns);
            for network in &exempt.networks {
                rules = rules.exempt_network(*network);
            }
        }
        if let Some((style, _)) = &contents.headers {
            rules = rules.headers(*style);
        }
        RuleFile { contents, rules }
    }

    /// The quotas the file's `[[limit]]` tables set, by id: typed limits' live quotas, put in
    /// the layer's [`QuotaRegistry`](tollgate_tower::QuotaRegistry) by [`RuleWatcher`](crate::RuleWatcher).
    pub fn limits(&self) -> impl Iterator<Item = (&tollgate_core::RuleId, &tollgate_core::Quota)> {
        self.contents
            .limits
            .iter()
            .map(|limit| (&limit.id, &limit.quota))
    }

    /// The file as TOML, re-rendered from what was read (values kept, comments and layout not;
    /// a merged file — [`overridden_by`](Self::overridden_by) — as one file): it loads again
    /// to the same rules, limits, exemptions and headers.
    ///
    /// ```
    /// use tollgate_config::{Extractors, RuleFile};
    ///
    /// let text = "headers = { legacy = true }\n[[rule]]\nid = \"reads\"\nalgorithm = \"gcra\"\ncapacity = 5\nrefill = { amount = 1, per = \"1s\" }\nkey = \"global\"\n";
    /// let file = RuleFile::parse("rules.toml", text, &Extractors::new())?;
    /// let again = RuleFile::parse("again.toml", &file.to_toml(), &Extractors::new())?;
    /// assert_eq!(again.to_toml(), file.to_toml());
    /// # Ok::<(), tollgate_config::ConfigErrors>(())
    /// ```
    pub fn to_toml(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some((_, source)) = &self.contents.headers {
            parts.push(source.clone());
        }
        // Every rule in its place (HTTP rules, rules for Envoy only and unlimited ones), so
        // that the file read again decides as this one: which of two equally specific
        // descriptor rules wins is the first written.
        let mut rules: Vec<(usize, String)> = (self.contents.entries.iter())
            .map(|entry| (entry.order, write::rule_to_toml(&entry.rule)))
            .chain((self.contents.unlimited.iter()).map(|rule| (rule.order, rule.source.clone())))
            .collect();
        rules.sort_by_key(|(order, _)| *order);
        parts.extend(rules.into_iter().map(|(_, source)| source));
        parts.extend(
            self.contents
                .limits
                .iter()
                .map(|limit| limit.source.clone()),
        );
        if let Some((_, source)) = &self.contents.exempt {
            parts.push(source.clone());
        }
        parts.join("\n")
    }

    /// The ids of the file's rules, in the order written (unlimited descriptor rules last).
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.contents
            .entries
            .iter()
            .map(|entry| entry.rule.id().as_str())
            .chain(self.contents.unlimited.iter().map(|rule| rule.id.as_str()))
    }

    /// The rules that apply at an Envoy edge (those with `envoy = { domain, descriptor }`), in
    /// the order written (a merged file's: see [`overridden_by`](Self::overridden_by)), unlimited
    /// ones among them: what `tollgate-envoy`'s rate limit service
    /// matches Envoy's descriptors against. A rule with `envoy` and no `match` is in these only,
    /// not in [`rules`](Self::rules).
    ///
    /// ```
    /// use tollgate_config::{Extractors, RuleFile};
    ///
    /// let text = r#"
    /// [[rule]]
    /// id = "api"
    /// match = { path = "/api/{*rest}" }
    /// envoy = { domain = "edge", descriptor = [{ key = "remote_address" }] }
    /// key = "peer_ip"
    /// algorithm = "gcra"
    /// capacity = 10
    /// refill = { amount = 10, per = "1s" }
    ///
    /// [[rule]]
    /// id = "internal"
    /// envoy = { domain = "edge", descriptor = [{ key = "client", value = "internal-*" }], unlimited = true }
    /// "#;
    /// let file = RuleFile::parse("rules.toml", text, &Extractors::new())?;
    /// let ids: Vec<&str> = file.descriptor_rules().map(|rule| rule.id().as_str()).collect();
    /// assert_eq!(ids, ["api", "internal"]);
    /// assert_eq!(file.rules().rules().count(), 1); // `api` limits HTTP requests too
    /// assert!(file.descriptor_rules().nth(1).is_some_and(|rule| rule.rule().is_none()));
    /// # Ok::<(), tollgate_config::ConfigErrors>(())
    /// ```
    pub fn descriptor_rules(&self) -> impl Iterator<Item = DescriptorRule<'_>> {
        let counting = self.contents.entries.iter().filter_map(|entry| {
            let rule = DescriptorRule {
                id: entry.rule.id(),
                matcher: entry.envoy.as_ref()?,
                rule: Some(&entry.rule),
            };
            Some((entry.order, rule))
        });
        let unlimited = self.contents.unlimited.iter().map(|rule| {
            let found = DescriptorRule {
                id: &rule.id,
                matcher: &rule.matcher,
                rule: None,
            };
            (rule.order, found)
        });
        let mut rules: Vec<(usize, DescriptorRule<'_>)> = counting.chain(unlimited).collect();
        // Stable: among equal places (none in a file as read), counting rules first.
        rules.sort_by_key(|(order, _)| *order);
        rules.into_iter().map(|(_, rule)| rule)
    }

    /// These rules overridden by `overrides`' (a fleet document's): a rule of `overrides`
    /// takes the place of this file's rule with the same id — its quota, key, route and
    /// policies all — and rules only `overrides` defines are added after this file's; the same
    /// for `[[limit]]`s by id; `overrides`' `[exempt]` and `headers`, when it sets them,
    /// replace this file's.
    ///
    /// ```
    /// use tollgate_config::{Extractors, RuleFile};
    ///
    /// let local = RuleFile::parse("local.toml", r#"
    /// [[rule]]
    /// id = "reads"
    /// algorithm = "fixed_window"
    /// limit = 50
    /// window = "1s"
    /// key = "peer_ip"
    /// "#, &Extractors::new())?;
    /// let fleet = RuleFile::parse("fleet", r#"
    /// [[rule]]
    /// id = "reads"
    /// algorithm = "fixed_window"
    /// limit = 20
    /// window = "1s"
    /// key = "peer_ip"
    /// "#, &Extractors::new())?;
    /// let merged = local.overridden_by(&fleet);
    /// assert_eq!(merged.rules().rules().next().map(|rule| rule.quota().limit()), Some(20));
    /// # Ok::<(), tollgate_config::ConfigErrors>(())
    /// ```
    #[must_use]
    pub fn overridden_by(&self, overrides: &RuleFile) -> RuleFile {
        let (own, theirs) = (&self.contents, &overrides.contents);
        let replacement = |id: &str| {
            theirs
                .entries
                .iter()
                .find(|entry| entry.rule.id().as_str() == id)
        };
        // A rule of theirs takes the place of this file's rule with its id (which of two equally
        // specific descriptor rules wins follows places); rules only they define come after.
        let own_place = |id: &str| {
            (own.entries.iter())
                .find(|entry| entry.rule.id().as_str() == id)
                .map(|entry| entry.order)
                .or_else(|| {
                    (own.unlimited.iter())
                        .find(|rule| rule.id.as_str() == id)
                        .map(|rule| rule.order)
                })
        };
        let after = (own.entries.iter().map(|entry| entry.order))
            .chain(own.unlimited.iter().map(|rule| rule.order))
            .max()
            .map_or(0, |last| last + 1);
        let place = |id: &str, theirs: usize| own_place(id).unwrap_or(after + theirs);
        let unlimited_there = |id: &str| theirs.unlimited.iter().any(|rule| rule.id.as_str() == id);
        let mut entries: Vec<Entry> = own
            .entries
            .iter()
            .filter(|entry| !unlimited_there(entry.rule.id().as_str()))
            .map(|entry| {
                let mut merged = replacement(entry.rule.id().as_str())
                    .unwrap_or(entry)
                    .clone();
                merged.order = entry.order;
                merged
            })
            .collect();
        // Counting rules only: one of theirs with an unlimited rule's id takes its place.
        let own_ids: Vec<&str> = own
            .entries
            .iter()
            .map(|entry| entry.rule.id().as_str())
            .collect();
        entries.extend(
            theirs
                .entries
                .iter()
                .filter(|entry| !own_ids.contains(&entry.rule.id().as_str()))
                .map(|entry| {
                    let mut merged = entry.clone();
                    merged.order = place(entry.rule.id().as_str(), entry.order);
                    merged
                }),
        );
        let mut limits: Vec<LimitEntry> = own
            .limits
            .iter()
            .filter(|limit| theirs.limits.iter().all(|other| other.id != limit.id))
            .cloned()
            .collect();
        limits.extend(theirs.limits.iter().cloned());
        let their_ids: Vec<&str> = overrides.ids().collect();
        let mut unlimited: Vec<UnlimitedRule> = own
            .unlimited
            .iter()
            .filter(|rule| !their_ids.contains(&rule.id.as_str()))
            .cloned()
            .collect();
        unlimited.extend(theirs.unlimited.iter().map(|rule| {
            let mut merged = rule.clone();
            merged.order = place(rule.id.as_str(), rule.order);
            merged
        }));
        RuleFile::of(Contents {
            entries,
            limits,
            exempt: theirs.exempt.clone().or_else(|| own.exempt.clone()),
            headers: theirs.headers.clone().or_else(|| own.headers.clone()),
            unlimited,
        })
    }

    /// Whether an id is set by a `[[limit]]` and the mistake to report if the layer has no
    /// registry to put it in.
    pub(crate) fn limits_need_registry(&self) -> Option<ConfigErrors> {
        let limit = self.contents.limits.first()?;
        Some(ConfigErrors(vec![limit.at.error(format!(
            "`[[limit]]` {:?} sets a typed limit's quota, but the layer has no QuotaRegistry to put it in; build the layer with `.registry(...)` and share it with the typed limits",
            limit.id.as_str()
        ))]))
    }

    /// What two sources merged ([`overridden_by`](Self::overridden_by)) can get wrong that
    /// neither does alone: an id that is a rule in one and a `[[limit]]` in the other (both
    /// would read one registry entry), and an exemption of one covering a rule of the other.
    pub(crate) fn conflicts(&self) -> Option<ConfigErrors> {
        let contents = &self.contents;
        let mut mistakes: Vec<ConfigError> = contents
            .limits
            .iter()
            .filter(|limit| self.ids().any(|id| id == limit.id.as_str()))
            .map(|limit| {
                limit.at.error(format!(
                    "`[[limit]]` {:?} has the id of a `[[rule]]` in the other source (rule file or fleet document); an id is a rule's or a typed limit's, not both",
                    limit.id.as_str()
                ))
            })
            .collect();
        if let Some((exempt, _)) = &contents.exempt {
            let rules = contents
                .entries
                .iter()
                .map(|entry| (entry.rule.id().as_str(), &entry.applies));
            mistakes.extend(set::covered(exempt, rules));
        }
        (!mistakes.is_empty()).then_some(ConfigErrors(mistakes))
    }

    /// Its rules that ask what a store with `capabilities` cannot do
    /// ([`Capabilities::supports`](tollgate_core::Capabilities::supports): a store it does not
    /// have, a lease or sync without a `FleetStore`, a split over a shared store, sub-buckets or
    /// cached refusals without their wrapper), each at the field that asks: such a rule would
    /// be counted otherwise than it says (in the default store, exactly, on one key, every
    /// refusal asking the store, or its part once for the whole fleet).
    pub(crate) fn unsupported(
        &self,
        capabilities: &tollgate_core::Capabilities,
    ) -> Option<ConfigErrors> {
        let mistakes: Vec<ConfigError> = self
            .contents
            .entries
            .iter()
            .filter_map(|entry| {
                let unsupported = capabilities.supports(&entry.rule.fleet_modes()).err()?;
                let (field, at) = entry.asks.field(&unsupported);
                Some(at.error(format!(
                    "rule {:?} cannot be counted as it asks in the layer's store: {unsupported}; or remove `{field}`",
                    entry.rule.id().as_str()
                )))
            })
            .collect();
        (!mistakes.is_empty()).then_some(ConfigErrors(mistakes))
    }

    /// `Ok` when a store with `capabilities` can count every rule as it asks; else the mistakes,
    /// each at the field that asks (a `store` it does not have, leases or syncs without a
    /// `FleetStore`, ...): what [`install`](Self::install) checks for a layer, for whoever
    /// counts the file's rules in a store of their own (`tollgate-envoy`'s rate limit service).
    ///
    /// ```
    /// use tollgate_core::{MemoryStore, Store};
    /// use tollgate_config::{Extractors, RuleFile};
    ///
    /// let text = "[[rule]]\nid = \"login\"\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"15m\"\nkey = \"global\"\nsub_buckets = 4\n";
    /// let file = RuleFile::parse("rules.toml", text, &Extractors::new())?;
    /// let refused = file.fits_store(&MemoryStore::new().capabilities()).unwrap_err();
    /// assert!(refused.to_string().starts_with("rules.toml:7:"), "{refused}"); // at `sub_buckets`
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fits_store(
        &self,
        capabilities: &tollgate_core::Capabilities,
    ) -> Result<(), ConfigErrors> {
        match self.unsupported(capabilities) {
            Some(errors) => Err(errors),
            None => Ok(()),
        }
    }

    /// The ids of the rules and `[[limit]]`s both files define (what `overrides` replaces).
    pub(crate) fn shared_ids(&self, overrides: &RuleFile) -> Vec<String> {
        let theirs: Vec<&str> = overrides
            .ids()
            .chain(overrides.limits().map(|(id, _)| id.as_str()))
            .collect();
        self.ids()
            .chain(self.limits().map(|(id, _)| id.as_str()))
            .filter(|id| theirs.contains(id))
            .map(str::to_owned)
            .collect()
    }

    /// The rules, to give a layer ([`LayerHandle::replace_rules`](tollgate_tower::LayerHandle::replace_rules)).
    /// [`install`](RuleFile::install) gives them after checking what only the layer can see.
    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// Gives `layer` these rules, unless one asks what the layer's store cannot do
    /// ([`Store::capabilities`](tollgate_core::Store::capabilities)): a store it does not have
    /// (`store`), leases or syncs without a `FleetStore` (`counting`), a split over a store the
    /// gateways share without one (`split`), `sub_buckets` without a `SubBuckets`,
    /// `cache_blocked` without a `BlockedCache`, `replica_ack` over a store with no replicas
    /// (in memory). Then the mistakes, each at the field that
    /// asks, and the rules in force stay. (A [`RuleWatcher`](crate::RuleWatcher) checks the same, and more, on
    /// every load; `LayerHandle::replace_rules(file.rules().clone())` refuses the same rules,
    /// with an error naming the rule rather than the file's line.)
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_wrappers::Stores;
    /// use tollgate_tower::RateLimitLayer;
    /// use tollgate_config::{Extractors, RuleFile};
    ///
    /// let text = "[[rule]]\nid = \"login\"\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"15m\"\nkey = \"global\"\nstore = \"home\"\n";
    /// let file = RuleFile::parse("rules.toml", text, &Extractors::new())?;
    /// let plain = RateLimitLayer::new(MemoryStore::new());
    /// let refused = file.install(&plain).unwrap_err();
    /// assert!(refused.to_string().starts_with("rules.toml:7:"), "{refused}"); // at `store`
    /// let regions = RateLimitLayer::new(Stores::new(MemoryStore::new()).with("home", MemoryStore::new())?);
    /// file.install(&regions)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn install<St: tollgate_core::Store>(
        &self,
        layer: &tollgate_tower::RateLimitLayer<St>,
    ) -> Result<(), ConfigErrors> {
        if let Some(errors) = self.unsupported(&layer.store().capabilities()) {
            return Err(errors);
        }
        // The check above found, at their fields, every rule the layer would refuse.
        if let Err(refused) = layer.handle().replace_rules(self.rules.clone()) {
            tracing::error!(target: "tollgate::config", %refused, "rules not installed; the rules in force stay");
        }
        Ok(())
    }

    /// The rules, owned.
    pub fn into_rules(self) -> RuleSet {
        self.rules
    }
}

/// A TOML syntax error as a sentence.
fn syntax(kind: &toml_span::ErrorKind) -> String {
    use toml_span::ErrorKind;
    let what = match kind {
        ErrorKind::UnexpectedEof => "the file ends in the middle of a value".to_owned(),
        ErrorKind::ExceededDepthLimit => "values are nested too deeply".to_owned(),
        ErrorKind::UnterminatedString => "a string is not closed: add the missing quote".to_owned(),
        ErrorKind::InvalidNumber => "this is not a valid number".to_owned(),
        ErrorKind::Unexpected(found) => format!("unexpected {found:?} here"),
        ErrorKind::DuplicateKey { key, .. } => format!("`{key}` is set twice in the same table"),
        ErrorKind::DuplicateTable { name, .. } => format!("table `{name}` is defined twice"),
        ErrorKind::Wanted { expected, found } => format!("expected {expected}, found {found}"),
        other => other.to_string(),
    };
    format!("not valid TOML: {what}")
}

/// Every `[[rule]]` of the document.
fn entries(
    document: &toml_span::Value<'_>,
    extractors: &Extractors,
    report: &mut Report<'_>,
) -> Option<Contents> {
    let top = Fields::of(
        document,
        "the file",
        &["rule", "limit", "exempt", "headers"],
        report,
    )?;
    let mut set = Some(Vec::new());
    let mut seen: HashSet<String> = HashSet::new();
    let tables = match top.get("rule").map(|list| (list, list.as_array())) {
        Some((_, Some(tables))) => tables.as_slice(),
        Some((list, None)) => {
            report.at(list.span.start, "rules are `[[rule]]` tables");
            set = None;
            &[]
        }
        None => &[],
    };
    // Every rule's id, even one whose rule has mistakes: a `[[limit]]` may not take it either.
    let written: HashSet<String> = tables
        .iter()
        .filter_map(|value| Some(value.as_table()?.get("id")?.as_str()?.to_owned()))
        .collect();
    let mut unlimited = Vec::new();
    for (order, value) in tables.iter().enumerate() {
        if descriptor::is_unlimited(value) {
            let Some((rule, id_at)) = descriptor::unlimited_rule(value, order, report) else {
                set = None;
                continue;
            };
            if unique(&mut seen, rule.id.as_str(), id_at, report) {
                unlimited.push(rule);
            } else {
                set = None;
            }
            continue;
        }
        let Some(read) = rule::rule(value, extractors, report) else {
            set = None;
            continue;
        };
        if !unique(&mut seen, read.rule.id().as_str(), read.id_at, report) {
            set = None;
            continue;
        }
        if let Some(set) = set.as_mut() {
            let asks = Asks::of(value, report);
            set.push(Entry {
                rule: read.rule,
                applies: read.applies,
                envoy: read.envoy,
                asks,
                order,
            });
        }
    }
    let limits = match top.get("limit") {
        Some(list) => limit::limits(list, &written, report),
        None => Some(Vec::new()),
    };
    let (top_exempt, top_headers) = (top.get("exempt"), top.get("headers"));
    let exempt = top_exempt.map(|value| set::exempt(value, report));
    let headers = top_headers.map(|value| set::headers(value, report));
    top.finish("the file", report);
    if let (Some(Some(exempt)), Some(entries)) = (&exempt, &set) {
        let rules = entries
            .iter()
            .map(|entry| (entry.rule.id().as_str(), &entry.applies));
        for mistake in set::covered(exempt, rules) {
            report.push(mistake);
        }
    }
    let (entries, limits) = (set?, limits?);
    descriptor::replaced_rules_exist(
        tables,
        entries
            .iter()
            .filter_map(|entry| entry.envoy.as_ref().map(|_| entry.rule.id()))
            .chain(unlimited.iter().map(|rule| &rule.id)),
        report,
    );
    if entries.is_empty() && limits.is_empty() {
        // An empty file (or one truncated while being written) would turn limiting off.
        report.at(0, "the file defines no rules; an empty rule set would limit nothing, so it is refused (write at least one `[[rule]]` or `[[limit]]`)");
        return None;
    }
    Some(Contents {
        entries,
        limits,
        exempt: match (exempt, top_exempt) {
            (Some(read), Some(value)) => Some((read?, write::table("exempt", false, value))),
            _ => None,
        },
        headers: match (headers, top_headers) {
            (Some(read), Some(value)) => Some((read?, write::field("headers", value))),
            _ => None,
        },
        unlimited,
    })
}

/// Whether `id` (written at `at`) is new to `seen`; a mistake recorded when it is not.
fn unique(seen: &mut HashSet<String>, id: &str, at: usize, report: &mut Report<'_>) -> bool {
    let new = seen.insert(id.to_owned());
    if !new {
        report.at(
            at,
            format!("rule id {id:?} is used twice; ids name policies and must be unique"),
        );
    }
    new
}

/// Adds `rule` where it applies (the pattern was checked when read).
fn add(set: RuleSet, rule: tollgate_tower::Rule, applies: &Applies) -> RuleSet {
    match applies {
        Applies::Everywhere => set.rule(rule),
        Applies::Nowhere => set,
        Applies::Route { methods, pattern } => {
            let Ok(pattern) = tollgate_tower::PathPattern::new(pattern) else {
                return set;
            };
            if methods.is_empty() {
                return set.route_pattern(None, pattern, rule);
            }
            methods.iter().fold(set, |set, method| {
                set.route_pattern(Some(method.clone()), pattern.clone(), rule.clone())
            })
        }
    }
}
