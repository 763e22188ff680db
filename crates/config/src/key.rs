//! Who a rule counts, from a file: built-in key kinds, and extractors the service registers by
//! name.
//!
//! ```toml
//! key = "peer_ip"                                  # or "endpoint", "global"
//! key = { header = "x-api-key" }
//! key = { client_ip = { trusted_proxies = ["10.0.0.0/8"], header = "x-forwarded-for" } }
//! key = { peer_ip = { ipv4_prefix = 24, ipv6_prefix = 48 } }
//! key = ["account", "endpoint"]                    # a combination; "account" registered in code
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use http::HeaderName;
use http::request::Parts;
use toml_span::Value;

use super::error::Report;
use super::fields::{Fields, kind, nearest, one_or_many, positive, string};
use tollgate_tower::client_ip::{Cidr, IpGrouping, ProxyHeader, TrustedProxies};
use tollgate_tower::key::{
    ClientIp, Endpoint, Global, HeaderKey, KeyBuilder, KeyExtractor, PeerIp,
};

/// What a service defines in code and rule files name: key extractors (`key = "account"` for
/// an `ExtensionKey` of its authenticated user, say), responders (`on_refusal = { respond =
/// "challenge" }`) and predicates on a response's status (`count_only_when = "failed_login"`).
///
/// ```
/// use http::StatusCode;
/// use tollgate_config::Extractors;
/// use tollgate_tower::key::ExtensionKey;
///
/// #[derive(Clone)]
/// struct AccountId(String);
///
/// let extractors = Extractors::new()
///     .with("account", ExtensionKey::new(|account: &AccountId| account.0.clone()))
///     .responder("challenge", |_refused| {
///         http::Response::builder()
///             .status(StatusCode::FORBIDDEN)
///             .body(bytes::Bytes::from_static(b"solve the challenge"))
///             .unwrap_or_default()
///     })
///     .predicate("failed_login", |status| status == StatusCode::UNAUTHORIZED);
/// # let _ = extractors;
/// ```
#[derive(Clone, Default)]
pub struct Extractors {
    named: HashMap<String, Arc<dyn KeyExtractor>>,
    responders: HashMap<String, tollgate_tower::Responder>,
    predicates: HashMap<String, tollgate_tower::CountWhen>,
    costs: HashMap<String, CostFn>,
    settles: HashMap<String, SettleFn>,
}

/// A request's cost, computed from its head (`cost = { function = "name" }`).
pub(crate) type CostFn = Arc<dyn Fn(&Parts) -> u64 + Send + Sync>;

/// A request's actual cost, read from its response's head (`settle = { function = "name" }`).
pub(crate) type SettleFn = Arc<dyn Fn(&http::response::Parts) -> Option<u64> + Send + Sync>;

impl Extractors {
    /// No named extractors.
    pub fn new() -> Self {
        Extractors::default()
    }

    /// Files may say `key = "<name>"` for `extractor`.
    #[must_use]
    pub fn with(mut self, name: &str, extractor: impl KeyExtractor) -> Self {
        self.named.insert(name.to_owned(), Arc::new(extractor));
        self
    }

    /// Files may say `on_refusal = { respond = "<name>" }` for `respond`: the response a
    /// refused request gets instead of a 429 (a challenge page, a `403` naming a challenge),
    /// built from the [`Refused`](tollgate_tower::Refused) the layer's own responder would see.
    #[must_use]
    pub fn responder(
        mut self,
        name: &str,
        respond: impl Fn(&tollgate_tower::Refused) -> http::Response<bytes::Bytes>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.responders.insert(name.to_owned(), Arc::new(respond));
        self
    }

    /// Files may say `count_only_when = "<name>"` for `counts`: a request counts only when its
    /// response's status satisfies it (see [`Rule::count_only_when`](tollgate_tower::Rule::count_only_when)).
    #[must_use]
    pub fn predicate(
        mut self,
        name: &str,
        counts: impl Fn(http::StatusCode) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.predicates.insert(name.to_owned(), Arc::new(counts));
        self
    }

