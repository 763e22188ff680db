//! The admin API over real HTTP: authentication, reading and changing rules, stats, resets,
//! health and the precedence of a change over the rule file.

mod common;

use common::{DEPLOY, Gateway, ONCALL, RULES, gateway};
use reqwest::Method;
use serde_json::json;
use tollgate_testing::EventRecorder;

/// Every route of the API, as `(method, path)`.
const ROUTES: &[(&str, &str)] = &[
    ("GET", "/v1/rules"),
    ("GET", "/v1/rules/reads"),
    ("PUT", "/v1/rules/reads"),
    ("PATCH", "/v1/rules/reads"),
    ("DELETE", "/v1/rules/reads/change"),
    ("GET", "/v1/rules/reads/stats"),
    ("POST", "/v1/rules/reads/reset"),
    ("GET", "/v1/health"),
    ("GET", "/v1/openapi.json"),
];

#[tokio::test]
async fn no_token_or_a_wrong_token_is_401_with_a_challenge_and_a_log_line_without_the_token() {
    let recorder = EventRecorder::global();
    let gateway = gateway(RULES).await;
    let wrong = "not-the-token-but-long-enough-0001";
    for (method, path) in ROUTES {
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let url = format!("{}/admin{path}", gateway.url);
        let missing = gateway
            .client
            .request(method.clone(), &url)
            .send()
            .await
            .expect("send");
        assert_eq!(missing.status(), 401, "{method} {path} without a token");
        let challenge = missing.headers()["www-authenticate"]
            .to_str()
            .expect("text")
            .to_owned();
        assert!(challenge.starts_with("Bearer"), "{challenge}");
        let refused = gateway
            .client
            .request(method.clone(), &url)
            .bearer_auth(wrong)
            .send()
            .await
            .expect("send");
        assert_eq!(refused.status(), 401, "{method} {path} with a wrong token");
        assert!(
            refused.headers()["www-authenticate"]
                .to_str()
                .expect("text")
                .contains("invalid_token")
        );
        // Basic and cookies do not open the API.
        let basic = gateway
            .client
            .request(method.clone(), &url)
            .basic_auth("me", Some(ONCALL))
            .send()
            .await
            .expect("send");
        assert_eq!(basic.status(), 401, "{method} {path} with Basic");
    }
    let (status, _) = Gateway::json(gateway.admin(Method::GET, "/v1/rules")).await;
    assert_eq!(status, 200);
    let (status, _) = Gateway::json(
        gateway
            .client
            .get(format!("{}/admin/v1/health", gateway.url))
            .bearer_auth(DEPLOY),
    )
    .await;
    assert_eq!(status, 200, "every named token works");

    let events = recorder.on_target("tollgate::admin");
    let refusals = events
        .iter()
        .filter(|event| event.field("message").is_some_and(|m| m.contains("401")))
        .count();
    assert!(
        refusals >= ROUTES.len() * 3,
        "each refusal is logged ({refusals})"
    );
    for event in &events {
        let text = format!("{:?}", event.fields);
        assert!(
            !text.contains(ONCALL) && !text.contains(wrong) && !text.contains(DEPLOY),
            "a token in a log line: {text}"
        );
    }
}

#[tokio::test]
async fn the_rules_in_force_are_listed_as_the_file_writes_them_with_source_and_version() {
    let gateway = gateway(RULES).await;
    let (status, body) = Gateway::json(gateway.admin(Method::GET, "/v1/rules")).await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = body["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|rule| rule["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["reads", "posts"]);
    assert_eq!(body["rules"][0]["source"], "file");
    assert_eq!(body["rules"][0]["mode"], "enforce");
    assert_eq!(body["rules"][0]["on_store_failure"], "open");
    assert!(
        body["rules"][0]["quota"]
            .as_str()
            .expect("quota")
            .contains("limit = 3")
    );
    assert_eq!(
        body["versions"]["file"],
        gateway.watcher.status().version.expect("version").as_str()
    );
    assert_eq!(body["versions"]["changes"], serde_json::Value::Null);
    let toml = body["toml"].as_str().expect("toml");
    assert!(
        tollgate_config::RuleFile::parse("listed", toml, &tollgate_config::Extractors::new())
            .is_ok()
    );

    let (status, rule) = Gateway::json(gateway.admin(Method::GET, "/v1/rules/posts")).await;
    assert_eq!((status, rule["id"].as_str()), (200, Some("posts")));
    let (status, missing) = Gateway::json(gateway.admin(Method::GET, "/v1/rules/nope")).await;
    assert_eq!(status, 404);
    assert!(missing["error"].as_str().expect("error").contains("nope"));
}

