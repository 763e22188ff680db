//! `migrate` with hostile YAML — alias bombs, deep nesting of every kind, huge numbers,
//! duplicate names, odd characters. It must never panic, locate every refusal, and what it
//! accepts must load in tollgate as the same descriptors.

use tollgate_config::{Extractors, RuleFile, ValueMatch};
use tollgate_envoy::migrate::migrate;

fn located(yaml: &str) -> String {
    match migrate("c.yaml", yaml) {
        Ok(rules) => panic!("accepted:\n{yaml}\n→\n{rules}"),
        Err(errors) => {
            assert!(!errors.is_empty());
            for error in errors.iter() {
                assert!(error.line() >= 1 && error.column() >= 1, "{error}");
                assert!(!error.message().is_empty());
            }
            errors.to_string()
        }
    }
}

fn loads(yaml: &str) -> RuleFile {
    let rules = migrate("c.yaml", yaml).unwrap_or_else(|errors| panic!("{errors}\n{yaml}"));
    RuleFile::parse("out.toml", &rules, &Extractors::new())
        .unwrap_or_else(|errors| panic!("{errors}\n{rules}"))
}

#[test]
fn an_alias_bomb_is_answered_quickly() {
    let mut yaml = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12 {
        let previous = level - 1;
        yaml.push_str(&format!(
            "a{level}: &a{level} [*a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}]\n"
        ));
    }
    yaml.push_str("domain: edge\ndescriptors:\n  - key: k\n    value: *a11\n    rate_limit: {unit: second, requests_per_unit: 1}\n");
    let started = std::time::Instant::now();
    let _ = migrate("bomb.yaml", &yaml);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // An alias as a descriptor list, repeated: each use is a copy.
    let yaml = "domain: edge\ndescriptors: &d\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    descriptors: *d\n";
    let _ = migrate("recursive.yaml", yaml);
}

/// Runs `yaml` through `migrate` on a thread with the main thread's usual stack (8 MiB), as the
/// `tollgate-envoy migrate` command does.
fn on_main_sized_stack(yaml: String) {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            let _ = migrate("deep.yaml", &yaml);
        })
        .expect("a thread")
        .join()
        .expect("answered");
}