    /// Files may say `cost = { function = "<name>" }` for `cost`: a request's cost (a settled
    /// rule's estimate) computed from its head (see [`Rule::cost_fn`](tollgate_tower::Rule::cost_fn)).
    ///
    /// ```
    /// let extractors = tollgate_config::Extractors::new()
    ///     .cost("prompt_tokens", |request| request.headers.len() as u64 * 10);
    /// # let _ = extractors;
    /// ```
    #[must_use]
    pub fn cost(
        mut self,
        name: &str,
        cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.costs.insert(name.to_owned(), Arc::new(cost));
        self
    }

    /// Files may say `settle = { function = "<name>" }` for `read`: a settled rule's actual
    /// cost, read from the response's head (`None`: nothing reported; see
    /// [`SettleFrom::function`](tollgate_tower::SettleFrom::function)).
    ///
    /// ```
    /// let extractors = tollgate_config::Extractors::new().settle("tokens_used", |response| {
    ///     response.headers.get("x-usage")?.to_str().ok()?.split('/').next()?.parse().ok()
    /// });
    /// # let _ = extractors;
    /// ```
    #[must_use]
    pub fn settle(
        mut self,
        name: &str,
        read: impl Fn(&http::response::Parts) -> Option<u64> + Send + Sync + 'static,
    ) -> Self {
        self.settles.insert(name.to_owned(), Arc::new(read));
        self
    }

    /// The cost function registered as `name`, or a sentence listing the known ones.
    pub(crate) fn find_cost(&self, name: &str) -> Result<CostFn, String> {
        self.costs
            .get(name)
            .cloned()
            .ok_or_else(|| unknown("cost", name, &sorted(self.costs.keys())))
    }

    /// The settle function registered as `name`, or a sentence listing the known ones.
    pub(crate) fn find_settle(&self, name: &str) -> Result<SettleFn, String> {
        self.settles
            .get(name)
            .cloned()
            .ok_or_else(|| unknown("settle", name, &sorted(self.settles.keys())))
    }

    fn names(&self) -> Vec<&str> {
        sorted(self.named.keys())
    }

    /// The responder registered as `name`, or a sentence listing the known ones.
    pub(crate) fn find_responder(&self, name: &str) -> Result<tollgate_tower::Responder, String> {
        self.responders
            .get(name)
            .cloned()
            .ok_or_else(|| unknown("responder", name, &sorted(self.responders.keys())))
    }

    /// The predicate registered as `name`, or a sentence listing the known ones.
    pub(crate) fn find_predicate(&self, name: &str) -> Result<tollgate_tower::CountWhen, String> {
        self.predicates
            .get(name)
            .cloned()
            .ok_or_else(|| unknown("predicate", name, &sorted(self.predicates.keys())))
    }
}

fn sorted<'a>(names: impl Iterator<Item = &'a String>) -> Vec<&'a str> {
    let mut names: Vec<&str> = names.map(String::as_str).collect();
    names.sort_unstable();
    names
}

/// "no responder named "x" is registered (did you mean "y"?); registered: ..."
fn unknown(what: &str, name: &str, known: &[&str]) -> String {
    let hint = nearest(name, known)
        .map(|near| format!(" (did you mean {near:?}?)"))
        .unwrap_or_default();
    let registered = if known.is_empty() {
        "none is registered; register one in code with `Extractors::".to_owned() + what + "`"
    } else {
        format!("registered: {}", known.join(", "))
    };
    format!("no {what} named {name:?}{hint}; {registered}")
}

impl std::fmt::Debug for Extractors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extractors")
            .field("keys", &self.names())
            .field("responders", &sorted(self.responders.keys()))
            .field("predicates", &sorted(self.predicates.keys()))
            .finish()
    }
}

/// The built-in key kinds, by name.
const BUILT_IN: &[&str] = &["peer_ip", "client_ip", "header", "endpoint", "global"];

