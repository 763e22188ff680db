//! `per_message = true` from a file: the rule charges each inbound gRPC message (with the
//! `grpc` feature), and the combinations messages cannot be counted with are mistakes at their
//! line and column; without the feature the field is a mistake that says which feature reads
//! messages, never a rule counted per call without a word.

mod config_common;

use tollgate_config::Extractors;
#[cfg(feature = "grpc")]
use tollgate_config::RuleFile;

fn rule_with(extra: &str) -> String {
    format!(
        "[[rule]]\nid = \"chunks\"\nmatch = {{ grpc = \"files.v1.Uploads/Put\" }}\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow = \"1m\"\nkey = \"global\"\nper_message = true\n{extra}"
    )
}

#[cfg(feature = "grpc")]
#[test]
fn per_message_true_makes_a_rule_that_charges_each_message() {
    let file = RuleFile::parse("rules.toml", &rule_with(""), &Extractors::new())
        .unwrap_or_else(|errors| panic!("{errors}"));
    let rule = file.rules().rules().next().expect("one rule");
    assert!(rule.is_per_message());
    assert!(
        file.to_toml().contains("per_message = true"),
        "written back as given"
    );

    let off = rule_with("").replace("per_message = true", "per_message = false");
    let file = RuleFile::parse("rules.toml", &off, &Extractors::new())
        .unwrap_or_else(|errors| panic!("{errors}"));
    assert!(
        !file
            .rules()
            .rules()
            .next()
            .expect("one rule")
            .is_per_message()
    );
}

#[cfg(feature = "grpc")]
#[test]
fn what_messages_cannot_be_counted_with_is_a_mistake_at_its_line() {
    let cases = [
        ("settle = \"reported\"\n", "settled cost"),
        ("count_only_when = \"server_errors\"\n", "count_only_when"),
        (
            "escalate = { after_refusals = 3, within = \"1m\", block_for = \"1h\" }\n",
            "escalate",
        ),
    ];
    for (extra, message) in cases {
        let found = config_common::config_errors(&rule_with(extra), &Extractors::new());
        assert!(
            found
                .iter()
                .any(|error| error.starts_with("8:15: ") && error.contains(message)),
            "{extra}: {found:?}"
        );
    }
    let concurrency = "[[rule]]\nid = \"chunks\"\nalgorithm = \"concurrency\"\nlimit = 4\nkey = \"global\"\nper_message = true\n";
    let found = config_common::config_errors(concurrency, &Extractors::new());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("6:15: ") && found[0].contains("concurrency"),
        "{found:?}"
    );
    let found = config_common::config_errors(
        &rule_with("").replace("true", "\"yes\""),
        &Extractors::new(),
    );
    assert!(found[0].contains("per_message"), "{found:?}");
}

#[cfg(not(feature = "grpc"))]
#[test]
fn without_the_grpc_feature_per_message_is_a_mistake_naming_the_feature() {
    let found = config_common::config_errors(&rule_with(""), &Extractors::new());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("8:15: ") && found[0].contains("`grpc` feature"),
        "{found:?}"
    );
}
