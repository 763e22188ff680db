//! Rule files for Envoy written carelessly or with hostile inputs, decided by the rate
//! limit service in process (memory store). Each test states what a user would expect.

use tollgate_config::{Extractors, RuleFile};
use tollgate_core::MemoryStore;
use tollgate_envoy::RateLimitService;
use tollgate_envoy::envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use tollgate_envoy::envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::{
    RateLimitRequest, RateLimitResponse,
};

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

fn parse(text: &str) -> Result<RuleFile, String> {
    RuleFile::parse("rules.toml", text, &Extractors::new()).map_err(|errors| errors.to_string())
}

fn served(text: &str) -> RateLimitService {
    let file = parse(text).unwrap_or_else(|errors| panic!("{errors}\n{text}"));
    let service = RateLimitService::new(MemoryStore::new());
    service
        .set_rules(&file)
        .unwrap_or_else(|errors| panic!("{errors}"));
    service
}

fn request(descriptors: &[&[(&str, &str)]]) -> RateLimitRequest {
    RateLimitRequest {
        domain: "edge".into(),
        descriptors: descriptors
            .iter()
            .map(|entries| RateLimitDescriptor {
                entries: entries
                    .iter()
                    .map(|(key, value)| Entry {
                        key: (*key).into(),
                        value: (*value).into(),
                    })
                    .collect(),
                ..RateLimitDescriptor::default()
            })
            .collect(),
        hits_addend: 0,
    }
}

async fn ask(service: &RateLimitService, descriptors: &[&[(&str, &str)]]) -> RateLimitResponse {
    service
        .decide(&request(descriptors))
        .await
        .unwrap_or_else(|status| panic!("{status:?}"))
}

/// The overall codes of `times` identical requests.
async fn codes(
    service: &RateLimitService,
    descriptors: &[&[(&str, &str)]],
    times: usize,
) -> Vec<i32> {
    let mut codes = Vec::new();
    for _ in 0..times {
        codes.push(ask(service, descriptors).await.overall_code);
    }
    codes
}

fn counting(id: &str, entries: &str, limit: u64, extra: &str) -> String {
    format!(
        "[[rule]]\nid = \"{id}\"\nenvoy = {{ domain = \"edge\", descriptor = [{entries}]{extra} }}\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1h\"\n"
    )
}

fn unlimited(id: &str, entries: &str) -> String {
    format!(
        "[[rule]]\nid = \"{id}\"\nenvoy = {{ domain = \"edge\", descriptor = [{entries}], unlimited = true }}\n"
    )
}

// ---- `replaces` ----------------------------------------------------------------------------

/// A rule that replaces itself drops itself from every request it applies to: it limits
/// nothing. A user who wrote it made a mistake the loader can point at.
#[test]
fn a_rule_replacing_itself_is_refused_at_load() {
    let text = counting(
        "per-user",
        "{ key = \"user\" }",
        1,
        ", replaces = [\"per-user\"]",
    );
    let errors = parse(&text).expect_err("a rule that replaces itself limits nothing");
    assert!(errors.contains("rules.toml:3:"), "{errors}");
}

/// Two rules replacing each other: a request both apply to is limited by neither.
#[test]
fn rules_replacing_each_other_are_refused_at_load() {
    let text = counting("a", "{ key = \"user\" }", 1, ", replaces = [\"b\"]")
        + &counting("b", "{ key = \"plan\" }", 1, ", replaces = [\"a\"]");
    let errors = parse(&text).expect_err("a cycle of `replaces` limits nothing");
    assert!(errors.contains("rules.toml:"), "{errors}");
}

/// What a self-replacing rule does today, served: nothing is ever limited.
#[tokio::test]
async fn a_self_replacing_rule_would_limit_nothing() {
    let text = counting(
        "per-user",
        "{ key = \"user\" }",
        1,
        ", replaces = [\"per-user\"]",
    );
    if parse(&text).is_err() {
        return; // refused at load: the defect is fixed
    }
    let service = served(&text);
    assert_eq!(
        codes(&service, &[&[("user", "alice")]], 3).await,
        [OK, OVER, OVER]
    );
}

