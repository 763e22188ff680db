//! One `[[rule]]` table: its id, where it applies, its quota, who it counts and what it does.

use http::Method;
use tollgate_core::{Algorithm, Mode, OnStoreFailure};
use toml_span::Value;

use super::descriptor::DescriptorMatch;
use super::error::Report;
use super::fields::{Fields, boolean, duration, one_or_many, positive, string};
use super::key::{Extractors, key};
use super::overrides::overrides;
use super::quota::{QUOTA_FIELDS, quota};
use std::sync::Arc;

use tollgate_tower::{CountWhen, Escalation, MissingKey, OnRefusal, PathPattern, Rule};

/// A rule's own fields (its quota's, [`QUOTA_FIELDS`], are known too).
const RULE_FIELDS: &[&str] = &[
    "id",
    "match",
    "key",
    "cost",
    "mode",
    "on_store_failure",
    "counting",
    "split",
    "sub_buckets",
    "cache_blocked",
    "store",
    "replica_ack",
    "on_missing_key",
    "disclose",
    "escalate",
    "overrides",
    "plan",
    "plans",
    "on_refusal",
    "count_only_when",
    "settle",
    "per_message",
    "envoy",
    "alert_at",
];

/// Where a rule applies to HTTP requests.
#[derive(Debug, Clone)]
pub(crate) enum Applies {
    /// Every request.
    Everywhere,
    /// No HTTP request: a rule for Envoy's descriptors only (`envoy` and no `match`).
    Nowhere,
    /// Requests whose path matches, with one of the methods (none: any method).
    Route {
        methods: Vec<Method>,
        pattern: String,
    },
}

/// One rule as read: the rule, where it applies, and where its id is (for duplicate checks).
pub(crate) struct Read {
    pub(crate) rule: Rule,
    pub(crate) applies: Applies,
    /// Where it applies at an Envoy edge (`envoy`).
    pub(crate) envoy: Option<DescriptorMatch>,
    pub(crate) id_at: usize,
}