#[test]
fn deep_flow_lists_never_overflow_the_stack() {
    for depth in [1_000, 100_000] {
        on_main_sized_stack(format!(
            "domain: edge\nx: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        ));
    }
}

#[test]
fn deep_flow_mappings_never_overflow_the_stack() {
    for depth in [1_000, 100_000] {
        on_main_sized_stack(format!(
            "domain: edge\nx: {}{}\n",
            "{a: ".repeat(depth),
            "}".repeat(depth)
        ));
    }
}

#[test]
fn deep_block_mappings_never_overflow_the_stack() {
    let mut block = String::from("domain: edge\n");
    for depth in 0..20_000 {
        block.push_str(&" ".repeat(depth));
        block.push_str("a:\n");
    }
    on_main_sized_stack(block);
}

#[test]
fn deep_block_lists_never_overflow_the_stack() {
    let mut lists = String::from("domain: edge\ndescriptors:\n");
    for depth in 0..20_000 {
        lists.push_str(&" ".repeat(depth));
        lists.push_str("-\n");
    }
    on_main_sized_stack(lists);
}

#[test]
fn deep_one_line_lists_are_refused_where_they_go_too_deep() {
    let yaml = format!("domain: edge\ndescriptors:\n{}x\n", "- ".repeat(50_000));
    let errors = located(&yaml);
    assert!(errors.starts_with("c.yaml:3:"), "{errors}");
    assert!(errors.contains("nested more than"), "{errors}");
}

#[test]
fn a_chain_of_aliases_never_overflows_the_stack() {
    let mut yaml = String::from("a0: &a0 [x]\n");
    for level in 1..50_000 {
        yaml.push_str(&format!("a{level}: &a{level} [*a{}]\n", level - 1));
    }
    yaml.push_str("domain: edge\n");
    on_main_sized_stack(yaml);
}

#[test]
fn deep_descriptors_never_overflow_the_stack() {
    let mut yaml = String::from("domain: edge\ndescriptors:\n");
    for depth in 0..5_000 {
        let indent = "  ".repeat(2 * depth);
        yaml.push_str(&format!("{indent}  - key: k\n{indent}    descriptors:\n"));
    }
    on_main_sized_stack(yaml);
}

#[test]
fn huge_and_odd_numbers_are_refused_where_they_are() {
    let cases = [
        "99999999999999999999999999",
        "4294967296",
        "-1",
        "0",
        "1e3",
        "0x10",
        "1.5",
        ".inf",
        "'20'",
        "[20]",
        "{a: 1}",
        "true",
    ];
    for number in cases {
        let yaml = format!(
            "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {{unit: minute, requests_per_unit: {number}}}\n"
        );
        match migrate("c.yaml", &yaml) {
            Ok(rules) => {
                // Accepted: then it must be the number ratelimit (yaml.v2 into a uint32) reads.
                let file = RuleFile::parse("out.toml", &rules, &Extractors::new())
                    .unwrap_or_else(|errors| panic!("{errors}\n{rules}"));
                let limit = file
                    .descriptor_rules()
                    .next()
                    .and_then(|rule| rule.rule())
                    .map(|rule| rule.quota().limit());
                eprintln!("{number} accepted as {limit:?}");
                assert!(
                    matches!(number, "4294967295" | "0x10" | "1e3" | "'20'"),
                    "{number} accepted:\n{rules}"
                );
            }
            Err(errors) => {
                let text = errors.to_string();
                assert!(text.starts_with("c.yaml:4:"), "{number}: {text}");
            }
        }
    }
    let yaml = "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 4294967295}\n";
    let file = loads(yaml);
    assert_eq!(
        file.descriptor_rules()
            .next()
            .and_then(|rule| rule.rule())
            .map(|rule| rule.quota().limit()),
        Some(4_294_967_295)
    );
}

#[test]
fn duplicate_names_and_replaces_are_answered() {
    // Two rate_limits of one name: ids are made unique; `replaces` by that name is ambiguous.
    let yaml = "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {name: n, unit: minute, requests_per_unit: 1}\n  - key: b\n    rate_limit: {name: n, unit: minute, requests_per_unit: 2}\n  - key: c\n    rate_limit: {unit: minute, requests_per_unit: 3, replaces: [{name: n}]}\n";
    match migrate("c.yaml", yaml) {
        Ok(rules) => {
            let file = RuleFile::parse("out.toml", &rules, &Extractors::new())
                .unwrap_or_else(|errors| panic!("{errors}\n{rules}"));
            let replaced: Vec<String> = file
                .descriptor_rules()
                .flat_map(|rule| {
                    rule.matcher()
                        .replaces()
                        .iter()
                        .map(|id| id.as_str().to_owned())
                })
                .collect();
            eprintln!("{rules}");
            // ratelimit replaces every rate_limit of that name.
            assert_eq!(replaced.len(), 2, "{rules}");
        }
        Err(errors) => {
            let text = errors.to_string();
            assert!(text.starts_with("c.yaml:"), "{text}");
        }
    }
    // A name naming itself, and a name clashing with a made id.
    let yaml = "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {name: edge.b, unit: minute, requests_per_unit: 1}\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 2}\n";
    let file = loads(yaml);
    let ids: Vec<&str> = file
        .descriptor_rules()
        .map(|rule| rule.id().as_str())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    let yaml = "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {name: x, unit: minute, requests_per_unit: 1, replaces: [{name: x}]}\n";
    let _ = located(yaml);
}

#[test]
fn odd_characters_survive_the_trip_to_toml() {
    let values = [
        "a\"b",
        "back\\slash",
        "tab\there",
        "new\nline",
        "ключ",
        "🦀",
        "''' triple",
        "\"\"\" triple",
        "#not a comment",
        "\u{7f}del",
        "zero\u{0}width",
    ];
    for value in values {
        let yaml_value = serde_json::to_string(value).expect("a JSON string is a YAML string");
        let yaml = format!(
            "domain: \"dom {yaml_inner}\"\ndescriptors:\n  - key: {yaml_value}\n    value: {yaml_value}\n    rate_limit: {{unit: minute, requests_per_unit: 1}}\n",
            yaml_inner = &yaml_value[1..yaml_value.len() - 1]
        );
        let Ok(rules) = migrate("c.yaml", &yaml) else {
            continue; // refused, located (checked elsewhere)
        };
        let file = RuleFile::parse("out.toml", &rules, &Extractors::new())
            .unwrap_or_else(|errors| panic!("{value:?}: {errors}\n{rules}"));
        let rule = file.descriptor_rules().next().expect("one rule");
        let entry = &rule.matcher().entries()[0];
        assert_eq!(entry.key(), value, "{rules}");
        assert_eq!(
            entry.value(),
            &ValueMatch::Exact(value.to_owned()),
            "{rules}"
        );
        assert_eq!(rule.matcher().domain(), format!("dom {value}"), "{rules}");
    }
}

/// ratelimit matches wildcards in the order written, the first that fits winning; an unlimited
/// wildcard written before a limited one of the same level exempts what it matches. Migrated,
/// the same file must exempt the same values.
#[test]
fn a_migrated_exemption_written_first_still_exempts() {
    let yaml = "domain: edge\ndescriptors:\n  - key: client\n    value: internal-*\n    rate_limit: {unlimited: true}\n  - key: client\n    value: in*\n    rate_limit: {unit: minute, requests_per_unit: 1}\n";
    let file = loads(yaml);
    // The service's choice, as the table makes it: the first of the most specific in
    // `descriptor_rules` order.
    let winner = file
        .descriptor_rules()
        .filter(|rule| {
            rule.matcher()
                .matches([("client", "internal-billing")].into_iter())
        })
        .fold(
            None::<tollgate_config::DescriptorRule<'_>>,
            |best, rule| match best {
                Some(best) if best.matcher().specificity() >= rule.matcher().specificity() => {
                    Some(best)
                }
                _ => Some(rule),
            },
        )
        .expect("a rule");
    assert!(
        winner.matcher().is_unlimited(),
        "{} wins for internal-billing:\n{}",
        winner.id().as_str(),
        file.to_toml()
    );
}
