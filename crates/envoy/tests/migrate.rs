//! Migrating envoyproxy/ratelimit configurations to tollgate rule files: the exact text of a
//! realistic one, its shape as TOML, its ids, each refusal at its line and column, and no
//! panic on any input.

use std::collections::BTreeSet;

use proptest::prelude::*;
use tollgate_envoy::migrate::{MigrationErrors, migrate};
use toml::{Table, Value};

/// Nested descriptors, `shadow_mode`, `replaces`, `unlimited`, a wildcard, `detailed_metric`,
/// every unit (some in other cases), and a name that is not a valid id.
const REALISTIC: &str = include_str!("migrate/realistic.yaml");
const REALISTIC_RULES: &str = include_str!("migrate/realistic.toml");

/// The problems in `yaml`, one per line.
fn refused(yaml: &str) -> String {
    match migrate("config.yaml", yaml) {
        Ok(rules) => panic!("migrated, expected a refusal:\n{rules}"),
        Err(errors) => errors.to_string(),
    }
}

/// A file of one descriptor with `fields` (indented as a descriptor's).
fn one(fields: &str) -> String {
    format!("domain: edge\ndescriptors:\n  - key: a\n{fields}")
}

#[test]
fn a_realistic_configuration_becomes_the_expected_rule_file() -> Result<(), MigrationErrors> {
    assert_eq!(migrate("config.yaml", REALISTIC)?, REALISTIC_RULES);
    Ok(())
}

#[test]
fn the_same_yaml_gives_the_same_text() -> Result<(), MigrationErrors> {
    assert_eq!(
        migrate("config.yaml", REALISTIC)?,
        migrate("config.yaml", REALISTIC)?
    );
    Ok(())
}

/// The rules of `text` as TOML tables.
fn rules(text: &str) -> Vec<Table> {
    let file: Table = text.parse().expect("the output is TOML");
    assert_eq!(
        file.keys().collect::<Vec<_>>(),
        ["rule"],
        "only [[rule]] tables"
    );
    file["rule"]
        .as_array()
        .expect("[[rule]] is an array of tables")
        .iter()
        .map(|rule| rule.as_table().expect("each rule is a table").clone())
        .collect()
}

/// One rule in a line: id, descriptor, quota, mode, replaces. Checks on the way that each
/// field has the type and values the rule file format takes, and no other field is written.
fn summary(rule: &Table) -> String {
    let id = rule["id"].as_str().expect("`id` is a string");
    let envoy = rule["envoy"].as_table().expect("`envoy` is a table");
    for field in envoy.keys() {
        assert!(
            ["domain", "descriptor", "replaces", "unlimited"].contains(&field.as_str()),
            "{field}"
        );
    }
    assert_eq!(envoy["domain"].as_str(), Some("edge"));
    let descriptor: Vec<String> = envoy["descriptor"]
        .as_array()
        .expect("`descriptor` is an array")
        .iter()
        .map(|entry| {
            let entry = entry.as_table().expect("an entry is a table");
            let key = entry["key"].as_str().expect("`key` is a string");
            match entry.get("value") {
                Some(value) => {
                    assert_eq!(entry.len(), 2, "key and value only");
                    format!("{key}={}", value.as_str().expect("`value` is a string"))
                }
                None => {
                    assert_eq!(entry.len(), 1, "key only");
                    key.to_owned()
                }
            }
        })
        .collect();
    let replaces = envoy.get("replaces").map(|ids| {
        let ids: Vec<&str> = ids
            .as_array()
            .expect("`replaces` is an array")
            .iter()
            .map(|id| id.as_str().expect("a replaced id is a string"))
            .collect();
        format!(" replaces {}", ids.join(","))
    });
    let quota = if envoy.get("unlimited").is_some() {
        assert_eq!(envoy["unlimited"].as_bool(), Some(true));
        assert_eq!(rule.len(), 2, "an unlimited rule has only `id` and `envoy`");
        "unlimited".to_owned()
    } else {
        for field in rule.keys() {
            assert!(
                ["id", "envoy", "algorithm", "limit", "window", "mode"].contains(&field.as_str()),
                "{field}"
            );
        }
        assert_eq!(rule["algorithm"].as_str(), Some("fixed_window"));
        let limit = rule["limit"].as_integer().expect("`limit` is a number");
        assert!(limit >= 1);
        let window = rule["window"].as_str().expect("`window` is a string");
        assert!(
            ["1s", "1m", "1h", "1d", "7d", "30d", "365d"].contains(&window),
            "{window}"
        );
        let mode = match rule.get("mode") {
            None => "",
            Some(Value::String(mode)) if mode == "shadow" => " shadow",
            Some(other) => panic!("mode {other}"),
        };
        format!("{limit}/{window}{mode}")
    };
    format!(
        "{id}: {} {quota}{}",
        descriptor.join(" "),
        replaces.unwrap_or_default()
    )
}