/// The extractor `value` describes; `None` when a mistake was recorded.
pub(crate) fn key(
    value: &Value<'_>,
    extractors: &Extractors,
    report: &mut Report<'_>,
) -> Option<Arc<dyn KeyExtractor>> {
    let parts: Vec<Option<Arc<dyn KeyExtractor>>> = one_or_many(value)
        .into_iter()
        .map(|part| one(part, extractors, report))
        .collect();
    let parts: Option<Vec<Arc<dyn KeyExtractor>>> = parts.into_iter().collect();
    let mut parts = parts?;
    match parts.len() {
        0 => {
            report.at(value.span.start, "`key` must name at least one key kind");
            None
        }
        1 => parts.pop(),
        _ => Some(Arc::new(Combined(parts))),
    }
}

/// One key kind: a name, or a one-entry table `{ kind = settings }`.
fn one(
    value: &Value<'_>,
    extractors: &Extractors,
    report: &mut Report<'_>,
) -> Option<Arc<dyn KeyExtractor>> {
    if let Some(name) = value.as_str() {
        return match name {
            "peer_ip" => Some(Arc::new(PeerIp::new())),
            "client_ip" => Some(Arc::new(ClientIp::peer())),
            "endpoint" => Some(Arc::new(Endpoint)),
            "global" => Some(Arc::new(Global)),
            "header" => {
                report.at(
                    value.span.start,
                    "a header key names its header: `{ header = \"x-api-key\" }`",
                );
                None
            }
            other => named(other, value.span.start, extractors, report),
        };
    }
    let Some(table) = value.as_table() else {
        report.at(
            value.span.start,
            format!("a key is a name or a table, not {}", kind(value)),
        );
        return None;
    };
    let mut entries = table.iter();
    let (Some((kind_name, settings)), None) = (entries.next(), entries.next()) else {
        report.at(
            value.span.start,
            "a key table holds exactly one key kind, e.g. `{ header = \"x-api-key\" }`",
        );
        return None;
    };
    match kind_name.name.as_ref() {
        "header" => {
            let name = string(settings, "a header key's header", report)?;
            match HeaderName::try_from(name) {
                Ok(header) => Some(Arc::new(HeaderKey::new(header))),
                Err(_) => {
                    report.at(
                        settings.span.start,
                        format!("{name:?} is not a header name"),
                    );
                    None
                }
            }
        }
        "peer_ip" => {
            let fields = Fields::of(
                settings,
                "`peer_ip`",
                &["ipv4_prefix", "ipv6_prefix"],
                report,
            )?;
            let grouping = grouping(&fields, report);
            fields.finish("`peer_ip`", report);
            Some(Arc::new(PeerIp::new().grouping(grouping?)))
        }
        "client_ip" => {
            let known = &["trusted_proxies", "header", "ipv4_prefix", "ipv6_prefix"];
            let fields = Fields::of(settings, "`client_ip`", known, report)?;
            let proxies = proxies(&fields, settings.span.start, report);
            let grouping = grouping(&fields, report);
            fields.finish("`client_ip`", report);
            Some(Arc::new(ClientIp::behind(proxies?).grouping(grouping?)))
        }
        other => {
            let hint = nearest(other, BUILT_IN)
                .map(|name| format!(" (did you mean `{name}`?)"))
                .unwrap_or_default();
            report.at(
                kind_name.span.start,
                format!(
                    "unknown key kind `{other}`{hint}; one of: {}",
                    BUILT_IN.join(", ")
                ),
            );
            None
        }
    }
}

/// Whether the key `value` describes is one text part a file can write — a header's value, or
/// what an extractor registered in code gives — so `overrides` and `plans` entries can name
/// its values. IP keys are binary blocks, `endpoint` and combinations have several parts, and
/// `global` none: an entry could never match them.
pub(crate) fn is_one_text_part(value: &Value<'_>, extractors: &Extractors) -> bool {
    if let Some(name) = value.as_str() {
        return extractors.named.contains_key(name);
    }
    value
        .as_table()
        .is_some_and(|table| table.len() == 1 && table.keys().all(|key| key.name == "header"))
}