/// A rule read from `value`; `None` when a mistake was recorded.
pub(crate) fn rule(
    value: &Value<'_>,
    extractors: &Extractors,
    report: &mut Report<'_>,
) -> Option<Read> {
    let fields = Fields::of(value, "a `[[rule]]`", RULE_FIELDS, report)?.also_knowing(QUOTA_FIELDS);
    let at = value.span.start;
    let id_value = fields.required("id", "a rule", at, report);
    let id = id_value.and_then(|id| string(id, "`id`", report));
    let quota = quota(&fields, "a rule", at, report);
    let envoy = fields
        .get("envoy")
        .map(|value| super::descriptor::descriptor_match(value, report));
    let key = match (fields.get("key"), &envoy, fields.get("match")) {
        (Some(value), ..) => key(value, extractors, report),
        // A rule for Envoy only names its callers by the descriptor's values.
        (None, Some(matcher), None) => matcher.as_ref().map(super::descriptor::own_key),
        (None, ..) => {
            fields.required("key", "a rule", at, report);
            None
        }
    };
    let applies = match (fields.get("match"), &envoy) {
        (Some(value), _) => applies(value, report),
        (None, Some(_)) => Some(Applies::Nowhere),
        (None, None) => Some(Applies::Everywhere),
    };
    if let (Some(Some(_)), Some(quota), Some(algorithm)) = (&envoy, &quota, fields.get("algorithm"))
    {
        let name = quota.algorithm();
        if matches!(name, Algorithm::LeakyBucket | Algorithm::Concurrency) {
            report.at(algorithm.span.start, format!(
                "a rule with `envoy` cannot use {:?}: Envoy's rate limit service answers OK or OVER_LIMIT, with no delay to wait and no slot to give back; use a token bucket, GCRA or a window",
                algorithm.as_str().unwrap_or_default()
            ));
        }
    }
    let mut built = match (id, quota, key) {
        (Some(id), Some(quota), Some(key)) => match Rule::new(id, quota, key) {
            Ok(rule) => {
                if let (Some(Some(matcher)), Some(key)) = (&envoy, fields.get("key")) {
                    super::descriptor::key_fits(matcher, &rule, key, report);
                }
                Some(rule)
            }
            Err(error) => {
                report.at(
                    id_value.map_or(at, |value| value.span.start),
                    format!("`id` {id:?}: {error}"),
                );
                None
            }
        },
        _ => None,
    };
    let mut cost = 1;
    if let Some(value) = fields.get("cost") {
        let from = super::settle::cost(value, extractors, report).filter(|from| {
            let stated = from.stated();
            let limit = built.as_ref().map_or(u64::MAX, |rule: &Rule| rule.quota().limit());
            if stated > limit {
                report.at(value.span.start, format!("`cost` {stated} is above the quota's limit {limit}: every request would be refused"));
            }
            stated <= limit
        });
        cost = from.as_ref().map_or(1, super::settle::CostFrom::stated);
        built = built.zip(from).map(|(rule, from)| from.apply(rule));
    }
    if let Some(value) = fields.get("settle") {
        let algorithm = built.as_ref().map(|rule| rule.quota().algorithm());
        let from = super::settle::settle(value, algorithm, extractors, report);
        built = built.zip(from).map(|(rule, from)| rule.settle(from));
    }
    match overrides(&fields, extractors, cost, report) {
        Some(Some(overrides)) => built = built.map(|rule| rule.overrides(overrides)),
        Some(None) => {}
        None => built = None,
    }
    if let Some(value) = fields.get("mode") {
        let mode = mode(value, report);
        built = built.zip(mode).map(|(rule, mode)| rule.with_mode(mode));
    }
    if let Some(value) = fields.get("on_store_failure") {
        let policy = on_store_failure(value, report);
        built = built
            .zip(policy)
            .map(|(rule, policy)| rule.with_store_failure(policy));
    }
    if let Some(value) = fields.get("counting") {
        let counting = super::counting::counting(value, report);
        built = built
            .zip(counting)
            .map(|(rule, counting)| rule.with_counting(counting));
    }
    built = super::fleet_modes::fleet_modes(&fields, built, report);
    if let Some(value) = fields.get("on_missing_key") {
        let missing = on_missing_key(value, report);
        built = built
            .zip(missing)
            .map(|(rule, missing)| rule.on_missing_key(missing));
    }
    if let Some(value) = fields.get("disclose") {
        let disclose = boolean(value, "`disclose`", report);
        built = built
            .zip(disclose)
            .map(|(rule, disclose)| rule.disclose(disclose));
    }
    if let Some(value) = fields.get("on_refusal") {
        let action = on_refusal(value, extractors, report);
        built = built
            .zip(action)
            .map(|(rule, action)| rule.on_refusal(action));
    }
    if let Some(value) = fields.get("count_only_when") {
        let counts = count_only_when(value, extractors, report);
        built = built
            .zip(counts)
            .map(|(rule, counts)| rule.count_only_when(move |status| counts(status)));
    }
    if let Some(value) = fields.get("escalate") {
        let escalation = escalation(value, report);
        built = match built.zip(escalation) {
            Some((rule, escalation)) => match rule.escalate(escalation) {
                Ok(rule) => Some(rule),
                Err(error) => {
                    report.at(value.span.start, format!("`escalate`: {error}"));
                    None
                }
            },
            None => None,
        };
    }
    built = super::settle::can_settle(&fields, built, report);
    built = super::per_message::per_message(&fields, built, report);
    built = super::alert::alert_at(&fields, built, report);
    fields.finish("a `[[rule]]`", report);
    let built = built.map(|rule| rule.with_source_toml(super::write::table("rule", true, value)));
    Some(Read {
        rule: built?,
        applies: applies?,
        envoy: match envoy {
            Some(matcher) => Some(matcher?),
            None => None,
        },
        id_at: id_value.map_or(at, |value| value.span.start),
    })
}

/// `match = { path = "/posts", method = "POST" }` (`method` may be a list, or left out for any
/// method), or `match = { grpc = "chirp.v1.Feed/Get" }` (or `"chirp.v1.Feed/*"`: every method
/// of the service): requests to the method's path, whatever their HTTP method.
fn applies(value: &Value<'_>, report: &mut Report<'_>) -> Option<Applies> {
    let fields = Fields::of(value, "`match`", &["path", "method", "grpc"], report)?;
    if let Some(grpc) = fields.get("grpc") {
        if fields.get("path").is_some() || fields.get("method").is_some() {
            report.at(
                value.span.start,
                "`match` names a gRPC method or a path (and methods), not both",
            );
            return None;
        }
        fields.finish("`match`", report);
        let text = string(grpc, "`grpc`", report)?;
        return match tollgate_tower::grpc_method_pattern(text) {
            // Any HTTP method: tonic serves the path whatever the method.
            Ok(pattern) => Some(Applies::Route {
                methods: Vec::new(),
                pattern: pattern.as_str().to_owned(),
            }),
            Err(error) => {
                report.at(grpc.span.start, error.to_string());
                None
            }
        };
    }
    let pattern = fields
        .required("path", "`match`", value.span.start, report)
        .and_then(|path| {
            let text = string(path, "`path`", report)?;
            match PathPattern::new(text) {
                Ok(_) => Some(text.to_owned()),
                Err(error) => {
                    report.at(path.span.start, error.to_string());
                    None
                }
            }
        });
    let methods = match fields.get("method") {
        Some(value) => methods(value, report),
        None => Some(Vec::new()),
    };
    fields.finish("`match`", report);
    Some(Applies::Route {
        methods: methods?,
        pattern: pattern?,
    })
}

