//! The schemas of request bodies a derive cannot say — a `PATCH`'s fields, each typed as the
//! rule file types it, at least one, no others; a rule as a JSON object — written as JSON
//! Schema, so the document states the shape the handlers take (what has another shape is `400`;
//! a body of this shape whose rule then fails the rule file's checks is `422`).

use std::borrow::Cow;

use serde_json::{Map, Value, json};
use tollgate_config::ALGORITHMS;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;
use utoipa::{PartialSchema, ToSchema};

/// `PATCH /v1/rules/{id}`'s body: the quota and policy fields to change.
pub(crate) struct RulePatch;

/// `PUT /v1/rules/{id}`'s body as JSON: the rule's fields, as its `[[rule]]` table holds them.
pub(crate) struct RuleObject;

/// A whole number a rule file takes as a count: at least 1, a TOML integer at most.
pub(crate) struct Count;

/// A duration longer than zero, as a rule file writes it.
pub(crate) struct Duration;

/// An amount per period: `refill` and `rate`.
pub(crate) struct Rate;

/// `on_store_failure`: a word, or a local quota to answer within.
pub(crate) struct StoreFailure;

/// Any value a TOML document can hold: JSON without `null`.
pub(crate) struct TomlValue;

/// A rule's `match`: a path and methods, or a gRPC method.
pub(crate) struct RuleMatch;

/// A rule's `key`: one key kind, or several combined.
pub(crate) struct RuleKey;

/// One key kind: a name, or a one-entry object of a kind and its settings.
pub(crate) struct KeyKind;

/// `value` as a schema. The unit tests check that every schema here survives utoipa's types
/// unchanged, so a keyword they cannot hold is found there, not dropped from the document.
fn schema(value: Value) -> RefOr<Schema> {
    serde_json::from_value(value).unwrap_or_else(|_| RefOr::T(Schema::default()))
}

/// A reference to the component schema `T`.
fn reference<T: ToSchema>() -> Value {
    json!({ "$ref": format!("#/components/schemas/{}", T::name()) })
}

/// Adds `T` and what it refers to to `schemas`.
fn with<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
}

/// The quota's fields and the policy fields, each typed as a rule file types it.
fn quota_and_policy() -> Map<String, Value> {
    let fields = json!({
        "algorithm": {
            "type": "string",
            "enum": ALGORITHMS,
            "description": "The quota's algorithm: token_bucket and gcra take `capacity` and `refill`; the windows take `limit` and `window`; pacing takes `rate` and `max_delay`; concurrency takes `limit` (and `retry_after`, `slot_ttl`)."
        },
        "capacity": reference::<Count>(),
        "refill": reference::<Rate>(),
        "limit": reference::<Count>(),
        "window": reference::<Duration>(),
        "rate": reference::<Rate>(),
        "max_delay": reference::<Duration>(),
        "retry_after": reference::<Duration>(),
        "slot_ttl": reference::<Duration>(),
        "mode": {
            "type": "string",
            "enum": ["enforce", "shadow"],
            "description": "`shadow` counts and reports but never refuses."
        },
        "on_store_failure": reference::<StoreFailure>(),
    });
    match fields {
        Value::Object(fields) => fields,
        _ => Map::new(),
    }
}

/// The component schemas the quota and policy fields refer to.
fn quota_and_policy_schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    with::<Count>(schemas);
    with::<Duration>(schemas);
    with::<Rate>(schemas);
    with::<StoreFailure>(schemas);
}

impl RulePatch {
    /// The JSON Schema.
    fn json() -> Value {
        json!({
            "type": "object",
            "description": "The fields to change, as a rule file writes them (e.g. `{\"limit\": 100}`): at least one, and no others. Naming `algorithm` replaces the whole quota, so give every field it takes. A change whose rule then fails the rule file's checks (a field its algorithm does not take, say) is `422`.",
            "minProperties": 1,
            "additionalProperties": false,
            "properties": quota_and_policy(),
        })
    }
}

impl RuleObject {
    /// The JSON Schema.
    fn json() -> Value {
        let mut properties = quota_and_policy();
        properties.insert(
            "id".to_owned(),
            json!({"type": "string", "minLength": 1, "description": "The rule's id: the one in the path."}),
        );
        properties.insert("match".to_owned(), reference::<RuleMatch>());
        properties.insert("key".to_owned(), reference::<RuleKey>());
        json!({
            "type": "object",
            "description": "The rule as a JSON object of the fields its `[[rule]]` table holds, with the same names and values: `{\"id\": \"reads\", \"match\": {\"method\": \"GET\", \"path\": \"/posts\"}, \"algorithm\": \"fixed_window\", \"limit\": 50, \"window\": \"1m\", \"key\": \"peer_ip\"}`. Objects are written as tables, arrays as arrays; TOML has no null. The fields typed here are the ones every rule has, its quota's and its policies'; the rule file's others (`cost`, `escalate`, `overrides`, `on_refusal`, ... — see the guide's rule-file chapter) are taken as a rule file writes them. The table is checked exactly as the TOML body is.",
            "required": ["id", "algorithm", "key"],
            "properties": properties,
            "additionalProperties": reference::<TomlValue>(),
        })
    }
}