/// `replaces` by an unlimited rule exempts: the general rule counts nothing for those requests.
#[tokio::test]
async fn an_unlimited_rule_replacing_the_general_one_exempts() {
    let text = counting("per-address", "{ key = \"remote_address\" }", 1, "")
        + "[[rule]]\nid = \"partner\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"partner\", value = \"acme\" }], unlimited = true, replaces = [\"per-address\"] }\n";
    let service = served(&text);
    let both: &[&[(&str, &str)]] = &[&[("remote_address", "10.0.0.1")], &[("partner", "acme")]];
    assert_eq!(codes(&service, both, 3).await, [OK, OK, OK]);
    let alone: &[&[(&str, &str)]] = &[&[("remote_address", "10.0.0.1")]];
    assert_eq!(codes(&service, alone, 2).await, [OK, OVER]);
}

/// A shadow rule "counts and reports a refusal ... and answers OK": trying a new rule out in
/// shadow must not change what is enforced. A shadow partner rule with `replaces` drops the
/// enforcing general rule from the requests it applies to, so merely adding it in shadow turns
/// the general limit off for those requests.
#[tokio::test]
async fn a_shadow_rule_does_not_switch_an_enforcing_rule_off() {
    let text = counting("per-address", "{ key = \"remote_address\" }", 1, "")
        + &counting(
            "partner",
            "{ key = \"partner\", value = \"acme\" }",
            100,
            ", replaces = [\"per-address\"]",
        )
        + "mode = \"shadow\"\n";
    let service = served(&text);
    let both: &[&[(&str, &str)]] = &[&[("remote_address", "10.0.0.1")], &[("partner", "acme")]];
    assert_eq!(
        codes(&service, both, 2).await,
        [OK, OVER],
        "the shadow rule only observes: per-address still limits"
    );
}

// ---- most specific wins ---------------------------------------------------------------------

/// "among equals, the first written": an unlimited exemption written first, then a counting
/// rule of the same specificity (two prefixes). The exemption should win.
#[tokio::test]
async fn among_equals_the_first_written_wins_even_when_it_is_unlimited() {
    let text = unlimited(
        "internal",
        "{ key = \"client\", value = \"app-internal-*\" }",
    ) + &counting("apps", "{ key = \"client\", value = \"app-*\" }", 1, "");
    let service = served(&text);
    let internal: &[&[(&str, &str)]] = &[&[("client", "app-internal-billing")]];
    assert_eq!(
        codes(&service, internal, 3).await,
        [OK, OK, OK],
        "`internal` is written first"
    );
}

/// The same, for two counting rules: the first written wins (holds).
#[tokio::test]
async fn among_equal_counting_rules_the_first_written_wins() {
    let text = counting(
        "first",
        "{ key = \"client\", value = \"app-internal-*\" }",
        2,
        "",
    ) + &counting("second", "{ key = \"client\", value = \"app-*\" }", 1, "");
    let service = served(&text);
    let response = ask(&service, &[&[("client", "app-internal-billing")]]).await;
    let name = response.statuses[0]
        .current_limit
        .as_ref()
        .map(|limit| limit.name.clone());
    assert_eq!(name.as_deref(), Some("first"));
    // Exact beats prefix beats any, entry by entry from the first.
    let text = counting(
        "any-then-exact",
        "{ key = \"a\" }, { key = \"b\", value = \"x\" }",
        5,
        "",
    ) + &counting(
        "prefix-then-any",
        "{ key = \"a\", value = \"v*\" }, { key = \"b\" }",
        5,
        "",
    ) + &counting(
        "exact-then-any",
        "{ key = \"a\", value = \"v1\" }, { key = \"b\" }",
        5,
        "",
    );
    let service = served(&text);
    let name = |response: RateLimitResponse| {
        response.statuses[0]
            .current_limit
            .as_ref()
            .map(|limit| limit.name.clone())
    };
    let response = ask(&service, &[&[("a", "v1"), ("b", "x")]]).await;
    assert_eq!(name(response).as_deref(), Some("exact-then-any"));
    let response = ask(&service, &[&[("a", "v2"), ("b", "x")]]).await;
    assert_eq!(name(response).as_deref(), Some("prefix-then-any"));
    let response = ask(&service, &[&[("a", "w"), ("b", "x")]]).await;
    assert_eq!(name(response).as_deref(), Some("any-then-exact"));
    let response = ask(&service, &[&[("b", "x"), ("a", "w")]]).await;
    assert_eq!(name(response), None, "keys in another order: no rule");
}