/// The standard methods a rule may name.
const METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE",
];

/// One method or a non-empty list of standard methods, each once. `HEAD` next to `GET` is
/// dropped: a GET row already counts HEAD requests (servers answer them with the GET handler),
/// and two rows would charge a HEAD request twice.
fn methods(value: &Value<'_>, report: &mut Report<'_>) -> Option<Vec<Method>> {
    let items = one_or_many(value);
    if items.is_empty() {
        report.at(
            value.span.start,
            "`method` lists no method; leave it out to match any method",
        );
        return None;
    }
    let mut methods: Vec<Method> = Vec::new();
    let mut clean = true;
    for item in items {
        let Some(text) = string(item, "a method", report) else {
            clean = false;
            continue;
        };
        let upper = text.to_ascii_uppercase();
        if !METHODS.contains(&upper.as_str()) {
            let hint = super::fields::nearest(&upper, METHODS)
                .map(|name| format!(" (did you mean {name:?}?)"))
                .unwrap_or_default();
            report.at(
                item.span.start,
                format!(
                    "{text:?} is not an HTTP method{hint}; one of: {}",
                    METHODS.join(", ")
                ),
            );
            clean = false;
            continue;
        }
        let method = Method::from_bytes(upper.as_bytes()).unwrap_or(Method::GET);
        if !methods.contains(&method) {
            methods.push(method);
        }
    }
    if methods.contains(&Method::GET) {
        methods.retain(|method| *method != Method::HEAD);
    }
    clean.then_some(methods)
}

fn mode(value: &Value<'_>, report: &mut Report<'_>) -> Option<Mode> {
    match string(value, "`mode`", report)? {
        "enforce" => Some(Mode::Enforce),
        "shadow" => Some(Mode::Shadow),
        other => {
            report.at(
                value.span.start,
                format!("`mode` {other:?} is not \"enforce\" or \"shadow\""),
            );
            None
        }
    }
}

/// `"open"`, `"local"`, `"closed"` or `{ open_within = { <a quota> } }`.
fn on_store_failure(value: &Value<'_>, report: &mut Report<'_>) -> Option<OnStoreFailure> {
    if let Some(text) = value.as_str() {
        return match text {
            "open" => Some(OnStoreFailure::Open),
            "local" => Some(OnStoreFailure::Local),
            "closed" => Some(OnStoreFailure::Closed),
            other => {
                report.at(value.span.start, format!(
                    "`on_store_failure` {other:?} is not \"open\", \"local\", \"closed\" or {{ open_within = {{ ... }} }}"
                ));
                None
            }
        };
    }
    let fields = Fields::of(value, "`on_store_failure`", &["open_within"], report)?;
    let within = fields.required(
        "open_within",
        "`on_store_failure`",
        value.span.start,
        report,
    );
    fields.finish("`on_store_failure`", report);
    let within = within?;
    let local = Fields::of(within, "`open_within`", QUOTA_FIELDS, report)?;
    let quota = quota(&local, "`open_within`", within.span.start, report);
    local.finish("`open_within`", report);
    quota.map(OnStoreFailure::OpenWithin)
}

/// `"skip"`, `"skip_always"` or `{ refuse = 401 }`.
fn on_missing_key(value: &Value<'_>, report: &mut Report<'_>) -> Option<MissingKey> {
    if let Some(text) = value.as_str() {
        return match text {
            "skip" => Some(MissingKey::Skip),
            "skip_always" => Some(MissingKey::SkipAlways),
            other => {
                report.at(value.span.start, format!(
                    "`on_missing_key` {other:?} is not \"skip\", \"skip_always\" or {{ refuse = 401 }}"
                ));
                None
            }
        };
    }
    let fields = Fields::of(value, "`on_missing_key`", &["refuse"], report)?;
    let status = fields
        .required("refuse", "`on_missing_key`", value.span.start, report)
        .and_then(|status| {
            let code = positive(status, "`refuse`", report)?;
            let status_code = u16::try_from(code)
                .ok()
                .and_then(|code| http::StatusCode::from_u16(code).ok())
                .filter(http::StatusCode::is_client_error);
            if status_code.is_none() {
                report.at(
                    status.span.start,
                    format!("`refuse` {code} is not a client error status (400–499)"),
                );
            }
            status_code
        });
    fields.finish("`on_missing_key`", report);
    status.map(MissingKey::Refuse)
}

