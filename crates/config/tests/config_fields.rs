//! What a rule file can say beyond a rule's quota and key, each through the layer: quotas per
//! key and per plan, refusal actions and count predicates registered by name, exemptions, the
//! header style, typed limits' quotas, and writing the rules back as TOML.

mod config_common;

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_config::{Extractors, RuleFile, RuleWatcher, rules_to_toml};
use tollgate_core::{MemoryStore, Quota, RuleId};
use tollgate_tower::key::{Global, HeaderKey};
use tollgate_tower::{QuotaRegistry, RateLimitLayer, Rule, RuleSet};
use tower::{Layer, ServiceExt, service_fn};

fn extractors() -> Extractors {
    Extractors::new()
        .with(
            "plan",
            HeaderKey::new(http::HeaderName::from_static("x-plan")),
        )
        .with(
            "account",
            HeaderKey::new(http::HeaderName::from_static("authorization")),
        )
        .responder("challenge", |refused| {
            Response::builder()
                .status(StatusCode::FORBIDDEN)
                .body(Bytes::from(format!(
                    "challenge for {}",
                    refused.rule().as_str()
                )))
                .unwrap_or_default()
        })
        .predicate("unauthorized", |status| status == StatusCode::UNAUTHORIZED)
}

fn parse(text: &str) -> RuleFile {
    RuleFile::parse("rules.toml", text, &extractors())
        .unwrap_or_else(|errors| panic!("a valid file:\n{errors}"))
}

fn errors(text: &str) -> Vec<String> {
    config_common::config_errors(text, &extractors())
}

/// A request, with the given headers, from 203.0.113.9, answered `answer` by the service.
struct Call<'a> {
    method: Method,
    path: &'a str,
    headers: &'a [(&'a str, &'a str)],
}

impl Call<'_> {
    fn get(path: &str) -> Call<'_> {
        Call {
            method: Method::GET,
            path,
            headers: &[],
        }
    }
}

/// Sends `call` through `layer` to a service answering `answer`.
async fn send<S: tollgate_core::Store + Clone>(
    layer: &RateLimitLayer<S>,
    call: &Call<'_>,
    answer: StatusCode,
) -> Response<tollgate_tower::ResponseBody<Empty<Bytes>>> {
    let service = layer.layer(service_fn(move |_: Request<()>| async move {
        let mut response = Response::new(Empty::<Bytes>::new());
        *response.status_mut() = answer;
        Ok::<_, Infallible>(response)
    }));
    let mut request = Request::builder()
        .method(call.method.clone())
        .uri(call.path);
    for (name, value) in call.headers {
        request = request.header(*name, *value);
    }
    let mut request = request.body(()).expect("a request");
    request
        .extensions_mut()
        .insert(SocketAddr::from(([203, 0, 113, 9], 4000)));
    service.oneshot(request).await.expect("infallible")
}

fn layer_with(file: &RuleFile) -> RateLimitLayer<MemoryStore> {
    let layer = RateLimitLayer::new(MemoryStore::new());
    layer
        .handle()
        .replace_rules(file.rules().clone())
        .expect("the layer's store can count these rules");
    layer
}

/// How many calls in a row are allowed (up to 20).
async fn allowed_in_a_row(layer: &RateLimitLayer<MemoryStore>, call: &Call<'_>) -> usize {
    let mut allowed = 0;
    while allowed < 20 && send(layer, call, StatusCode::OK).await.status() == StatusCode::OK {
        allowed += 1;
    }
    allowed
}

#[tokio::test]
async fn quotas_per_key_and_per_plan_are_resolved_per_request() {
    let file = parse(
        r#"
[[rule]]
id = "partner-api"
algorithm = "fixed_window"
limit = 2
window = "1d"
key = { header = "x-api-key" }
overrides = { "partner-acme" = "5/1d", "partner-big" = { limit = 7, window = "1d" } }
plan = "plan"
plans = { pro = "3/d" }
"#,
    );
    let layer = layer_with(&file);
    let call =
        |key: &'static str, plan: Option<&'static str>| -> Vec<(&'static str, &'static str)> {
            let mut headers = vec![("x-api-key", key)];
            if let Some(plan) = plan {
                headers.push(("x-plan", plan));
            }
            headers
        };
    let cases = [
        (call("someone", None), 2),
        (call("partner-acme", None), 5),
        (call("partner-acme", Some("pro")), 0), // its own count, already spent: the key's entry wins
        (call("partner-big", None), 7),
        (call("pro-customer", Some("pro")), 3),
        (call("free-customer", Some("free")), 2),
    ];
    for (headers, expected) in cases {
        let request = Call {
            method: Method::GET,
            path: "/",
            headers: &headers,
        };
        assert_eq!(
            allowed_in_a_row(&layer, &request).await,
            expected,
            "{headers:?}"
        );
    }
    // The policy a response names is the caller's own quota.
    let headers = call("pro-two", Some("pro"));
    let request = Call {
        method: Method::GET,
        path: "/",
        headers: &headers,
    };
    let response = send(&layer, &request, StatusCode::OK).await;
    let policy = response.headers()["ratelimit-policy"]
        .to_str()
        .expect("text");
    assert!(policy.contains("q=3"), "{policy}");
}