/// The output is a rule file tollgate loads, with one descriptor rule per `rate_limit`.
#[test]
fn the_rule_file_loads_as_tollgate_reads_it() -> Result<(), MigrationErrors> {
    let text = migrate("config.yaml", REALISTIC)?;
    let file = tollgate_config::RuleFile::parse(
        "migrated.toml",
        &text,
        &tollgate_config::Extractors::new(),
    )
    .unwrap_or_else(|errors| panic!("{errors}\n{text}"));
    let ids: Vec<String> = file
        .descriptor_rules()
        .map(|rule| rule.id().as_str().to_owned())
        .collect();
    let written: Vec<String> = rules(&text)
        .iter()
        .map(|rule| rule["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    let mut sorted = (ids.clone(), written.clone());
    sorted.0.sort();
    sorted.1.sort();
    assert_eq!(sorted.0, sorted.1, "every rule written is loaded");
    assert!(
        file.rules().is_empty(),
        "rules for Envoy only limit no HTTP request"
    );
    Ok(())
}

#[test]
fn the_rule_file_has_the_shape_of_a_tollgate_rule_file() -> Result<(), MigrationErrors> {
    let text = migrate("config.yaml", REALISTIC)?;
    let summaries: Vec<String> = rules(&text).iter().map(summary).collect();
    assert_eq!(
        summaries,
        [
            "per-address: remote_address 20/1m",
            "edge.path_login.user: path=/login user 5/1m shadow replaces per-address",
            "edge.client_internal: client=internal* unlimited",
            "edge.tier_free: tier=free 1/1s",
            "edge.tier_free.plan_hourly: tier=free plan=hourly 100/1h",
            "edge.tier_free.plan_daily: tier=free plan=daily 1000/1d",
            "edge.tier_free.plan_weekly: tier=free plan=weekly 5000/7d",
            "monthly_plan: tier=free plan=monthly 20000/30d",
            "edge.tier_free.plan_yearly: tier=free plan=yearly 200000/365d replaces monthly_plan",
        ]
    );
    Ok(())
}

#[test]
fn windows_line_endings_and_a_byte_order_mark_read_the_same() -> Result<(), MigrationErrors> {
    let windows = format!("\u{feff}{}", REALISTIC.replace('\n', "\r\n"));
    assert_eq!(migrate("config.yaml", &windows)?, REALISTIC_RULES);
    Ok(())
}

/// Rules whose names and made ids are invalid, too long or taken.
const CLASHING: &str = "\
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    value: /a b
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: path
    value: /a_b
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 4, name: edge.remote_address}
  - key: user
    value: a very long value that makes an id of more than sixty-four bytes
    rate_limit: {unit: minute, requests_per_unit: 5, name: 'per user: alice'}
  - key: user
    value: another very long value that makes an id of more than sixty-four bytes
    rate_limit: {unit: minute, requests_per_unit: 6}
  - key: user
    value: another very long value that makes an id of more than sixty-four bytes!
    rate_limit: {unit: minute, requests_per_unit: 7, replaces: [{name: 'per user: alice'}, {name: edge.remote_address}]}
";

#[test]
fn clashing_ids_are_made_valid_and_unique_and_each_change_is_said() -> Result<(), MigrationErrors> {
    let text = migrate("config.yaml", CLASHING)?;
    // After the header, one block per rule: its notes, then its table.
    let rules: Vec<(Vec<&str>, &str)> = text
        .split("\n\n")
        .skip(1)
        .map(|block| {
            let notes = block
                .lines()
                .filter_map(|line| line.strip_prefix("# "))
                .collect();
            let id = block
                .lines()
                .find_map(|line| line.strip_prefix("id = "))
                .unwrap_or_default();
            (notes, id)
        })
        .collect();
    let ids: Vec<&str> = rules.iter().map(|(_, id)| *id).collect();
    assert_eq!(
        ids,
        [
            "\"edge.remote_address-2\"",
            "\"edge.path_a_b\"",
            "\"edge.path_a_b-2\"",
            "\"edge.remote_address\"",
            "\"per_user__alice\"",
            "\"edge.user_another_very_long_value_that_makes_an_id_of_more_than\"",
            "\"edge.user_another_very_long_value_that_makes_an_id_of_more_tha-2\"",
        ]
    );
    let notes: Vec<Vec<&str>> = rules.into_iter().map(|(notes, _)| notes).collect();
    assert_eq!(
        notes,
        [
            vec![
                "the id \"edge.remote_address\" is taken by the rule from line 11: this one is \"edge.remote_address-2\""
            ],
            vec![],
            vec![
                "the id \"edge.path_a_b\" is taken by the rule from line 5: this one is \"edge.path_a_b-2\""
            ],
            vec![],
            vec![
                "the ratelimit name \"per user: alice\" is not a valid rule id (A-Z a-z 0-9 _ - ., at most 64 bytes): this rule's id is \"per_user__alice\""
            ],
            vec!["the id made from the domain and the descriptor is cut to 64 bytes"],
            vec![
                "the id made from the domain and the descriptor is cut to 64 bytes",
                "the id \"edge.user_another_very_long_value_that_makes_an_id_of_more_than\" is taken by the rule from line 16: this one is \"edge.user_another_very_long_value_that_makes_an_id_of_more_tha-2\"",
            ],
        ]
    );
    assert!(text.contains("replaces = [\"per_user__alice\", \"edge.remote_address\"]"));
    Ok(())
}

#[test]
fn ids_are_valid_and_unique() -> Result<(), MigrationErrors> {
    for yaml in [REALISTIC, CLASHING] {
        let text = migrate("config.yaml", yaml)?;
        let ids: Vec<String> = rules(&text)
            .iter()
            .map(|rule| rule["id"].as_str().unwrap_or_default().to_owned())
            .collect();
        for id in &ids {
            assert!(!id.is_empty() && id.len() <= 64, "{id}");
            assert!(
                id.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)),
                "{id}"
            );
        }
        assert_eq!(
            ids.iter().collect::<BTreeSet<_>>().len(),
            ids.len(),
            "{ids:?}"
        );
    }
    Ok(())
}