/// `"reject"`, `"unavailable"`, `"flag"` or `{ respond = "<a responder registered in code>" }`.
fn on_refusal(
    value: &Value<'_>,
    extractors: &Extractors,
    report: &mut Report<'_>,
) -> Option<OnRefusal> {
    if let Some(text) = value.as_str() {
        return match text {
            "reject" => Some(OnRefusal::Reject),
            "unavailable" => Some(OnRefusal::Unavailable),
            "flag" => Some(OnRefusal::Flag),
            other => {
                report.at(value.span.start, format!(
                    "`on_refusal` {other:?} is not \"reject\", \"unavailable\", \"flag\" or {{ respond = \"<responder>\" }}"
                ));
                None
            }
        };
    }
    let fields = Fields::of(value, "`on_refusal`", &["respond"], report)?;
    let name = fields
        .required("respond", "`on_refusal`", value.span.start, report)
        .and_then(|name| Some((name, string(name, "`respond`", report)?)));
    fields.finish("`on_refusal`", report);
    let (at, name) = name?;
    match extractors.find_responder(name) {
        Ok(respond) => Some(OnRefusal::Respond(respond)),
        Err(why) => {
            report.at(at.span.start, why);
            None
        }
    }
}

/// `"<a predicate registered in code>"`, or a list of status classes (`"4xx"`) and statuses
/// (`401`): the request counts only when its response's status is one of them.
fn count_only_when(
    value: &Value<'_>,
    extractors: &Extractors,
    report: &mut Report<'_>,
) -> Option<CountWhen> {
    if let Some(name) = value.as_str()
        && class(name).is_none()
    {
        return match extractors.find_predicate(name) {
            Ok(counts) => Some(counts),
            Err(why) => {
                report.at(
                    value.span.start,
                    format!(
                        "{why}; or a list of status classes and statuses, such as [\"4xx\", 503]"
                    ),
                );
                None
            }
        };
    }
    let items = one_or_many(value);
    if items.is_empty() {
        report.at(value.span.start, "`count_only_when` lists nothing: no request would ever count; leave it out to count every request");
        return None;
    }
    let mut classes: Vec<u16> = Vec::new();
    let mut statuses: Vec<u16> = Vec::new();
    let mut clean = true;
    for item in items {
        if let Some(code) = item.as_integer() {
            match u16::try_from(code)
                .ok()
                .filter(|code| (100..=599).contains(code))
            {
                Some(code) => statuses.push(code),
                None => {
                    report.at(
                        item.span.start,
                        format!("{code} is not an HTTP status (100–599)"),
                    );
                    clean = false;
                }
            }
        } else if let Some(found) = item.as_str().and_then(class) {
            classes.push(found);
        } else {
            report.at(
                item.span.start,
                "each entry is a status class such as \"4xx\" or a status such as 401",
            );
            clean = false;
        }
    }
    clean.then(|| {
        Arc::new(move |status: http::StatusCode| {
            let code = status.as_u16();
            statuses.contains(&code) || classes.contains(&(code / 100))
        }) as CountWhen
    })
}

/// `"4xx"` → 4.
fn class(text: &str) -> Option<u16> {
    match text.as_bytes() {
        [digit @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] => Some(u16::from(digit - b'0')),
        _ => None,
    }
}

/// `{ after_refusals = 20, within = "1m", block_for = "1h" }`.
fn escalation(value: &Value<'_>, report: &mut Report<'_>) -> Option<Escalation> {
    let fields = Fields::of(
        value,
        "`escalate`",
        &["after_refusals", "within", "block_for"],
        report,
    )?;
    let at = value.span.start;
    let after = fields
        .required("after_refusals", "`escalate`", at, report)
        .and_then(|value| positive(value, "`after_refusals`", report));
    let within = fields
        .required("within", "`escalate`", at, report)
        .and_then(|value| duration(value, "`within`", report));
    let block_for = fields
        .required("block_for", "`escalate`", at, report)
        .and_then(|value| duration(value, "`block_for`", report));
    fields.finish("`escalate`", report);
    match Escalation::new(after?, within?, block_for?) {
        Ok(escalation) => Some(escalation),
        Err(error) => {
            report.at(at, format!("`escalate` is not valid: {error}"));
            None
        }
    }
}