impl PartialSchema for RulePatch {
    fn schema() -> RefOr<Schema> {
        schema(RulePatch::json())
    }
}

impl ToSchema for RulePatch {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("RulePatch")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        quota_and_policy_schemas(schemas);
    }
}

impl RuleMatch {
    fn json() -> Value {
        json!({
            "type": "object",
            "description": "Where the rule applies: `{\"method\": \"GET\", \"path\": \"/posts/{id}\"}`, or `{\"grpc\": \"/feed.Feed/Publish\"}` (without `match`, every request).",
            "additionalProperties": false,
            "properties": {
                "path": {
                    "type": "string",
                    "description": "A path pattern: `/posts/{id}`, `/static/{*rest}`."
                },
                "method": {
                    "description": "One HTTP method or several (without it, any method).",
                    "anyOf": [
                        { "type": "string" },
                        { "type": "array", "minItems": 1, "items": { "type": "string" } }
                    ]
                },
                "grpc": {
                    "type": "string",
                    "description": "A gRPC method, `/package.Service/Method` (instead of `path` and `method`)."
                }
            }
        })
    }
}

impl RuleKey {
    fn json() -> Value {
        json!({
            "description": "Who the rule counts: one key kind, or an array of them combined (`[\"account\", \"endpoint\"]`).",
            "anyOf": [
                reference::<KeyKind>(),
                { "type": "array", "minItems": 1, "items": reference::<KeyKind>() }
            ]
        })
    }
}

impl KeyKind {
    fn json() -> Value {
        let prefix = |bits: u8| json!({ "type": "integer", "minimum": 1, "maximum": bits });
        json!({
            "description": "`\"peer_ip\"`, `\"client_ip\"`, `\"endpoint\"`, `\"global\"` or a name the service registered in code; or `{\"header\": \"x-api-key\"}`, `{\"peer_ip\": {\"ipv6_prefix\": 48}}`, `{\"client_ip\": {\"trusted_proxies\": [\"10.0.0.0/8\"], \"header\": \"x-forwarded-for\"}}`.",
            "anyOf": [
                { "type": "string" },
                {
                    "type": "object",
                    "required": ["header"],
                    "additionalProperties": false,
                    "properties": { "header": { "type": "string" } }
                },
                {
                    "type": "object",
                    "required": ["peer_ip"],
                    "additionalProperties": false,
                    "properties": {
                        "peer_ip": {
                            "type": "object",
                            "additionalProperties": false,
                            "properties": { "ipv4_prefix": prefix(32), "ipv6_prefix": prefix(128) }
                        }
                    }
                },
                {
                    "type": "object",
                    "required": ["client_ip"],
                    "additionalProperties": false,
                    "properties": {
                        "client_ip": {
                            "type": "object",
                            "required": ["trusted_proxies", "header"],
                            "additionalProperties": false,
                            "properties": {
                                "trusted_proxies": { "type": "array", "items": { "type": "string" } },
                                "header": {
                                    "type": "string",
                                    "description": "`x-forwarded-for`, `forwarded` or `x-real-ip`."
                                },
                                "ipv4_prefix": prefix(32),
                                "ipv6_prefix": prefix(128)
                            }
                        }
                    }
                }
            ]
        })
    }
}

impl PartialSchema for RuleObject {
    fn schema() -> RefOr<Schema> {
        schema(RuleObject::json())
    }
}

impl ToSchema for RuleObject {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("RuleObject")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        quota_and_policy_schemas(schemas);
        with::<RuleMatch>(schemas);
        with::<RuleKey>(schemas);
        with::<TomlValue>(schemas);
    }
}

impl PartialSchema for RuleMatch {
    fn schema() -> RefOr<Schema> {
        schema(RuleMatch::json())
    }
}

impl ToSchema for RuleMatch {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("RuleMatch")
    }
}

impl PartialSchema for RuleKey {
    fn schema() -> RefOr<Schema> {
        schema(RuleKey::json())
    }
}

impl ToSchema for RuleKey {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("RuleKey")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        with::<KeyKind>(schemas);
    }
}

impl PartialSchema for KeyKind {
    fn schema() -> RefOr<Schema> {
        schema(KeyKind::json())
    }
}

impl ToSchema for KeyKind {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("KeyKind")
    }
}

impl Count {
    fn json() -> Value {
        json!({
            "type": "integer",
            "minimum": 1,
            "maximum": i64::MAX,
            "description": "A whole number, at least 1."
        })
    }
}