#[test]
fn settings_with_no_effect_on_limits_are_dropped_with_a_comment() -> Result<(), MigrationErrors> {
    let yaml = "\
domain: edge
descriptors:
  - key: tenant
    value_to_metric: true
    shadow_mode: true
    descriptors:
      - key: user
        detailed_metric: yes
        shadow_mode: true
        rate_limit: {unlimited: true}
";
    assert_eq!(
        migrate("edge.yaml", yaml)?,
        r#"# Generated by tollgate-envoy from the envoyproxy/ratelimit configuration "edge.yaml"
# (domain "edge"): one rule per descriptor with a rate_limit.
# line 3: `value_to_metric: true` is dropped: it only names ratelimit's statistics
# line 3: `shadow_mode: true` is dropped: without a rate_limit it has no effect, in ratelimit too

# `detailed_metric: true` is dropped: it only names ratelimit's statistics
# `shadow_mode: true` is dropped: an unlimited rule never refuses
[[rule]]
id = "edge.tenant.user"
envoy = { domain = "edge", descriptor = [{ key = "tenant" }, { key = "user" }], unlimited = true }
"#
    );
    Ok(())
}

#[test]
fn values_are_read_as_ratelimit_reads_them() -> Result<(), MigrationErrors> {
    // yaml.v2 (YAML 1.1): `yes` is true, an empty or null value is any value, numbers and
    // booleans in text fields are their text, `1_000` is a thousand; `false` is the default.
    let yaml = "\
domain: 42
descriptors:
  - key: a
    value: ~
    shadow_mode: Yes
    quota_mode: false
    share_threshold: off
    metadata: {}
    rate_limit: {unit: SECOND, requests_per_unit: 1_000}
  - key: b
    value: ''
    rate_limit: {unit: second, requests_per_unit: 0x10}
  - key: c
    value: 1.10
    rate_limit: {unit: second, requests_per_unit: +3, name: null}
";
    let summaries: Vec<String> = rules(&migrate("config.yaml", yaml)?)
        .iter()
        .map(|rule| {
            let envoy = &rule["envoy"];
            format!("{} {} {}", rule["id"], envoy["descriptor"], rule["limit"])
        })
        .collect();
    assert_eq!(
        summaries,
        [
            r#""42.a" [{ key = "a" }] 1000"#,
            r#""42.b" [{ key = "b" }] 16"#,
            r#""42.c_1.10" [{ key = "c", value = "1.10" }] 3"#,
        ]
    );
    Ok(())
}

