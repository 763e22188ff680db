//! Rules as data: a rule file gives the same decisions as the same rules built in code, and a
//! bad file reports every mistake at its line and column (and never panics).

#[path = "../../tower-layer/tests/common/mod.rs"]
mod common;
mod config_common;

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Empty;
use proptest::prelude::*;
use tollgate_config::{Extractors, RuleFile};
use tollgate_core::{Key, MemoryStore, OnStoreFailure, Quota, Rate};
use tollgate_tower::client_ip::{ProxyHeader, TrustedProxies};
use tollgate_tower::headers::HeaderStyle;
use tollgate_tower::key::{ClientIp, ExtensionKey, Global, HeaderKey};
use tollgate_tower::{
    AlertShare, MissingKey, OnRefusal, QuotaOverrides, RateLimitLayer, Rule, RuleSet,
};
use tower::{Layer, ServiceExt, service_fn};

#[derive(Clone)]
struct Account(&'static str);

fn extractors() -> Extractors {
    Extractors::new()
        .with("account", ExtensionKey::new(|account: &Account| account.0))
        .responder("challenge", challenge)
}

/// How Chirp answers a refused sign-up: a challenge, not a 429.
fn challenge(_refused: &tollgate_tower::Refused) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from_static(b"{\"challenge\":\"captcha\"}"));
    *response.status_mut() = StatusCode::FORBIDDEN;
    response
}

/// The seeds' limits table, as the example rule file states it.
const CHIRP: &str = include_str!("../../../examples/rules/chirp.toml");

/// How Chirp answers a refusal where a script is suspected: its challenge, the limit undisclosed.
trait Challenged {
    fn challenged(self) -> Self;
}

impl Challenged for Rule {
    fn challenged(self) -> Self {
        self.on_refusal(OnRefusal::respond(challenge))
            .disclose(false)
    }
}

/// The same rules, built in code.
fn chirp_in_code() -> RuleSet {
    let account = || ExtensionKey::new(|account: &Account| account.0);
    let header = |name: &'static str| HeaderKey::new(http::HeaderName::from_static(name));
    let block = tollgate_tower::client_ip::IpGrouping::default()
        .with_ipv4_prefix(24)
        .expect("a valid prefix");
    let day = Duration::from_secs(86_400);
    let hour = Duration::from_secs(3_600);
    let trusted = || {
        TrustedProxies::new(ProxyHeader::XForwardedFor)
            .trust("127.0.0.0/8".parse().expect("cidr"))
            .trust("::1/128".parse().expect("cidr"))
    };
    let reads = || Quota::token_bucket(50, Rate::per_second(10)).expect("valid");
    let by_account = |id: &str, quota: Quota| Rule::new(id, quota, account()).expect("id");
    RuleSet::new()
        .route(Method::GET, "/feed", by_account("reads", reads()))
        .expect("pattern")
        .route(
            Method::GET,
            "/profiles/{id}",
            by_account("profile-reads", reads()),
        )
        .expect("pattern")
        .route(
            Method::POST,
            "/posts",
            by_account(
                "posting",
                Quota::token_bucket(5, Rate::per_hour(30)).expect("valid"),
            ),
        )
        .expect("pattern")
        .route(
            Method::GET,
            "/exports",
            by_account(
                "exports-in-flight",
                Quota::concurrency_with(2, Duration::from_secs(5), tollgate_core::DEFAULT_SLOT_TTL)
                    .expect("valid"),
            )
            .on_refusal(OnRefusal::Unavailable),
        )
        .expect("pattern")
        .route(
            Method::POST,
            "/signup",
            Rule::new(
                "signups-per-device",
                Quota::fixed_window(3, day).expect("valid"),
                header("x-device-id"),
            )
            .expect("id")
            .on_missing_key(MissingKey::Refuse(StatusCode::BAD_REQUEST))
            .with_store_failure(OnStoreFailure::Closed)
            .challenged(),
        )
        .expect("pattern")
        .route(
            Method::POST,
            "/signup",
            Rule::new(
                "signups-per-ip-block",
                Quota::fixed_window(20, hour).expect("valid"),
                ClientIp::behind(trusted()).grouping(block),
            )
            .expect("id")
            .with_store_failure(OnStoreFailure::Closed)
            .challenged(),
        )
        .expect("pattern")
        .any_method(
            "/partner/{*rest}",
            Rule::new(
                "partner-api",
                Quota::token_bucket(200, Rate::per_second(200)).expect("valid"),
                header("x-api-key"),
            )
            .expect("id")
            .overrides(QuotaOverrides::new().key(
                Key::new("partner-acme"),
                Quota::token_bucket(500, Rate::per_second(500)).expect("valid"),
            )),
        )
        .expect("pattern")
        .route(
            Method::POST,
            "/otp",
            Rule::new(
                "sms-per-address",
                Quota::sliding_window_counter(30, hour).expect("valid"),
                ClientIp::behind(trusted()),
            )
            .expect("id")
            .with_store_failure(OnStoreFailure::Local)
            .challenged(),
        )
        .expect("pattern")
        .route(
            Method::POST,
            "/otp",
            Rule::new(
                "sms-per-ip-block",
                Quota::sliding_window_counter(300, hour).expect("valid"),
                ClientIp::behind(trusted()).grouping(block),
            )
            .expect("id")
            .with_store_failure(OnStoreFailure::Local)
            .challenged(),
        )
        .expect("pattern")
        .route(
            Method::POST,
            "/otp",
            Rule::new(
                "otp-global",
                Quota::sliding_window_counter(3000, hour).expect("valid"),
                Global,
            )
            .expect("id")
            .count_only_when(|status| status.is_success())
            .with_alert_at(AlertShare::new(0.8).expect("a share"))
            .with_store_failure(OnStoreFailure::Local)
            .challenged(),
        )
        .expect("pattern")
        .headers(HeaderStyle::default().with_legacy(true))
}