/// The rule `reads` with `limit`, as a PUT body.
fn reads_with(limit: &str) -> String {
    format!(
        "[[rule]]\nid = \"reads\"\nmatch = {{ method = \"GET\", path = \"/hello\" }}\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1h\"\nkey = \"peer_ip\"\n"
    )
}

#[tokio::test]
async fn a_put_with_a_bad_quota_is_422_at_its_line_and_the_old_rule_stays_enforced() {
    let gateway = gateway(RULES).await;
    let (status, body) = Gateway::json(
        gateway
            .admin(Method::PUT, "/v1/rules/reads")
            .body(reads_with("-5")),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    let mistake = &body["errors"][0];
    assert_eq!(mistake["file"], "request body");
    assert_eq!(mistake["line"], 5, "{body}");
    assert!(mistake["column"].as_u64().expect("column") > 1);
    assert!(!mistake["message"].as_str().expect("message").is_empty());
    // Still three an hour.
    gateway.use_up_reads().await;

    // The body must be this one rule.
    let other = reads_with("5").replace("\"reads\"", "\"writes\"");
    let (status, body) =
        Gateway::json(gateway.admin(Method::PUT, "/v1/rules/reads").body(other)).await;
    assert_eq!(status, 422);
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .expect("message")
            .contains("\"reads\""),
        "{body}"
    );
}

#[tokio::test]
async fn after_a_put_the_next_request_is_decided_by_the_new_quota_and_the_change_is_logged() {
    let recorder = EventRecorder::global();
    let gateway = gateway(RULES).await;
    gateway.use_up_reads().await;
    let (status, body) = Gateway::json(
        gateway
            .admin(Method::PUT, "/v1/rules/reads")
            .body(reads_with("5")),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["version"]
            .as_str()
            .expect("version")
            .starts_with("admin-")
    );
    assert_eq!(body["rule"]["source"], "admin");
    // The count carries over: three used of five.
    assert_eq!(gateway.hello().await, 200);
    assert_eq!(gateway.hello().await, 200);
    assert_eq!(gateway.hello().await, 429);

    let version = body["version"].as_str().expect("version").to_owned();
    let logged = recorder
        .on_target("tollgate::admin")
        .into_iter()
        .find(|event| event.field("version") == Some(version.as_str()));
    let logged = logged.expect("the change is logged");
    assert_eq!(logged.field("token"), Some("on-call"));
    assert_eq!(logged.field("rule"), Some("reads"));
    assert!(
        logged
            .field("before")
            .is_some_and(|before| before.contains("limit = 3"))
    );
    assert!(
        logged
            .field("after")
            .is_some_and(|after| after.contains("limit = 5"))
    );
}