/// Each refusal: the YAML, and the whole report.
const REFUSALS: &[(&str, &str)] = &[
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit:\n      uint: minute\n      requests_per_unit: 5\n",
        "config.yaml:5:7: unknown field `uint` in a rate_limit (did you mean `unit`?): ratelimit refuses unknown fields; a rate_limit has `unit`, `requests_per_unit`, `unlimited`, `name`, `replaces`\n\
         config.yaml:5:7: this rate_limit has no `unit`: add one of second, minute, hour, day, week, month, year (or `unlimited: true`)",
    ),
    (
        "domain: edge\ndescriptor:\n  - key: a\n",
        // Only the cause: that no rule is left to write follows from it.
        "config.yaml:2:1: unknown field `descriptor` in the file's top level (did you mean `descriptors`?): ratelimit refuses unknown fields; the file's top level has `domain`, `descriptors`",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    unit: minute\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:4:5: `unit` belongs in a descriptor's `rate_limit`, not in a descriptor: ratelimit ignores it here; move it or remove it",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: path\n    value: /api/*/users\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:4:12: the `*` in value \"/api/*/users\" is not at its end: ratelimit matches it anywhere, and tollgate knows only a trailing `*` (a prefix); use a prefix, or one descriptor per value",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: head*\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:3:10: key \"head*\" has a `*`, which ratelimit reads as a wildcard over keys, and tollgate matches keys exactly: name the key in full (a wildcard goes in `value`)",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n",
        "config.yaml:5:7: this rate_limit has no `requests_per_unit`: ratelimit takes that as 0, which refuses every request, and a tollgate limit is at least 1; add `requests_per_unit: <n>` (or `unlimited: true`)",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n      requests_per_unit: 0\n",
        "config.yaml:6:26: `requests_per_unit: 0` refuses every request, and a tollgate limit is at least 1: set 1 or more, or refuse these requests in Envoy itself",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n      requests_per_unit: \"5\"\n",
        "config.yaml:6:26: `requests_per_unit` must be a whole number (unquoted), not the quoted text \"5\"",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n      requests_per_unit: 010\n",
        "config.yaml:6:26: `requests_per_unit: 010` starts with a zero, which ratelimit's YAML 1.1 loader reads as an octal number: write it in decimal without the leading zero",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n      requests_per_unit: 4294967296\n",
        "config.yaml:6:26: `requests_per_unit: 4294967296` is more than ratelimit reads (a 32-bit number): write at most 4294967295",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minutes\n      requests_per_unit: 5\n",
        "config.yaml:5:13: unknown unit \"minutes\" (did you mean \"minute\"?): use one of second, minute, hour, day, week, month, year",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit:\n      requests_per_unit: 5\n",
        "config.yaml:5:7: this rate_limit has no `unit`: add one of second, minute, hour, day, week, month, year (or `unlimited: true`)",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: minute\n      requests_per_unit: 5\n",
        "config.yaml:6:13: `unit` cannot go with `unlimited: true`: an unlimited descriptor has no quota; remove `unit`, or `unlimited`\n\
         config.yaml:7:26: `requests_per_unit` cannot go with `unlimited: true`: an unlimited descriptor has no quota; remove `requests_per_unit`, or `unlimited`",
    ),
    (
        "domain: edge\ndescriptors:\n  - value: a\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:3:5: this descriptor has no `key`: every descriptor needs one, the key of the Envoy descriptor entry it matches; add `key: <key>`",
    ),
    (
        "descriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:1:1: the file has no `domain`: ratelimit needs one, and each rule names it for Envoy; add `domain: <the domain Envoy sends>`",
    ),
    (
        "domain: \"\"\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:1:9: `domain` is empty: give the domain Envoy sends",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    value: b\n    rate_limit: {unit: minute, requests_per_unit: 5}\n  - key: a\n    value: b\n    rate_limit: {unit: hour, requests_per_unit: 50}\n",
        "config.yaml:6:5: a descriptor with key \"a\" and value \"b\" is already in this list (line 3), and ratelimit refuses to load both: merge the two",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    value: b\n    rate_limit: {unit: minute, requests_per_unit: 5}\n  - key: a_b\n    rate_limit: {unit: hour, requests_per_unit: 50}\n",
        "config.yaml:6:5: ratelimit joins key and value with `_`, so this descriptor and the one at line 3 share a name and ratelimit refuses to load both: rename one key",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n   rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:4:4: the YAML cannot be read (while parsing a block collection, did not find expected '-' indicator); ratelimit would not load it either: fix the syntax",
    ),
    (
        "domain: edge\ndomain: other\ndescriptors: []\n",
        "config.yaml:2:1: this field is given twice in the same mapping, which YAML forbids: keep one",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5}\n---\ndomain: other\n",
        "config.yaml:6:1: a second YAML document starts here, and ratelimit reads one document per file: put it in a file of its own and migrate each file",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    quota_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:4:17: `quota_mode: true` (over the limit only when all of a request's quota descriptors are) has no tollgate equivalent: remove it to enforce this limit, or use `shadow_mode: true` to only watch it",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    value: b*\n    share_threshold: true\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:5:22: `share_threshold: true` (every value matching the wildcard shares one count) has no tollgate equivalent, where each value is counted on its own: remove it to count each value apart, or list the values",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    metadata: {team: edge}\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:4:15: `metadata` (a mapping, sent back to Envoy with the descriptor's status) has no tollgate equivalent: remove it, and set the metadata in Envoy if it is needed",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5, name: per-a}\n  - key: b\n    rate_limit:\n      unit: minute\n      requests_per_unit: 5\n      replaces:\n        - name: per_a\n",
        "config.yaml:10:11: no rate_limit in this file is named \"per_a\" (did you mean \"per-a\"?): `replaces` refers to another rate_limit's `name`; fix the name or remove the entry",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n      requests_per_unit: 5\n      name: per-a\n      replaces:\n        - name: per-a\n",
        "config.yaml:9:11: a rate_limit cannot replace itself (\"per-a\"), and ratelimit refuses this too: remove the entry",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: minute\n      requests_per_unit: 5\n      replaces:\n        - {}\n",
        "config.yaml:8:11: this `replaces` entry has no `name`: give the `name` of the rate_limit this one replaces, or remove the entry",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    shadow_mode: sometimes\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:4:18: `shadow_mode` must be true or false (unquoted), not \"sometimes\"",
    ),
    (
        "domain: edge\ndescriptors:\n  - remote_address\n",
        "config.yaml:3:5: a descriptor must be a mapping of fields (`key`, `value`, `rate_limit`, `descriptors`, `shadow_mode`, `detailed_metric`, `value_to_metric`, `quota_mode`, `share_threshold`, `metadata`), not \"remote_address\"",
    ),
    (
        "domain: edge\ndescriptors:\n  key: a\n",
        "config.yaml:3:3: `descriptors` must be a list, not a mapping",
    ),
    (
        "domain: !!str edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        "config.yaml:1:9: `domain` must be text, not a value tagged `!!str` (tags are not read: write the value alone)",
    ),
    (
        "domain: edge\ndescriptors:\n  - &base\n    key: a\n    rate_limit: {unit: minute, requests_per_unit: 5}\n  - <<: *base\n    key: b\n",
        "config.yaml:6:5: YAML merge keys (`<<`) are not read: write the fields out in full",
    ),
    (
        "",
        "config.yaml:1:1: the file is empty: a ratelimit configuration has a `domain` and its `descriptors`",
    ),
    (
        "- domain: edge\n",
        "config.yaml:1:1: the file's top level must be a mapping of fields (`domain`, `descriptors`), not a list",
    ),
    (
        "domain: edge\ndescriptors:\n  - key: a\n    value: b\n",
        "config.yaml:1:1: no descriptor in the file has a `rate_limit`, so there is no rule to write, and an empty tollgate rule file is refused: add a rate_limit, or leave this file out",
    ),
];