/// Statuses and `RateLimit-Policy` fields of a fixed sequence of requests through `rules`.
async fn replay(rules: RuleSet) -> Vec<(StatusCode, String)> {
    let layer = RateLimitLayer::new(MemoryStore::new());
    layer
        .handle()
        .replace_rules(rules)
        .expect("the layer's store can count these rules");
    let service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let mut seen = Vec::new();
    for (method, path, header) in [
        (Method::POST, "/posts", None),
        (Method::GET, "/feed", None),
        (Method::HEAD, "/profiles/ada", None),
        (Method::POST, "/users/bob/follow", None),
        (Method::POST, "/signup", Some(("x-device-id", "phone-1"))),
        (Method::POST, "/signup", None),
        (
            Method::DELETE,
            "/partner/v1/posts",
            Some(("x-api-key", "partner-acme")),
        ),
        (
            Method::GET,
            "/partner/v1/feed",
            Some(("x-api-key", "partner-small")),
        ),
        (Method::POST, "/otp", None),
    ] {
        for _ in 0..6 {
            let mut request = Request::builder().method(method.clone()).uri(path);
            if let Some((name, value)) = header {
                request = request.header(name, value);
            }
            let mut request = request.body(()).expect("a request");
            request.extensions_mut().insert(Account("ada"));
            request
                .extensions_mut()
                .insert(std::net::SocketAddr::from(([203, 0, 113, 9], 4000)));
            let response = service.clone().oneshot(request).await.expect("infallible");
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .map(|value| value.to_str().expect("text").to_owned())
                    .unwrap_or_default()
            };
            let policy = format!(
                "{} | {}",
                header("ratelimit-policy"),
                header("x-ratelimit-limit")
            );
            seen.push((response.status(), policy));
        }
    }
    seen
}

#[tokio::test]
async fn a_rule_file_decides_exactly_as_the_same_rules_built_in_code() {
    let file = RuleFile::parse("chirp.toml", CHIRP, &extractors()).expect("a valid file");
    let from_file = replay(file.into_rules()).await;
    let from_code = replay(chirp_in_code()).await;
    assert_eq!(from_file, from_code);
    assert!(
        from_file
            .iter()
            .any(|(status, _)| *status == StatusCode::TOO_MANY_REQUESTS),
        "the sequence reaches some limit: {from_file:?}"
    );
}