/// An extractor the service registered under `name`.
fn named(
    name: &str,
    at: usize,
    extractors: &Extractors,
    report: &mut Report<'_>,
) -> Option<Arc<dyn KeyExtractor>> {
    if let Some(extractor) = extractors.named.get(name) {
        return Some(Arc::clone(extractor));
    }
    let mut known: Vec<&str> = BUILT_IN.to_vec();
    known.extend(extractors.names());
    let hint = nearest(name, &known)
        .map(|name| format!(" (did you mean `{name}`?)"))
        .unwrap_or_default();
    report.at(
        at,
        format!(
            "unknown key `{name}`{hint}: a built-in kind ({}) or an extractor registered in code ({})",
            BUILT_IN.join(", "),
            if extractors.named.is_empty() { "none registered".to_owned() } else { extractors.names().join(", ") }
        ),
    );
    None
}

/// `ipv4_prefix` / `ipv6_prefix`, over the defaults (/32, /64).
fn grouping(fields: &Fields<'_, '_>, report: &mut Report<'_>) -> Option<IpGrouping> {
    let mut grouping = IpGrouping::default();
    for (name, bits) in [("ipv4_prefix", 32_u64), ("ipv6_prefix", 128)] {
        let Some(value) = fields.get(name) else {
            continue;
        };
        let prefix = positive(value, &format!("`{name}`"), report)?;
        let prefix = u8::try_from(prefix).ok().filter(|_| prefix <= bits);
        let Some(prefix) = prefix else {
            report.at(value.span.start, format!("`{name}` must be at most {bits}"));
            return None;
        };
        let changed = if name == "ipv4_prefix" {
            grouping.with_ipv4_prefix(prefix)
        } else {
            grouping.with_ipv6_prefix(prefix)
        };
        match changed {
            Ok(changed) => grouping = changed,
            Err(error) => {
                report.at(value.span.start, format!("`{name}`: {error}"));
                return None;
            }
        }
    }
    Some(grouping)
}

/// `trusted_proxies` (CIDRs) and `header` (which one the proxies write).
fn proxies(fields: &Fields<'_, '_>, at: usize, report: &mut Report<'_>) -> Option<TrustedProxies> {
    let header = fields.required("header", "`client_ip`", at, report).and_then(|value| {
        let name = string(value, "`header`", report)?;
        let header = match name.to_ascii_lowercase().as_str() {
            "x-forwarded-for" => ProxyHeader::XForwardedFor,
            "forwarded" => ProxyHeader::Forwarded,
            "x-real-ip" => ProxyHeader::XRealIp,
            _ => {
                report.at(value.span.start, format!("{name:?} is not a proxy header: \"x-forwarded-for\", \"forwarded\" or \"x-real-ip\""));
                return None;
            }
        };
        Some(header)
    });
    let networks = fields
        .required("trusted_proxies", "`client_ip`", at, report)
        .and_then(|value| {
            let Some(items) = value.as_array() else {
                report.at(
                    value.span.start,
                    "`trusted_proxies` is a list of networks, e.g. [\"10.0.0.0/8\"]",
                );
                return None;
            };
            let mut networks = Vec::with_capacity(items.len());
            let mut clean = true;
            for item in items {
                let Some(text) = string(item, "a trusted proxy", report) else {
                    clean = false;
                    continue;
                };
                match text.parse::<Cidr>() {
                    Ok(network) => networks.push(network),
                    Err(error) => {
                        report.at(item.span.start, error.to_string());
                        clean = false;
                    }
                }
            }
            clean.then_some(networks)
        });
    Some(TrustedProxies::new(header?).trust_all(networks?))
}

/// Several key kinds together, in order (a tuple of any length).
struct Combined(Vec<Arc<dyn KeyExtractor>>);

impl KeyExtractor for Combined {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        self.0.iter().all(|part| part.extract(request, key))
    }

    fn misconfiguration(&self, request: &Parts) -> Option<&'static str> {
        self.0
            .iter()
            .find_map(|part| part.misconfiguration(request))
    }

    fn key_from_values(
        &self,
        values: &mut dyn Iterator<Item = &str>,
        key: &mut KeyBuilder,
    ) -> Result<(), tollgate_tower::key::KeyValueError> {
        self.0
            .iter()
            .try_for_each(|part| part.key_from_values(values, key))
    }
}