#[tokio::test]
async fn refusals_flag_or_answer_with_a_named_responder_and_counting_follows_the_status() {
    let file = parse(
        r#"
[[rule]]
id = "signups"
match = { method = "POST", path = "/signup" }
algorithm = "fixed_window"
limit = 1
window = "1d"
key = "global"
on_refusal = { respond = "challenge" }

[[rule]]
id = "review"
match = { method = "POST", path = "/review" }
algorithm = "fixed_window"
limit = 1
window = "1d"
key = "global"
on_refusal = "flag"

[[rule]]
id = "failed-logins"
match = { method = "POST", path = "/login" }
algorithm = "fixed_window"
limit = 2
window = "1d"
key = "global"
count_only_when = "unauthorized"

[[rule]]
id = "errors"
match = { method = "POST", path = "/errors" }
algorithm = "fixed_window"
limit = 1
window = "1d"
key = "global"
count_only_when = ["5xx", 404]
"#,
    );
    let layer = layer_with(&file);
    let post = |path| Call {
        method: Method::POST,
        path,
        headers: &[],
    };
    assert_eq!(
        send(&layer, &post("/signup"), StatusCode::OK)
            .await
            .status(),
        StatusCode::OK
    );
    let challenged = send(&layer, &post("/signup"), StatusCode::OK).await;
    assert_eq!(
        challenged.status(),
        StatusCode::FORBIDDEN,
        "the named responder answers"
    );

    for _ in 0..3 {
        let flagged = send(&layer, &post("/review"), StatusCode::OK).await;
        assert_eq!(
            flagged.status(),
            StatusCode::OK,
            "a flag rule never refuses"
        );
    }

    // Successful logins do not count; failed ones do.
    for _ in 0..5 {
        assert_eq!(
            send(&layer, &post("/login"), StatusCode::OK).await.status(),
            StatusCode::OK
        );
    }
    for _ in 0..2 {
        send(&layer, &post("/login"), StatusCode::UNAUTHORIZED).await;
    }
    assert_eq!(
        send(&layer, &post("/login"), StatusCode::OK).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );

    // Only 5xx and 404 count.
    for answer in [StatusCode::OK, StatusCode::BAD_REQUEST, StatusCode::OK] {
        assert_eq!(
            send(&layer, &post("/errors"), answer).await.status(),
            answer
        );
    }
    send(&layer, &post("/errors"), StatusCode::NOT_FOUND).await;
    assert_eq!(
        send(&layer, &post("/errors"), StatusCode::OK)
            .await
            .status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn exemptions_and_the_header_style_come_from_the_file() {
    let file = parse(
        r#"
headers = { ietf = false, legacy = true }

[[rule]]
id = "everything"
algorithm = "fixed_window"
limit = 1
window = "1d"
key = "global"

[exempt]
paths = ["/healthz", "/internal/{*rest}"]
networks = ["198.51.100.0/24"]
"#,
    );
    let layer = layer_with(&file);
    for _ in 0..3 {
        assert_eq!(
            send(&layer, &Call::get("/healthz"), StatusCode::OK)
                .await
                .status(),
            StatusCode::OK
        );
        assert_eq!(
            send(&layer, &Call::get("/internal/a/b"), StatusCode::OK)
                .await
                .status(),
            StatusCode::OK
        );
    }
    let first = send(&layer, &Call::get("/feed"), StatusCode::OK).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert!(
        first.headers().get("ratelimit-policy").is_none(),
        "IETF fields off"
    );
    assert_eq!(
        first.headers()["x-ratelimit-limit"],
        "1",
        "legacy fields on"
    );
    assert_eq!(
        send(&layer, &Call::get("/feed"), StatusCode::OK)
            .await
            .status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert!(!layer.handle().header_style().ietf());
}

#[test]
fn overrides_exemptions_and_named_parts_explain_their_mistakes() {
    let rule = |extra: &str| {
        format!(
            "[[rule]]\nid = \"r\"\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\nkey = \"account\"\ncost = 2\n{extra}\n"
        )
    };
    let cases: &[(&str, &str, &str)] = &[
        (
            "overrides = { a = \"lots\" }",
            "8:20",
            "is not `\"<N>/<period>\"`",
        ),
        (
            "overrides = { a = \"1/s\" }",
            "8:20",
            "below the rule's cost 2",
        ),
        (
            "overrides = { a = { limit = 0, window = \"1s\" } }",
            "8:29",
            "at least 1",
        ),
        ("plans = { pro = \"9/s\" }", "8:9", "`plans` needs `plan`"),
        ("plan = \"plan\"", "8:9", "there is no `plans` table"),
        (
            "plan = \"tier\"\nplans = { pro = \"9/s\" }",
            "8:9",
            "unknown key `tier`",
        ),
        (
            "on_refusal = { respond = \"captcha\" }",
            "8:27",
            "no responder named \"captcha\"",
        ),
        (
            "on_refusal = \"ignore\"",
            "8:15",
            "is not \"reject\", \"unavailable\", \"flag\"",
        ),
        (
            "count_only_when = \"unauthorised\"",
            "8:20",
            "(did you mean \"unauthorized\"?)",
        ),
        (
            "count_only_when = [\"4xx\", 700]",
            "8:27",
            "not an HTTP status",
        ),
        (
            "count_only_when = []",
            "8:19",
            "no request would ever count",
        ),
    ];
    for (extra, at, message) in cases {
        let found = errors(&rule(extra));
        assert_eq!(found.len(), 1, "{extra}: {found:?}");
        assert!(
            found[0].starts_with(&format!("{at}: ")),
            "{extra}: {found:?}"
        );
        assert!(found[0].contains(message), "{extra}: {found:?}");
    }

    let routed = "[[rule]]\nid = \"posts\"\nmatch = { path = \"/api/posts\" }\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\nkey = \"peer_ip\"\n";
    let covered = errors(&format!(
        "{routed}[exempt]\npaths = [\"/healthz\", \"/api/{{*rest}}\"]\nnetworks = [\"0.0.0.0/0\", \"10.0.0.0/8\", \"10.0.0.1/40\"]\n"
    ));
    assert_eq!(covered.len(), 3, "{covered:?}");
    assert!(
        covered[0]
            .starts_with("9:23: exempt path \"/api/{*rest}\" covers every request rule \"posts\""),
        "{covered:?}"
    );
    assert!(
        covered[1].starts_with("10:14: exempt network \"0.0.0.0/0\" is every address"),
        "{covered:?}"
    );
    assert!(
        covered[2].starts_with("10:41: exempt network \"10.0.0.1/40\""),
        "{covered:?}"
    );

    let headers = errors(&format!(
        "headers = {{ ietf = \"yes\", legacyy = true }}\n{routed}"
    ));
    assert_eq!(headers.len(), 2, "{headers:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_set_typed_limits_quotas_in_the_layers_registry() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    let limit = |n: u64| {
        format!(
            "[[limit]]\nid = \"follows-per-day\"\nalgorithm = \"sliding_window_counter\"\nlimit = {n}\nwindow = \"1d\"\n"
        )
    };
    std::fs::write(&path, limit(400)).expect("write");
    let registry = QuotaRegistry::new();
    let layer = RateLimitLayer::new(MemoryStore::new()).registry(registry.clone());
    let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("a valid file");
    let follows = RuleId::new("follows-per-day").expect("id");
    assert_eq!(registry.get(&follows).map(|quota| quota.limit()), Some(400));

    watcher
        .overlay()
        .apply("1", &limit(20))
        .expect("a valid document");
    assert_eq!(registry.get(&follows).map(|quota| quota.limit()), Some(20));
    watcher.overlay().clear();
    assert_eq!(registry.get(&follows).map(|quota| quota.limit()), Some(400));

    // A file without the limit takes the entry away: the typed limit's declared quota again.
    std::fs::write(&path, "[[rule]]\nid = \"cap\"\nalgorithm = \"fixed_window\"\nlimit = 9\nwindow = \"1s\"\nkey = \"global\"\n").expect("write");
    assert!(watcher.reload().is_ok());
    assert_eq!(registry.get(&follows), None);

    // A layer without a registry cannot take `[[limit]]`s: refused, at the limit's id.
    let bare = RateLimitLayer::new(MemoryStore::new());
    std::fs::write(&path, limit(400)).expect("write");
    match RuleWatcher::start(&path, Extractors::new(), &bare) {
        Err(error) => {
            let text = error.to_string();
            assert!(
                text.contains(":2:7: `[[limit]]` \"follows-per-day\""),
                "{text}"
            );
            assert!(text.contains("no QuotaRegistry"), "{text}");
        }
        Ok(_) => panic!("started without a registry"),
    }
}

#[test]
fn rules_written_back_as_toml_load_again_to_the_same_rules() {
    let text = include_str!("../../../examples/rules/chirp.toml");
    let extractors = Extractors::new()
        .with(
            "account",
            HeaderKey::new(http::HeaderName::from_static("authorization")),
        )
        .responder("challenge", |_| http::Response::default());
    let file = RuleFile::parse("chirp.toml", text, &extractors).expect("valid");
    let written = file.to_toml();
    let again = RuleFile::parse("written.toml", &written, &extractors)
        .unwrap_or_else(|errors| panic!("the written file loads:\n{errors}\n{written}"));
    assert_eq!(again.to_toml(), written, "writing is a fixed point");
    let ids = |file: &RuleFile| {
        file.rules()
            .rules()
            .map(|rule| rule.id().clone())
            .collect::<Vec<_>>()
    };
    let quotas = |file: &RuleFile| {
        file.rules()
            .rules()
            .map(|rule| *rule.quota())
            .collect::<Vec<Quota>>()
    };
    assert_eq!(ids(&again), ids(&file));
    assert_eq!(quotas(&again), quotas(&file));
    assert_eq!(again.limits().count(), file.limits().count());

    // Rules built in code are listed, not written.
    let mixed = file.rules().clone().rule(
        Rule::new(
            "from-code",
            Quota::fixed_window(1, std::time::Duration::from_secs(1)).expect("valid"),
            Global,
        )
        .expect("id"),
    );
    let listed = rules_to_toml(&mixed);
    assert!(
        listed.contains("# [[rule]] id = \"from-code\" source = \"code\""),
        "{listed}"
    );
    let reloaded = RuleFile::parse("listed.toml", &listed, &extractors).expect("still loads");
    assert_eq!(ids(&reloaded), ids(&file));
    let _ = RuleSet::new();
}

#[test]
fn the_guides_rule_file_is_valid() {
    let section = include_str!("../../../docs/guide/src/rule-files.md");
    let start = section.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let text = &section[start..start + section[start..].find("```").expect("its end")];
    let file = parse(text);
    let ids: Vec<&str> = file.ids().collect();
    assert_eq!(
        ids,
        [
            "posting",
            "partner-api",
            "signups-per-block",
            "failed-logins"
        ]
    );
    assert_eq!(file.limits().count(), 1);
    let signups = (file.rules().rules())
        .find(|rule| rule.id().as_str() == "signups-per-block")
        .expect("the sign-up rule");
    assert_eq!(
        signups.alert_at().map(tollgate_tower::AlertShare::get),
        Some(0.8)
    );
}

#[test]
fn entries_that_could_never_match_and_exemptions_that_switch_rules_off_are_refused() {
    let rule = |key: &str, extra: &str| {
        format!(
            "[[rule]]\nid = \"r\"\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1d\"\nkey = {key}\n{extra}\n"
        )
    };
    // Overrides name a key's value: only a header or a registered extractor has one to write.
    for key in [
        "\"peer_ip\"",
        "\"endpoint\"",
        "\"global\"",
        "[\"account\", \"endpoint\"]",
        "{ peer_ip = { ipv4_prefix = 24 } }",
    ] {
        let found = errors(&rule(key, "overrides = { \"203.0.113.9\" = \"5/1d\" }"));
        assert_eq!(found.len(), 1, "{key}: {found:?}");
        assert!(
            found[0].contains("`overrides` name values of the rule's key"),
            "{key}: {found:?}"
        );
    }
    assert!(
        errors(&rule(
            "{ header = \"x-api-key\" }",
            "overrides = { a = \"5/1d\" }"
        ))
        .is_empty()
    );
    let plan = errors(&rule(
        "\"account\"",
        "plan = [\"plan\", \"account\"]\nplans = { pro = \"5/1d\" }",
    ));
    assert_eq!(plan.len(), 1, "{plan:?}");
    assert!(plan[0].contains("`plan` must be one header"), "{plan:?}");

    // Coverage is judged on every path a rule applies to, by all exempt paths together.
    let routed = |pattern: &str, exempt: &str| {
        format!(
            "[[rule]]\nid = \"api\"\nmatch = {{ path = \"{pattern}\" }}\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1d\"\nkey = \"global\"\n\n[exempt]\npaths = {exempt}\n"
        )
    };
    assert!(
        errors(&routed("/api/{*rest}", "[\"/api/{version}\"]")).is_empty(),
        "/api/v1/posts is still limited"
    );
    assert_eq!(
        errors(&routed(
            "/api/{*rest}",
            "[\"/api/{version}\", \"/api/{v}/{*rest}\"]"
        ))
        .len(),
        1
    );
    assert_eq!(errors(&routed("/a{{b}}", "[\"/a{{b}}\"]")).len(), 1);
    let everywhere = format!(
        "{}[exempt]\npaths = [\"/\", \"/{{*rest}}\"]\n",
        rule("\"global\"", "")
    );
    let found = errors(&everywhere);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("covers every request rule \"r\""),
        "{found:?}"
    );

    // One mistake, one report.
    let typo = "[[rule]]\nid = \"p\"\nalgorithm = \"fixed_windw\"\nlimit = 2\nwindow = \"1d\"\nkey = { header = \"x-api-key\" }\noverrides = { a = { limit = 5, window = \"1d\" }, b = { limit = 7, window = \"1d\" } }\n";
    assert_eq!(errors(typo).len(), 1, "{:?}", errors(typo));
    let hidden =
        errors("rule = 5\nheaders = { legacy = true }\nexemt = { paths = [\"/healthz\"] }\n");
    assert_eq!(hidden.len(), 2, "{hidden:?}");
    let failed_rule_id = "[[rule]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow = \"1d\"\nkey = \"global\"\n\n[[limit]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1d\"\n";
    assert_eq!(
        errors(failed_rule_id).len(),
        2,
        "{:?}",
        errors(failed_rule_id)
    );
}

#[test]
fn a_field_of_another_algorithm_is_a_mistake_at_its_line() {
    let mistakes = errors(
        "[[rule]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\ncapacity = 3\nkey = \"global\"\n",
    );
    assert_eq!(mistakes.len(), 1, "{mistakes:?}");
    assert!(
        mistakes[0].starts_with("6:12:")
            && mistakes[0].contains("`capacity` is not a field of \"fixed_window\""),
        "{mistakes:?}"
    );
}

/// `counting` chooses how a rule is counted across a fleet: the rule file's choice reaches the
/// store, which decides a leased rule's requests from its lease and a synced rule's on its
/// local copy; an exact rule (the default) asks the shared store every time.
#[tokio::test]
async fn counting_per_rule_reaches_the_fleet_store() {
    let file = parse(
        r#"
[[rule]]
id = "partner-api"
algorithm = "token_bucket"
capacity = 50
refill = { amount = 50, per = "1s" }
key = { header = "x-api-key" }
match = { path = "/partner" }
counting = { lease = { max_units = 10, top_up_every = "500ms", lifetime = "5s" } }

[[rule]]
id = "reads"
algorithm = "token_bucket"
capacity = 50
refill = { amount = 50, per = "1s" }
key = { header = "x-api-key" }
match = { path = "/reads" }
counting = "sync"

[[rule]]
id = "logins"
algorithm = "token_bucket"
capacity = 50
refill = { amount = 50, per = "1s" }
key = { header = "x-api-key" }
match = { path = "/login" }
"#,
    );
    let fleet = tollgate_wrappers::FleetStore::new(MemoryStore::new());
    let layer = RateLimitLayer::new(fleet.clone());
    layer
        .handle()
        .replace_rules(file.rules().clone())
        .expect("the layer's store can count these rules");
    let call = |path| {
        let layer = layer.clone();
        async move {
            let call = Call {
                method: Method::GET,
                path,
                headers: &[("x-api-key", "acme")],
            };
            send(&layer, &call, StatusCode::OK).await.status()
        }
    };
    for _ in 0..10 {
        assert_eq!(call("/login").await, StatusCode::OK);
    }
    assert_eq!(
        fleet.stats().decided_locally,
        0,
        "an exact rule asks the store"
    );
    for _ in 0..10 {
        assert_eq!(call("/partner").await, StatusCode::OK);
        assert_eq!(call("/reads").await, StatusCode::OK);
    }
    let stats = fleet.stats();
    assert!(
        stats.decided_locally >= 15,
        "leased and synced requests were decided here: {stats:?}"
    );
    let rule = RuleId::new("partner-api").expect("valid");
    assert!(fleet.leased(&rule, &tollgate_core::Key::new("acme")) > 0);
}

#[test]
fn a_mistaken_counting_is_reported_at_its_line() {
    let rule = |counting: &str| {
        format!(
            "[[rule]]\nid = \"r\"\nalgorithm = \"token_bucket\"\ncapacity = 5\nrefill = {{ amount = 5, per = \"1s\" }}\nkey = \"global\"\ncounting = {counting}\n"
        )
    };
    let named = errors(&rule("\"leased\""));
    assert!(
        named
            .iter()
            .any(|error| error.contains("7:") && error.contains("\"leased\" is not")),
        "{named:?}"
    );
    let both = errors(&rule("{ lease = {}, sync = {} }"));
    assert!(
        both.iter().any(|error| error.contains("takes one of")),
        "{both:?}"
    );
    let zero = errors(&rule("{ sync = { max_unsynced = 0 } }"));
    assert!(
        zero.iter()
            .any(|error| error.contains("`max_unsynced` must be at least 1")),
        "{zero:?}"
    );
    let unknown = errors(&rule("{ lease = { max = 5 } }"));
    assert!(!unknown.is_empty(), "an unknown setting is a mistake");
}

/// A concurrency rule from a file: its slots are held while responses are alive, its refusals
/// answer 503 with the file's `retry_after`, and a freed slot is taken again.
#[tokio::test]
async fn a_concurrency_rule_from_a_file_holds_slots_and_answers_as_the_file_says() {
    let file = parse(
        r#"
[[rule]]
id = "exports"
algorithm = "concurrency"
limit = 2
retry_after = "3s"
slot_ttl = "90s"
key = "peer_ip"
on_refusal = "unavailable"
"#,
    );
    let quota = *file.rules().rules().next().expect("one rule").quota();
    assert_eq!(
        quota,
        tollgate_core::Quota::concurrency_with(
            2,
            std::time::Duration::from_secs(3),
            std::time::Duration::from_secs(90),
        )
        .expect("valid")
    );
    let layer = layer_with(&file);
    let call = Call::get("/export");
    let running = [
        send(&layer, &call, StatusCode::OK).await,
        send(&layer, &call, StatusCode::OK).await,
    ];
    assert!(
        running
            .iter()
            .all(|response| response.status() == StatusCode::OK)
    );
    let refused = send(&layer, &call, StatusCode::OK).await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "3");
    drop(running);
    assert_eq!(
        send(&layer, &call, StatusCode::OK).await.status(),
        StatusCode::OK
    );
}

#[test]
fn a_concurrency_rules_mistakes_are_reported_at_their_line() {
    let rule = |extra: &str| {
        format!(
            "[[rule]]\nid = \"exports\"\nalgorithm = \"concurrency\"\nkey = \"account\"\n{extra}\n"
        )
    };
    let cases: &[(&str, &str, &str)] = &[
        (
            "limit = 2\nrefill = { amount = 1, per = \"1s\" }",
            "6:10",
            "`refill` is not a field of \"concurrency\", which takes `limit`, `retry_after`, `slot_ttl`",
        ),
        (
            "limit = 2\nwindow = \"1m\"",
            "6:11",
            "not a field of \"concurrency\"",
        ),
        (
            "limit = 2\nslot_ttl = \"100ms\"",
            "6:13",
            "shorter than the supported minimum of 1s",
        ),
        ("limit = 0", "5:9", "at least 1"),
        ("retry_after = \"2s\"", "1:1", "`limit`"),
        (
            "limit = 2\noverrides = { a = \"5/s\" }",
            "6:20",
            "has no period",
        ),
    ];
    for (extra, at, message) in cases {
        let found = errors(&rule(extra));
        assert_eq!(found.len(), 1, "{extra}: {found:?}");
        assert!(
            found[0].starts_with(&format!("{at}: ")),
            "{extra}: {found:?}"
        );
        assert!(found[0].contains(message), "{extra}: {found:?}");
    }
}