#[test]
fn the_example_chirp_file_is_valid() {
    let text = include_str!("../../../examples/rules/chirp.toml");
    let file =
        RuleFile::parse("chirp.toml", text, &extractors()).expect("the example file is valid");
    assert_eq!(file.rules().rules().count(), 10);
    let limits: Vec<&str> = file.limits().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        limits,
        [
            "following",
            "login-attempts-per-account",
            "sms-per-phone",
            "sms-per-range",
            "sms-per-requester"
        ]
    );
    let ids: Vec<&str> = file.ids().collect();
    let in_code = chirp_in_code();
    let code_ids: Vec<&str> = in_code.rules().map(|rule| rule.id().as_str()).collect();
    assert_eq!(ids, code_ids, "the code twin covers the whole table");
}

/// A file of one rule with `field` set as given (the rest valid).
fn one_rule(extra: &str) -> String {
    format!(
        "[[rule]]\nid = \"r\"\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\nkey = \"peer_ip\"\n{extra}\n"
    )
}

/// The errors of `text`, as `line:column: message`.
fn errors(text: &str) -> Vec<String> {
    config_common::config_errors(text, &extractors())
}

#[test]
fn each_mistake_is_reported_at_its_line_and_column_with_a_sentence_to_act_on() {
    let cases: &[(&str, &str, &str)] = &[
        ("algoritm = \"gcra\"", "7:1", "did you mean `algorithm`?"),
        ("cost = 0", "7:8", "`cost` must be at least 1, not 0"),
        (
            "escalate = { after_refusals = 3, within = \"5 parsecs\", block_for = \"1h\" }",
            "7:44",
            "is not a duration",
        ),
        ("mode = \"loud\"", "7:9", "is not \"enforce\" or \"shadow\""),
        ("match = { path = \"/users/:id\" }", "7:19", "write `{id}`"),
        (
            "match = { path = \"/x\", method = \"GE T\" }",
            "7:34",
            "is not an HTTP method",
        ),
        (
            "on_missing_key = { refuse = 500 }",
            "7:29",
            "not a client error status",
        ),
        (
            "on_store_failure = \"sometimes\"",
            "7:21",
            "is not \"open\"",
        ),
    ];
    for (extra, at, message) in cases {
        let found = errors(&one_rule(extra));
        assert_eq!(found.len(), 1, "{extra}: {found:?}");
        assert!(
            found[0].starts_with(&format!("{at}: ")),
            "{extra}: {found:?}"
        );
        assert!(found[0].contains(message), "{extra}: {found:?}");
    }
}

#[test]
fn wrong_algorithms_keys_ids_networks_and_syntax_are_explained() {
    let unknown_algorithm =
        errors("[[rule]]\nid = \"r\"\nalgorithm = \"token-bucket\"\nkey = \"peer_ip\"\n");
    assert_eq!(unknown_algorithm.len(), 1, "{unknown_algorithm:?}");
    assert!(
        unknown_algorithm[0].starts_with(
            "3:14: unknown algorithm \"token-bucket\" (did you mean \"token_bucket\"?)"
        )
    );

    let file = "[[rule]]\nid = \"r\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\nkey = [\"acount\", { hedaer = \"x\" }]\n";
    let keys = errors(file);
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(
        keys[0].starts_with("6:9: unknown key `acount` (did you mean `account`?)"),
        "{keys:?}"
    );
    assert!(
        keys[1].starts_with("6:20: unknown key kind `hedaer` (did you mean `header`?)"),
        "{keys:?}"
    );

    let proxies = errors(&one_rule("").replace(
        "key = \"peer_ip\"",
        "key = { client_ip = { trusted_proxies = [\"10.0.0.0/33\"], header = \"x-forwarded-for\" } }",
    ));
    assert_eq!(proxies.len(), 1, "{proxies:?}");
    assert!(
        proxies[0].starts_with("6:43: invalid network \"10.0.0.0/33\""),
        "{proxies:?}"
    );

    let twice = errors(&format!("{}{}", one_rule(""), one_rule("")));
    assert_eq!(twice.len(), 1, "{twice:?}");
    assert!(
        twice[0].starts_with("9:7: rule id \"r\" is used twice"),
        "{twice:?}"
    );

    let bad_id = errors(&one_rule("").replace("id = \"r\"", "id = \"r{1}\""));
    assert!(bad_id[0].starts_with("2:7: `id` \"r{1}\""), "{bad_id:?}");

    let syntax = errors("[[rule]\nid = 1\n");
    assert_eq!(syntax.len(), 1, "{syntax:?}");
    assert!(syntax[0].starts_with("1:"), "{syntax:?}");
}