#[test]
fn each_refusal_is_at_its_line_and_column_with_what_to_do() {
    for (yaml, expected) in REFUSALS {
        assert_eq!(refused(yaml), *expected, "for:\n{yaml}");
    }
}

#[test]
fn every_problem_is_reported_not_only_the_first() {
    let yaml = one(
        "    value: x*y\n    rate_limit: {unit: fortnight, requests_per_unit: 0, replaces: [{name: nobody}]}\n    descriptors:\n      - value: b\n        quota_mode: true\n        rate_limit: {unlimited: true, unit: hour}\n",
    );
    let report = refused(&yaml);
    let places: Vec<String> = report
        .lines()
        .map(|line| line.splitn(4, ':').take(3).collect::<Vec<_>>().join(":"))
        .collect();
    assert_eq!(
        places,
        [
            "config.yaml:4:12",
            "config.yaml:5:24",
            "config.yaml:5:54",
            "config.yaml:5:68",
            "config.yaml:7:9",
            "config.yaml:8:21",
            "config.yaml:9:45",
        ],
        "{report}"
    );
}

#[test]
fn a_deep_nesting_is_refused_at_the_list_that_goes_too_deep() {
    let mut yaml = String::from("domain: edge\ndescriptors:\n");
    for depth in 0..40 {
        let indent = "  ".repeat(2 * depth);
        yaml.push_str(&format!(
            "{indent}  - key: k{depth}\n{indent}    descriptors:\n"
        ));
    }
    let report = refused(&yaml);
    assert!(
        report.starts_with("config.yaml:67:131: descriptors are nested more than 32 deep here"),
        "{report}"
    );
}

