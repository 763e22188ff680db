//! `alert_at` in a rule file: the share of its limit at which a rule alerts, as a decimal
//! number or a percentage, written back as given, alerting through the layer like a rule built
//! in code; values that are no share are mistakes at their line and column.

mod config_common;

use std::convert::Infallible;
use std::time::Duration;

use http::{Request, Response};
use tollgate_config::{Extractors, RuleFile};
use tollgate_core::{MemoryStore, Timestamp};
use tollgate_testing::ManualClock;
use tollgate_tower::{AlertShare, RateLimitLayer};
use tower::{Layer, ServiceExt, service_fn};

/// The global cap on one-time codes, with `alert_at` written as `alert_at` (line 8).
fn cap(alert_at: &str) -> String {
    format!(
        "[[rule]]\nid = \"otp-global\"\nmatch = {{ method = \"POST\", path = \"/otp\" }}\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"1m\"\nkey = \"global\"\nalert_at = {alert_at}\n"
    )
}

fn parse(text: &str) -> RuleFile {
    RuleFile::parse("rules.toml", text, &Extractors::new())
        .unwrap_or_else(|errors| panic!("a valid file:\n{errors}"))
}

fn share_of(file: &RuleFile) -> Option<AlertShare> {
    file.rules().rules().next().expect("one rule").alert_at()
}

#[test]
fn a_share_is_a_decimal_number_or_a_percentage() {
    let eighty = AlertShare::new(0.8).expect("valid");
    for written in ["0.8", "\"80%\"", "\"80 %\"", "\" 80% \""] {
        assert_eq!(share_of(&parse(&cap(written))), Some(eighty), "{written}");
    }
    assert_eq!(
        share_of(&parse(&cap("\"82.5%\""))),
        Some(AlertShare::new(0.825).expect("valid"))
    );
    assert_eq!(
        share_of(&parse(&cap("1"))),
        Some(AlertShare::new(1.0).expect("valid")),
        "the whole limit: alerts at the first refusal"
    );
    let without = cap("0.8").replace("alert_at = 0.8\n", "");
    assert_eq!(share_of(&parse(&without)), None);
}

#[test]
fn alert_at_is_written_back_as_given() {
    for written in ["0.8", "\"80%\""] {
        let file = parse(&cap(written));
        let toml = file.to_toml();
        assert!(
            toml.contains(&format!("alert_at = {written}")),
            "{written}: {toml}"
        );
        assert_eq!(
            share_of(&parse(&toml)),
            share_of(&file),
            "loads again alike"
        );
    }
}

#[test]
fn values_that_are_no_share_are_mistakes_at_their_line_and_column() {
    let cases = [
        ("80", "did you mean \"80%\"?"),
        ("1.5", "not above 0 and at most the whole limit"),
        ("0", "not above 0"),
        ("0.0", "not above 0"),
        ("-0.2", "not above 0"),
        ("\"120%\"", "not above 0"),
        ("\"0%\"", "not above 0"),
        ("\"eighty\"", "\"eighty\" is not a share of the limit"),
        ("\"80\"", "\"80\" is not a share of the limit"),
        ("true", "not a boolean"),
        ("{ share = 0.8 }", "not a table"),
    ];
    for (written, message) in cases {
        let found = config_common::config_errors(&cap(written), &Extractors::new());
        assert_eq!(found.len(), 1, "{written}: {found:?}");
        // A string's place is its text's, inside the quotes.
        let at = if written.starts_with('"') {
            "8:13: "
        } else {
            "8:12: "
        };
        assert!(
            found[0].starts_with(at) && found[0].contains(message),
            "{written}: {found:?}"
        );
    }
    let typo = cap("0.8").replace("alert_at", "alert_on");
    let found = config_common::config_errors(&typo, &Extractors::new());
    assert!(
        found[0].starts_with("8:1: ") && found[0].contains("did you mean `alert_at`?"),
        "{found:?}"
    );
}

#[test]
fn a_rule_for_envoy_only_cannot_alert() {
    let text = "[[rule]]\nid = \"edge\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"remote_address\" }] }\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow = \"1m\"\nalert_at = 0.8\n";
    let found = config_common::config_errors(text, &Extractors::new());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("7:12: ") && found[0].contains("Envoy only"),
        "{found:?}"
    );
}

#[tokio::test]
async fn a_rule_from_a_file_alerts_as_one_built_in_code() {
    let clock = ManualClock::new(Timestamp::from_secs(1_800_000_000));
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let layer = RateLimitLayer::new(store).alert_clock(clock.clone());
    parse(&cap("\"80%\""))
        .install(&layer)
        .expect("the memory store counts it");
    let handle = layer.handle();
    let service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(()))
    }));
    for sent in 1..=8 {
        assert!(handle.alerts().is_empty(), "before code {sent}");
        let request = Request::post("/otp").body(()).expect("a request");
        let response = service.clone().oneshot(request).await.expect("infallible");
        assert!(response.status().is_success());
    }
    let alerts = handle.alerts();
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].rule.as_str(), "otp-global");
    assert_eq!(alerts[0].reached, 0.8);
    clock.advance(Duration::from_secs(60));
    assert!(handle.alerts().is_empty(), "the window is over");
}