#[test]
fn a_file_with_five_mistakes_reports_five() {
    let file = "[[rule]]\nid = \"a\"\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow = \"soon\"\nkey = \"peer_ip\"\ncolour = \"red\"\n\n[[rule]]\nid = \"b\"\nalgorithm = \"gcra\"\ncapacity = 3\nrefill = { amount = 1, per = \"1s\" }\nkey = \"nobody\"\nmode = \"loud\"\n";
    let found = errors(file);
    assert_eq!(found.len(), 5, "{found:#?}");
    let lines: Vec<&str> = found
        .iter()
        .map(|error| error.split(':').next().unwrap_or(""))
        .collect();
    assert_eq!(lines, ["4", "5", "7", "14", "15"], "{found:#?}");
}

#[test]
fn files_that_would_limit_nothing_or_everything_are_refused() {
    for empty in ["", "   \n", "# every rule commented out\n", "rule = []\n"] {
        let found = errors(empty);
        assert_eq!(found.len(), 1, "{empty:?}: {found:?}");
        assert!(found[0].contains("defines no rules"), "{found:?}");
    }
    let misspelt = errors(&one_rule("match = { path = \"/x\", method = \"POTS\" }"));
    assert!(
        misspelt[0].contains("(did you mean \"POST\"?)"),
        "{misspelt:?}"
    );
    let none = errors(&one_rule("match = { path = \"/x\", method = [] }"));
    assert!(none[0].contains("lists no method"), "{none:?}");
    let too_costly = errors(&one_rule("cost = 10"));
    assert!(
        too_costly[0].starts_with("7:8: `cost` 10 is above the quota's limit 5"),
        "{too_costly:?}"
    );
    let too_long = errors(&one_rule("").replace("window = \"1m\"", "window = \"1000y\""));
    assert!(
        too_long[0].starts_with("5:11: this quota is not valid"),
        "{too_long:?}"
    );
    let syntax = errors("[[rule]]\nid = \"r\"\nid = \"s\"\n");
    assert!(
        syntax[0].contains("not valid TOML: `id` is set twice"),
        "{syntax:?}"
    );
}

#[tokio::test]
async fn a_get_and_head_rule_charges_a_head_request_once() {
    let text = one_rule("match = { path = \"/x\", method = [\"GET\", \"HEAD\", \"get\"] }");
    let file = RuleFile::parse("rules.toml", &text, &extractors()).expect("a valid file");
    let layer = RateLimitLayer::new(MemoryStore::new());
    layer
        .handle()
        .replace_rules(file.into_rules())
        .expect("the layer's store can count these rules");
    let service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let mut allowed = 0;
    for _ in 0..8 {
        let mut request = Request::head("/x").body(()).expect("a request");
        request
            .extensions_mut()
            .insert(std::net::SocketAddr::from(([203, 0, 113, 9], 4000)));
        if service
            .clone()
            .oneshot(request)
            .await
            .expect("infallible")
            .status()
            == StatusCode::OK
        {
            allowed += 1;
        }
    }
    assert_eq!(allowed, 5, "the limit, each HEAD charged once");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_is_answered_without_panicking(text in ".{0,400}") {
        let _ = RuleFile::parse("fuzz.toml", &text, &extractors());
    }

    #[test]
    fn a_valid_file_with_a_byte_changed_is_answered_without_panicking(at in 0..CHIRP.len(), byte in any::<u8>()) {
        let mut bytes = CHIRP.as_bytes().to_vec();
        bytes[at] = byte;
        let text = String::from_utf8_lossy(&bytes);
        let _ = RuleFile::parse("fuzz.toml", &text, &extractors());
    }
}