#[tokio::test]
async fn a_patch_changes_the_quota_mode_or_policy_and_refuses_anything_else() {
    let gateway = gateway(RULES).await;
    let (status, body) = Gateway::json(
        gateway
            .admin(Method::PATCH, "/v1/rules/reads")
            .json(&json!({"limit": 1})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["rule"]["quota"]
            .as_str()
            .expect("quota")
            .contains("limit = 1")
    );
    assert_eq!(gateway.hello().await, 200);
    assert_eq!(gateway.hello().await, 429);

    let (status, body) = Gateway::json(
        gateway
            .admin(Method::PATCH, "/v1/rules/reads")
            .json(&json!({"mode": "shadow", "on_store_failure": "closed"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["rule"]["mode"].as_str(),
            body["rule"]["on_store_failure"].as_str()
        ),
        (Some("shadow"), Some("closed"))
    );
    assert_eq!(
        gateway.hello().await,
        200,
        "shadow: refusals are let through"
    );

    // A quota of another algorithm replaces the whole quota.
    let bucket = json!({"algorithm": "token_bucket", "capacity": 2, "refill": {"amount": 1, "per": "1h"}, "mode": "enforce"});
    let (status, body) = Gateway::json(
        gateway
            .admin(Method::PATCH, "/v1/rules/reads")
            .json(&bucket),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        !body["rule"]["toml"]
            .as_str()
            .expect("toml")
            .contains("window")
    );

    for (patch, words) in [
        (json!({"key": "global"}), "cannot change \"key\""),
        (json!({}), "nothing to change"),
        (json!([1]), "JSON object"),
        (json!({"limit": null}), "null"),
    ] {
        let (status, body) =
            Gateway::json(gateway.admin(Method::PATCH, "/v1/rules/reads").json(&patch)).await;
        assert_eq!(status, 400, "{patch}");
        assert!(
            body["error"].as_str().expect("error").contains(words),
            "{body}"
        );
    }
    // A bad value: located in the merged rule, which the answer shows.
    let (status, body) = Gateway::json(
        gateway
            .admin(Method::PATCH, "/v1/rules/reads")
            .json(&json!({"capacity": "lots"})),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    let document = body["document"].as_str().expect("document");
    let line = usize::try_from(body["errors"][0]["line"].as_u64().expect("line")).expect("small");
    assert!(
        document
            .lines()
            .nth(line - 1)
            .expect("the line")
            .contains("capacity"),
        "{body}"
    );
    let (status, _) = Gateway::json(
        gateway
            .admin(Method::PATCH, "/v1/rules/nope")
            .json(&json!({"limit": 1})),
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_reset_lets_a_blocked_caller_through_at_once() {
    let recorder = EventRecorder::global();
    let gateway = gateway(RULES).await;
    gateway.use_up_reads().await;
    let (status, body) = Gateway::json(
        gateway
            .admin(Method::POST, "/v1/rules/reads/reset")
            .json(&json!({"key": "127.0.0.1"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cleared"], json!(["reads"]));
    let caller = body["caller"].as_str().expect("caller").to_owned();
    assert_ne!(caller, "127.0.0.1", "shown as a fingerprint");
    assert_eq!(gateway.hello().await, 200);
    let logged = recorder
        .on_target("tollgate::admin")
        .into_iter()
        .any(|event| {
            event.field("caller") == Some(caller.as_str())
                && event.field("token") == Some("on-call")
        });
    assert!(logged, "the reset is logged with the token's name");

    for (body, status) in [
        (json!({"key": "not an address"}), 422),
        (json!({"key": ["127.0.0.1", "extra"]}), 422),
        (json!({"key": []}), 422),
        (json!({"who": "127.0.0.1"}), 400),
        (json!({"key": 1}), 400),
    ] {
        let (got, answer) = Gateway::json(
            gateway
                .admin(Method::POST, "/v1/rules/reads/reset")
                .json(&body),
        )
        .await;
        assert_eq!(got, status, "{body}: {answer}");
    }
    let (status, _) = Gateway::json(
        gateway
            .admin(Method::POST, "/v1/rules/nope/reset")
            .json(&json!({"key": "127.0.0.1"})),
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn stats_count_each_rules_decisions_and_its_top_refused_callers() {
    let gateway = gateway(RULES).await;
    for _ in 0..5 {
        gateway.hello().await;
    }
    let (status, body) =
        Gateway::json(gateway.admin(Method::GET, "/v1/rules/reads/stats?top=5")).await;
    assert_eq!(status, 200, "{body}");
    for window in ["since_start", "last_5_minutes", "last_hour"] {
        assert_eq!(
            body[window],
            json!({"allowed": 3, "refused": 2, "shadow_refused": 0}),
            "{window}"
        );
    }
    assert_eq!(body["per_minute"].as_array().expect("minutes").len(), 60);
    // The counting thread takes refusals off the request path: wait for both.
    let mut top = body["top_refused"].clone();
    for _ in 0..200 {
        if top["callers"][0]["count"] == 2 {
            break;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        top = Gateway::json(gateway.admin(Method::GET, "/v1/rules/reads/stats"))
            .await
            .1["top_refused"]
            .clone();
    }
    assert_eq!(top["scope"], "gateway");
    assert_eq!(top["callers"][0]["count"], 2, "{top}");
    let (status, _) = Gateway::json(gateway.admin(Method::GET, "/v1/rules/nope/stats")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_change_outlives_file_reloads_until_it_is_withdrawn() {
    let gateway = gateway(RULES).await;
    let (status, _) = Gateway::json(
        gateway
            .admin(Method::PATCH, "/v1/rules/reads")
            .json(&json!({"limit": 7})),
    )
    .await;
    assert_eq!(status, 200);
    // The file changes both rules; the changed rule keeps the admin's quota.
    let edited = RULES
        .replace("limit = 3", "limit = 4")
        .replace("limit = 100", "limit = 50");
    std::fs::write(&gateway.rule_file, &edited).expect("edit");
    gateway.watcher.reload().expect("reload");
    let (_, rules) = Gateway::json(gateway.admin(Method::GET, "/v1/rules")).await;
    assert!(
        rules["rules"][0]["quota"]
            .as_str()
            .expect("quota")
            .contains("limit = 7"),
        "{rules}"
    );
    assert_eq!(rules["rules"][0]["source"], "admin");
    assert!(
        rules["rules"][1]["quota"]
            .as_str()
            .expect("quota")
            .contains("limit = 50"),
        "{rules}"
    );
    // Withdrawn: the file's version is back.
    let (status, body) =
        Gateway::json(gateway.admin(Method::DELETE, "/v1/rules/reads/change")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rule"]["source"], "file");
    assert!(
        body["rule"]["quota"]
            .as_str()
            .expect("quota")
            .contains("limit = 4")
    );
    let (status, _) = Gateway::json(gateway.admin(Method::DELETE, "/v1/rules/reads/change")).await;
    assert_eq!(status, 404, "nothing left to withdraw");
}

#[tokio::test]
async fn health_lists_the_rules_alerting_near_their_limit_until_they_clear() {
    use std::time::Duration;
    use tollgate_admin::{Admin, AdminToken};
    use tollgate_config::{Extractors, RuleWatcher};
    use tollgate_core::{MemoryStore, Timestamp};
    use tollgate_testing::ManualClock;
    use tollgate_tower::RateLimitLayer;

    // `reads` alerts at 60 % of its 3 a minute, on the store's manual clock.
    let rules = RULES.replacen(
        "window = \"1h\"\n",
        "window = \"1m\"\nalert_at = \"60%\"\n",
        1,
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let rule_file = dir.path().join("rules.toml");
    std::fs::write(&rule_file, rules).expect("write rules");
    let clock = ManualClock::new(Timestamp::from_secs(1_800_000_000));
    let store = MemoryStore::builder().clock(clock.clone()).build();
    let layer = RateLimitLayer::new(store).alert_clock(clock.clone());
    let watcher = RuleWatcher::start(&rule_file, Extractors::new(), &layer).expect("rules load");
    let admin =
        Admin::new(&layer, AdminToken::new("on-call", ONCALL).expect("token")).rule_file(&watcher);
    let url = common::serve(layer, admin).await;
    let client = reqwest::Client::new();
    let health = || async {
        let request = client
            .get(format!("{url}/admin/v1/health"))
            .bearer_auth(ONCALL);
        let (status, body) = Gateway::json(request).await;
        assert_eq!(status, 200);
        body
    };
    let hello = || async {
        let response = client.get(format!("{url}/hello")).send().await;
        response.expect("hello").status().as_u16()
    };

    assert_eq!(health().await["alerting"], json!([]));
    assert_eq!(hello().await, 200);
    assert_eq!(health().await["alerting"], json!([]), "1 of 3: below 60 %");
    assert_eq!(hello().await, 200);
    let body = health().await;
    assert_eq!(
        body["status"], "ok",
        "traffic near a limit is no trouble of the limiter's"
    );
    let alerting = body["alerting"].as_array().expect("a list");
    assert_eq!(alerting.len(), 1, "{body}");
    assert_eq!(alerting[0]["rule"], "reads");
    assert_eq!(alerting[0]["alert_at"], 0.6);
    let reached = alerting[0]["reached"].as_f64().expect("a number");
    assert!((0.666..0.667).contains(&reached), "2 of 3: {reached}");
    assert_eq!(alerting[0]["since"], 1_800_000_000);

    // The minute's window ends: whole again, and no longer listed.
    clock.advance(Duration::from_secs(60));
    assert_eq!(health().await["alerting"], json!([]));
}

#[tokio::test]
async fn health_reports_the_store_versions_and_the_last_config_error() {
    let gateway = gateway(RULES).await;
    let (status, body) = Gateway::json(gateway.admin(Method::GET, "/v1/health")).await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "ok", "{body}");
    assert_eq!(body["store"]["reachable"], true);
    assert_eq!(body["rules"]["last_error"], serde_json::Value::Null);

    std::fs::write(
        &gateway.rule_file,
        "[[rule]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\n",
    )
    .expect("break the file");
    assert!(gateway.watcher.reload().is_err());
    let (_, body) = Gateway::json(gateway.admin(Method::GET, "/v1/health")).await;
    assert_eq!(body["status"], "degraded");
    assert!(
        body["rules"]["last_error"]
            .as_str()
            .expect("error")
            .contains("rules.toml:"),
        "{body}"
    );
}

#[tokio::test]
async fn rules_built_in_code_are_read_only() {
    use std::time::Duration;
    use tollgate_core::{MemoryStore, Quota};
    use tollgate_tower::key::Global;
    use tollgate_tower::{RateLimitLayer, Rule};

    let layer = RateLimitLayer::new(MemoryStore::new()).rule(
        Rule::new(
            "all",
            Quota::fixed_window(10, Duration::from_secs(1)).expect("quota"),
            Global,
        )
        .expect("rule"),
    );
    let admin = tollgate_admin::Admin::new(
        &layer,
        tollgate_admin::AdminToken::new("on-call", ONCALL).expect("token"),
    );
    let url = common::serve(layer, admin).await;
    let client = reqwest::Client::new();
    let (status, body) = Gateway::json(
        client
            .get(format!("{url}/admin/v1/rules/all"))
            .bearer_auth(ONCALL),
    )
    .await;
    assert_eq!((status, body["source"].as_str()), (200, Some("code")));
    let (status, body) = Gateway::json(
        client
            .patch(format!("{url}/admin/v1/rules/all"))
            .bearer_auth(ONCALL)
            .json(&json!({"limit": 5})),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .expect("error")
            .contains("RuleWatcher")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_patches_at_once_are_both_in_force() {
    let gateway = gateway(RULES).await;
    for round in 0..20 {
        let _ = Gateway::json(gateway.admin(Method::DELETE, "/v1/rules/reads/change")).await;
        let limit = 1_000 + round;
        let (a, b) = tokio::join!(
            Gateway::json(
                gateway
                    .admin(Method::PATCH, "/v1/rules/reads")
                    .json(&json!({"limit": limit}))
            ),
            Gateway::json(
                gateway
                    .admin(Method::PATCH, "/v1/rules/reads")
                    .json(&json!({"mode": "shadow"}))
            ),
        );
        assert_eq!((a.0, b.0), (200, 200));
        let (_, rule) = Gateway::json(gateway.admin(Method::GET, "/v1/rules/reads")).await;
        assert!(
            rule["quota"]
                .as_str()
                .expect("quota")
                .contains(&format!("limit = {limit}")),
            "round {round}: {rule}"
        );
        assert_eq!(rule["mode"], "shadow", "round {round}: {rule}");
    }
}

#[tokio::test]
async fn a_change_refused_only_against_the_file_leaves_no_trace() {
    let rules = format!("{RULES}\n[exempt]\npaths = [\"/internal/{{*rest}}\"]\n");
    let gateway = gateway(&rules).await;
    let covered = "[[rule]]\nid = \"internal\"\nmatch = { path = \"/internal/x\" }\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\nkey = \"peer_ip\"\n";
    let (status, body) = Gateway::json(
        gateway
            .admin(Method::PUT, "/v1/rules/internal")
            .body(covered),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .expect("message")
            .contains("internal"),
        "{body}"
    );
    let (_, health) = Gateway::json(gateway.admin(Method::GET, "/v1/health")).await;
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["rules"]["changes_error"], serde_json::Value::Null);
}

#[tokio::test]
async fn the_listed_rule_file_keeps_exemptions_and_headers() {
    let rules = format!(
        "headers = {{ legacy = true }}\n{RULES}\n[exempt]\npaths = [\"/internal/{{*rest}}\"]\nnetworks = [\"10.0.0.0/8\"]\n"
    );
    let gateway = gateway(&rules).await;
    let (_, listed) = Gateway::json(gateway.admin(Method::GET, "/v1/rules")).await;
    let toml = listed["toml"].as_str().expect("toml");
    assert!(
        toml.contains("[exempt]") && toml.contains("10.0.0.0/8") && toml.contains("legacy"),
        "{toml}"
    );
    assert_eq!(toml, gateway.watcher.to_toml());
}

#[tokio::test]
async fn every_error_is_json_even_the_ones_axum_writes() {
    let gateway = gateway(RULES).await;
    for (request, status) in [
        (
            gateway.admin(Method::GET, "/v1/rules/reads/stats?top=x"),
            400,
        ),
        (
            gateway
                .admin(Method::PUT, "/v1/rules/reads")
                .body(vec![b'x'; 100 * 1024]),
            413,
        ),
        (gateway.admin(Method::POST, "/v1/rules"), 405),
        (gateway.admin(Method::GET, "/v1/nothing-here"), 404),
    ] {
        let request_line = format!("{request:?}");
        let (got, body) = Gateway::json(request).await;
        assert_eq!(got, status, "{request_line}: {body}");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|error| !error.is_empty()),
            "{request_line}: {body}"
        );
    }
}

#[tokio::test]
async fn the_page_escapes_what_callers_and_rule_files_write() {
    use tollgate_config::{Extractors, RuleWatcher};
    use tollgate_core::MemoryStore;
    use tollgate_tower::{KeyLogging, RateLimitLayer};

    let rules = "[[rule]]\nid = \"by-key\"\nmatch = { path = \"/hello\" }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1h\"\nkey = { header = \"x-api-key\" }\n";
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, rules).expect("write");
    // Raw keys: the caller's own bytes are shown.
    let layer = RateLimitLayer::new(MemoryStore::new())
        .key_logging(KeyLogging::Raw)
        .track_top_refused(100);
    let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("load");
    let url = common::serve(layer.clone(), common::admin(&layer, &watcher)).await;
    let client = reqwest::Client::new();
    for _ in 0..3 {
        client
            .get(format!("{url}/hello"))
            .header("x-api-key", "<img src=x onerror=alert(1)>")
            .send()
            .await
            .expect("hello");
    }
    let rule = tollgate_core::RuleId::new("by-key").expect("id");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let report = layer.handle().top_refused(&rule, 1).expect("tracked");
        if report.refusals >= 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the two refusals were never counted: {report:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    std::fs::write(&path, "[[rule]]\nid = \"<script>alert(2)</script>\"\nbogus = \"</pre><script>alert(3)</script>\"\n").expect("write");
    assert!(watcher.reload().is_err());
    let page = client
        .get(format!("{url}/admin"))
        .bearer_auth(ONCALL)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("text");
    assert!(
        page.contains("&lt;img"),
        "the hostile text is shown, escaped: {page}"
    );
    for raw in ["<img", "<script>alert", "</pre><script"] {
        assert!(!page.contains(raw), "unescaped {raw} in the page");
    }
}