/// Writing a file back (`to_toml`) and loading it again keeps which rule wins.
#[tokio::test]
async fn a_round_trip_keeps_which_rule_wins() {
    // An Envoy-only rule written first, then one with an HTTP `match` too, equally specific.
    let text = counting(
        "edge-only",
        "{ key = \"client\", value = \"app-ios\" }",
        1,
        "",
    ) + "[[rule]]\nid = \"both\"\nmatch = { path = \"/api\" }\nkey = \"global\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"client\", value = \"app-ios\" }] }\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow = \"1h\"\n";
    let file = parse(&text).expect("loads");
    let again = parse(&file.to_toml()).expect("loads again");
    let winner = |file: &RuleFile| {
        let service = RateLimitService::new(MemoryStore::new());
        service.set_rules(file).expect("memory");
        service
    };
    let descriptor: &[&[(&str, &str)]] = &[&[("client", "app-ios")]];
    let before = ask(&winner(&file), descriptor).await.statuses[0]
        .current_limit
        .as_ref()
        .map(|limit| limit.name.clone());
    let after = ask(&winner(&again), descriptor).await.statuses[0]
        .current_limit
        .as_ref()
        .map(|limit| limit.name.clone());
    assert_eq!(before.as_deref(), Some("edge-only"));
    assert_eq!(after, before, "written back:\n{}", file.to_toml());
}

// ---- keys that do not fit the descriptor ---------------------------------------------------

/// `key = "global"` on a descriptor with an any-value entry: the rule's key takes no value, the
/// descriptor gives one, so every request is INVALID_ARGUMENT — which Envoy lets through by
/// default. The file should be refused where the key is written.
#[test]
fn a_key_taking_fewer_values_than_the_descriptor_gives_is_refused_at_load() {
    let text = "[[rule]]\nid = \"all\"\nkey = \"global\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"remote_address\" }] }\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\n";
    let errors = parse(text).expect_err("every request would be INVALID_ARGUMENT");
    assert!(errors.contains("rules.toml:3:"), "{errors}");
}

/// `key = "peer_ip"` on a descriptor of exact values only: the key needs a value, none is given.
#[test]
fn a_key_taking_more_values_than_the_descriptor_gives_is_refused_at_load() {
    let text = "[[rule]]\nid = \"login\"\nkey = \"peer_ip\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"path\", value = \"/login\" }] }\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\n";
    let errors = parse(text).expect_err("every request would be INVALID_ARGUMENT");
    assert!(errors.contains("rules.toml:3:"), "{errors}");
}

/// The same rule, served: nothing is limited (each request is refused as bad input instead).
#[tokio::test]
async fn a_misfitting_key_limits_nothing_when_served() {
    let text = "[[rule]]\nid = \"all\"\nkey = \"global\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"remote_address\" }] }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n";
    if parse(text).is_err() {
        return; // refused at load: the defect is fixed
    }
    let service = served(text);
    let answer = service
        .decide(&request(&[&[("remote_address", "10.0.0.1")]]))
        .await;
    assert!(answer.is_ok(), "{answer:?}");
}

/// A key that fits: `client_ip` grouping an address entry (the guide's example) loads and counts.
#[tokio::test]
async fn a_fitting_key_loads_and_counts() {
    let text = "[[rule]]\nid = \"wide\"\nkey = { peer_ip = { ipv6_prefix = 48 } }\nenvoy = { domain = \"edge\", descriptor = [{ key = \"remote_address\" }] }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n";
    let service = served(text);
    assert_eq!(
        codes(&service, &[&[("remote_address", "2001:db8:1:2::1")]], 1).await,
        [OK]
    );
    assert_eq!(
        codes(&service, &[&[("remote_address", "2001:db8:1:3::1")]], 1).await,
        [OVER],
        "one /48"
    );
}