impl PartialSchema for Count {
    fn schema() -> RefOr<Schema> {
        schema(Count::json())
    }
}

impl ToSchema for Count {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Count")
    }
}

impl Duration {
    fn json() -> Value {
        json!({
            "type": "string",
            "minLength": 1,
            "description": "A duration longer than zero: \"500ms\", \"30s\", \"15m\", \"1h\", \"1d\", \"1h 30m\"."
        })
    }
}

impl PartialSchema for Duration {
    fn schema() -> RefOr<Schema> {
        schema(Duration::json())
    }
}

impl ToSchema for Duration {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Duration")
    }
}

impl Rate {
    fn json() -> Value {
        json!({
            "type": "object",
            "description": "`amount` per `per`: `{\"amount\": 30, \"per\": \"1h\"}`.",
            "required": ["amount", "per"],
            "additionalProperties": false,
            "properties": {
                "amount": reference::<Count>(),
                "per": reference::<Duration>(),
            }
        })
    }
}

impl PartialSchema for Rate {
    fn schema() -> RefOr<Schema> {
        schema(Rate::json())
    }
}

impl ToSchema for Rate {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Rate")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        with::<Count>(schemas);
        with::<Duration>(schemas);
    }
}

impl StoreFailure {
    fn json() -> Value {
        json!({
            "description": "What the rule answers while its store fails: `open`, `local`, `closed`, or `{\"open_within\": {<a quota: algorithm and its fields>}}`.",
            "oneOf": [
                { "type": "string", "enum": ["open", "local", "closed"] },
                {
                    "type": "object",
                    "required": ["open_within"],
                    "additionalProperties": false,
                    "properties": {
                        "open_within": {
                            "type": "object",
                            "required": ["algorithm"],
                            "additionalProperties": reference::<TomlValue>(),
                        }
                    }
                }
            ]
        })
    }
}

impl PartialSchema for StoreFailure {
    fn schema() -> RefOr<Schema> {
        schema(StoreFailure::json())
    }
}

impl ToSchema for StoreFailure {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("StoreFailure")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        with::<TomlValue>(schemas);
    }
}

impl TomlValue {
    fn json() -> Value {
        json!({
            "description": "A value a rule file can hold: a string, number, boolean, array or object of them (TOML has no null).",
            "oneOf": [
                { "type": "string" },
                { "type": "number" },
                { "type": "boolean" },
                { "type": "array", "items": reference::<TomlValue>() },
                { "type": "object", "additionalProperties": reference::<TomlValue>() }
            ]
        })
    }
}

impl PartialSchema for TomlValue {
    fn schema() -> RefOr<Schema> {
        schema(TomlValue::json())
    }
}

impl ToSchema for TomlValue {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("TomlValue")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_survives_utoipas_types_unchanged() {
        for (name, json) in [
            ("RulePatch", RulePatch::json()),
            ("RuleObject", RuleObject::json()),
            ("Count", Count::json()),
            ("Duration", Duration::json()),
            ("Rate", Rate::json()),
            ("StoreFailure", StoreFailure::json()),
            ("TomlValue", TomlValue::json()),
            ("RuleMatch", RuleMatch::json()),
            ("RuleKey", RuleKey::json()),
            ("KeyKind", KeyKind::json()),
        ] {
            let parsed: RefOr<Schema> = serde_json::from_value(json.clone()).expect(name);
            let written = serde_json::to_value(&parsed).expect(name);
            assert_eq!(
                written, json,
                "{name} lost a keyword on the way through utoipa"
            );
        }
    }

    #[test]
    fn a_patch_names_exactly_the_fields_the_config_lets_it_change() {
        let json = RulePatch::json();
        let mut named: Vec<&str> = json["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .collect();
        let mut patchable: Vec<&str> = tollgate_config::QUOTA_FIELDS
            .iter()
            .chain(tollgate_config::POLICY_FIELDS)
            .copied()
            .collect();
        named.sort_unstable();
        patchable.sort_unstable();
        assert_eq!(named, patchable);
    }

    #[test]
    fn the_algorithms_are_the_ones_a_rule_file_takes() {
        let text = "[[rule]]\nid = \"r\"\nalgorithm = \"nope\"\nkey = \"peer_ip\"\n";
        let errors =
            tollgate_config::RuleFile::parse("r", text, &tollgate_config::Extractors::new())
                .expect_err("an unknown algorithm is refused");
        let message = errors.to_string();
        let listed = message
            .split_once("one of: ")
            .map(|(_, names)| names.lines().next().unwrap_or_default())
            .expect("the message lists the algorithms");
        assert_eq!(
            listed.split(", ").collect::<Vec<_>>(),
            ALGORITHMS,
            "{message}"
        );
    }
}