#[test]
fn every_truncation_and_every_deleted_character_is_answered() {
    let boundaries: Vec<usize> = REALISTIC.char_indices().map(|(at, _)| at).collect();
    for &at in &boundaries {
        let _ = migrate("cut.yaml", &REALISTIC[..at]);
        let mut without = REALISTIC.to_owned();
        without.remove(at);
        let _ = migrate("cut.yaml", &without);
    }
}

/// Pieces of YAML syntax and of ratelimit's format, to splice into a valid file.
const PIECES: &[&str] = &[
    ":",
    "- ",
    "-",
    "{",
    "}",
    "[",
    "]",
    ",",
    "*",
    "&a ",
    "*a",
    "!!str ",
    "!x ",
    "\n",
    "  ",
    "\t",
    "'",
    "\"",
    "#",
    "---\n",
    "...\n",
    "<<: ",
    "~",
    "?",
    "|",
    ">",
    "%YAML 1.2\n",
    "0",
    "0x",
    "1_",
    "key: ",
    "value: ",
    "rate_limit: ",
    "descriptors:\n",
    "unit: ",
    "requests_per_unit: ",
    "unlimited: true",
    "replaces: ",
    "name: ",
    "\u{feff}",
    "é",
    "\u{0}",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_is_answered_without_panicking(text in ".{0,400}") {
        let _ = migrate("fuzz.yaml", &text);
    }

    #[test]
    fn a_valid_file_spliced_with_yaml_pieces_is_answered_without_panicking(
        splices in proptest::collection::vec((0..REALISTIC.len(), 0..PIECES.len(), 0usize..4), 1..6),
    ) {
        let mut text = REALISTIC.to_owned();
        for (at, piece, cut) in splices {
            let mut at = at.min(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            let mut end = (at + cut).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            text.replace_range(at..end, PIECES[piece]);
        }
        let _ = migrate("fuzz.yaml", &text);
    }
}
