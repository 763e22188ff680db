//! Rules for Envoy's descriptors from a file: `envoy = { domain, descriptor }`, with or without
//! an HTTP `match`, unlimited rules, `replaces`, and every wrong form a mistake at its line and
//! column.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Empty;
use tollgate_config::{Extractors, RuleFile, ValueMatch};
use tollgate_core::MemoryStore;
use tollgate_tower::RateLimitLayer;
use tower::{Layer, ServiceExt, service_fn};

const QUOTA: &str = "algorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\n";

fn parse(text: &str) -> RuleFile {
    RuleFile::parse("rules.toml", text, &Extractors::new())
        .unwrap_or_else(|errors| panic!("{errors}"))
}

fn mistakes(text: &str) -> String {
    match RuleFile::parse("rules.toml", text, &Extractors::new()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(errors) => errors.to_string(),
    }
}

#[test]
fn entries_are_exact_prefix_or_any_value_and_remote_address_is_an_address() {
    let file = parse(&format!(
        "[[rule]]\nid = \"login\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"path\", value = \"/login\" }}, {{ key = \"client\", value = \"app-*\" }}, {{ key = \"remote_address\" }}, {{ key = \"user\" }}] }}\n{QUOTA}"
    ));
    let rule = file.descriptor_rules().next().expect("a descriptor rule");
    let entries = rule.matcher().entries();
    assert_eq!(entries[0].value(), &ValueMatch::Exact("/login".into()));
    assert_eq!(entries[1].value(), &ValueMatch::Prefix("app-".into()));
    assert_eq!(entries[2].value(), &ValueMatch::Any);
    assert!(entries[2].is_address() && !entries[3].is_address());
    // The caller is named by the values of the entries that are not exact.
    let request = [
        ("path", "/login"),
        ("client", "app-ios"),
        ("remote_address", "2001:db8::1"),
        ("user", "alice"),
    ];
    assert!(rule.matcher().matches(request.iter().copied()));
    let values: Vec<&str> = rule
        .matcher()
        .key_values(request.iter().map(|(_, value)| *value))
        .collect();
    assert_eq!(values, ["app-ios", "2001:db8::1", "alice"]);
    let counting = rule.rule().expect("a counting rule");
    let key = counting.key_of_values(&values).expect("a key");
    let same_block = counting
        .key_of_values(&["app-ios", "2001:db8::ffff", "alice"])
        .expect("a key");
    assert_eq!(key, same_block, "an IPv6 address counts by its /64");
}

/// How many of 8 requests to `/api/x` pass the file's HTTP rules (a limit of 5).
async fn passing_http(file: &RuleFile) -> usize {
    let layer = RateLimitLayer::new(MemoryStore::new());
    layer
        .handle()
        .replace_rules(file.rules().clone())
        .expect("memory counts these rules");
    let service = layer.layer(service_fn(|_: http::Request<()>| async {
        Ok::<_, Infallible>(http::Response::new(Empty::<Bytes>::new()))
    }));
    let mut passed = 0;
    for _ in 0..8 {
        let request = http::Request::builder()
            .uri("/api/x")
            .body(())
            .expect("a request");
        let response = service.clone().oneshot(request).await.expect("infallible");
        passed += usize::from(response.status() == http::StatusCode::OK);
    }
    passed
}

#[tokio::test]
async fn a_rule_for_envoy_only_limits_no_http_request_and_one_with_match_limits_both() {
    let envoy_only = parse(&format!(
        "[[rule]]\nid = \"edge\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"generic_key\", value = \"api\" }}] }}\n{QUOTA}"
    ));
    assert!(
        envoy_only.rules().is_empty(),
        "no `match`: not an HTTP rule"
    );
    assert_eq!(envoy_only.descriptor_rules().count(), 1);

    let both = parse(&format!(
        "[[rule]]\nid = \"api\"\nmatch = {{ path = \"/api/{{*rest}}\" }}\nkey = \"global\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"generic_key\", value = \"api\" }}] }}\n{QUOTA}"
    ));
    assert_eq!(passing_http(&both).await, 5);
    assert_eq!(both.descriptor_rules().count(), 1);
    // The rule's own key names the caller: `global` takes no value.
    let rule = both
        .descriptor_rules()
        .next()
        .and_then(|rule| rule.rule())
        .expect("counting");
    assert!(rule.key_of_values(&[]).is_ok());
}

#[test]
fn envoy_rules_are_written_back_and_load_again_alike() {
    let text = format!(
        "[[rule]]\nid = \"edge\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"remote_address\" }}], replaces = [\"open\"] }}\nmode = \"shadow\"\n{QUOTA}\n[[rule]]\nid = \"open\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"client\", value = \"internal-*\" }}], unlimited = true }}\n"
    );
    let file = parse(&text);
    let again = parse(&file.to_toml());
    assert_eq!(again.to_toml(), file.to_toml());
    let ids: Vec<&str> = again
        .descriptor_rules()
        .map(|rule| rule.id().as_str())
        .collect();
    assert_eq!(ids, ["edge", "open"]);
    let edge = again.descriptor_rules().next().expect("edge");
    assert_eq!(
        edge.matcher()
            .replaces()
            .iter()
            .map(|id| id.as_str())
            .collect::<Vec<_>>(),
        ["open"]
    );
    assert_eq!(
        edge.rule().map(|rule| rule.mode()),
        Some(tollgate_core::Mode::Shadow)
    );
    assert!(
        again
            .descriptor_rules()
            .nth(1)
            .is_some_and(|rule| rule.matcher().is_unlimited() && rule.rule().is_none())
    );
    assert!(
        file.rule_toml("open")
            .is_some_and(|toml| toml.contains("unlimited = true"))
    );
}