// ---- odd values ------------------------------------------------------------------------------

#[tokio::test]
async fn unicode_and_odd_values_match_and_count_apart() {
    let text = counting(
        "u",
        "{ key = \"ключ\", value = \"зна*\" }, { key = \"user\" }",
        1,
        "",
    ) + &counting("empty", "{ key = \"e\", value = \"\" }", 1, "")
        + &counting("star", "{ key = \"s\", value = \"*\" }", 1, "");
    let service = served(&text);
    assert_eq!(
        codes(&service, &[&[("ключ", "значение"), ("user", "🦀")]], 2).await,
        [OK, OVER]
    );
    assert_eq!(
        codes(&service, &[&[("ключ", "значение"), ("user", "🦀🦀")]], 1).await,
        [OK]
    );
    // Parts are length-prefixed: values that concatenate alike are other callers.
    let text = counting("two", "{ key = \"a\" }, { key = \"b\" }", 1, "");
    let service2 = service_of(&text);
    assert_eq!(
        codes(&service2, &[&[("a", "x|"), ("b", "y")]], 1).await,
        [OK]
    );
    assert_eq!(
        codes(&service2, &[&[("a", "x"), ("b", "|y")]], 1).await,
        [OK]
    );
    assert_eq!(
        codes(&service2, &[&[("a", ""), ("b", "")]], 2).await,
        [OK, OVER]
    );
    // `value = ""` is an exact empty value; `value = "*"` any value.
    assert_eq!(codes(&service, &[&[("e", "")]], 2).await, [OK, OVER]);
    assert_eq!(
        ask(&service, &[&[("e", "x")]]).await.statuses[0].current_limit,
        None
    );
    assert_eq!(codes(&service, &[&[("s", "one")]], 2).await, [OK, OVER]);
    assert_eq!(codes(&service, &[&[("s", "two")]], 1).await, [OK]);
    // Long values (past the 128-byte raw key) are digested, still apart.
    let long_a = "a".repeat(4096);
    let mut long_b = "a".repeat(4095);
    long_b.push('b');
    assert_eq!(
        codes(&service2, &[&[("a", &long_a), ("b", "")]], 2).await,
        [OK, OVER]
    );
    assert_eq!(
        codes(&service2, &[&[("a", &long_b), ("b", "")]], 1).await,
        [OK]
    );
}

fn service_of(text: &str) -> RateLimitService {
    served(text)
}

#[test]
fn hostile_rule_files_never_panic() {
    let cases = [
        "[[rule]]\nid = \"r\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"k\", value = \"**\" }] }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n",
        "[[rule]]\nid = \"r\"\nenvoy = { domain = \"edge\", descriptor = { key = \"k\" } }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n",
        "[[rule]]\nid = \"r\"\nenvoy = \"edge\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n",
        "[[rule]]\nid = \"r\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"k\" }], unlimited = \"yes\" }\n",
        "[[rule]]\nid = \"r\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"k\" }], unlimited = true, replaces = [\"r\"] }\n",
        "[[rule]]\nid = \"r\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"k\" }], replaces = [1, \"\"] }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n",
        "[[rule]]\nid = \"r\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"k\", address = \"yes\" }] }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n",
        "[[rule]]\nid = \"r\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"k\", value = \"x\", address = true }] }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n",
        "[[rule]]\nid = \"r\"\nenvoy = { domain = \"edge\", descriptor = [[]] }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n",
        "[[rule]]\nid = \"r\"\nenvoy = { domain = \"\\u0000\", descriptor = [{ key = \"\\u0000\", value = \"\\u0000*\" }] }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n",
    ];
    for text in cases {
        let _ = parse(text);
    }
    // An id used by an unlimited rule and a counting one.
    let twice = unlimited("r", "{ key = \"k\" }") + &counting("r", "{ key = \"j\" }", 1, "");
    assert!(parse(&twice).unwrap_err().contains("used twice"));
}