#[test]
fn a_document_replaces_descriptor_rules_by_id_unlimited_ones_too() {
    let local = parse(&format!(
        "[[rule]]\nid = \"a\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"k\" }}] }}\n{QUOTA}\n[[rule]]\nid = \"b\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"j\" }}], unlimited = true }}\n"
    ));
    let fleet = parse(&format!(
        "[[rule]]\nid = \"a\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"k\" }}], unlimited = true }}\n[[rule]]\nid = \"b\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"j\" }}] }}\n{QUOTA}"
    ));
    let merged = local.overridden_by(&fleet);
    let read: Vec<(&str, bool)> = merged
        .descriptor_rules()
        .map(|rule| (rule.id().as_str(), rule.rule().is_none()))
        .collect();
    // Each takes the place of the rule it replaces: the first written stays first.
    assert_eq!(read, [("a", true), ("b", false)]);
    let without = merged.without("a");
    assert_eq!(without.descriptor_rules().count(), 1);
}

#[test]
fn wrong_descriptor_rules_are_mistakes_at_their_line() {
    let rule = |envoy: &str, rest: &str| format!("[[rule]]\nid = \"r\"\nenvoy = {envoy}\n{rest}");
    let cases = [
        (
            rule("{ descriptor = [{ key = \"k\" }] }", QUOTA),
            "3:9",
            "needs `domain`",
        ),
        (
            rule("{ domain = \"\", descriptor = [{ key = \"k\" }] }", QUOTA),
            "3:20",
            "`domain` is empty",
        ),
        (
            rule("{ domain = \"edge\", descriptor = [] }", QUOTA),
            "3:41",
            "no entries",
        ),
        (
            rule(
                "{ domain = \"edge\", descriptor = [{ value = \"v\" }] }",
                QUOTA,
            ),
            "3:42",
            "needs `key`",
        ),
        (
            rule(
                "{ domain = \"edge\", descriptor = [{ key = \"k\", value = \"a*b\" }] }",
                QUOTA,
            ),
            "3:64",
            "before its end",
        ),
        (
            rule(
                "{ domain = \"edge\", descriptor = [{ key = \"remote_address\", value = \"10.0.0.1\" }] }",
                QUOTA,
            ),
            "3:42",
            "address with a `value`",
        ),
        (
            rule(
                "{ domain = \"edge\", descriptor = [{ key = \"k\", valeu = \"v\" }] }",
                QUOTA,
            ),
            "3:55",
            "did you mean `value`",
        ),
        (
            rule(
                "{ domain = \"edge\", descriptor = [{ key = \"k\" }], replaces = [\"nobody\"] }",
                QUOTA,
            ),
            "3:71",
            "no rule with `envoy`",
        ),
        (
            rule(
                "{ domain = \"edge\", descriptor = [{ key = \"k\" }] }",
                "algorithm = \"pacing\"\nrate = { amount = 1, per = \"1s\" }\nmax_delay = \"1s\"\n",
            ),
            "4:14",
            "cannot use \"pacing\"",
        ),
        (
            rule(
                "{ domain = \"edge\", descriptor = [{ key = \"k\" }] }",
                "algorithm = \"concurrency\"\nlimit = 3\n",
            ),
            "4:14",
            "cannot use \"concurrency\"",
        ),
        (
            rule(
                "{ domain = \"edge\", descriptor = [{ key = \"k\" }], unlimited = true }",
                QUOTA,
            ),
            "4:1",
            "takes only `id` and `envoy`",
        ),
        // With an HTTP `match`, the rule needs a key for HTTP requests.
        (
            rule(
                "{ domain = \"edge\", descriptor = [{ key = \"k\" }] }",
                &format!("match = {{ path = \"/x\" }}\n{QUOTA}"),
            ),
            "1:1",
            "needs `key`",
        ),
    ];
    for (text, at, says) in cases {
        let errors = mistakes(&text);
        assert!(
            errors.contains(&format!("rules.toml:{at}:")) && errors.contains(says),
            "{text}\n→ {errors}\n(wanted {at} {says:?})"
        );
    }
    let long: Vec<String> = (0..17).map(|n| format!("{{ key = \"k{n}\" }}")).collect();
    let errors = mistakes(&rule(
        &format!(
            "{{ domain = \"edge\", descriptor = [{}] }}",
            long.join(", ")
        ),
        QUOTA,
    ));
    assert!(errors.contains("at most 16"), "{errors}");
}
