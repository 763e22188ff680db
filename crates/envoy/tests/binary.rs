//! The `tollgate-envoy` binary as an operator runs it: a real process, flags, a rule file on
//! disk, `grpc.health.v1`, `/metrics`, hot reload, SIGTERM, `check` and `migrate`.

mod common;

use std::process::Command;
use std::time::Duration;

use common::binary::{BINARY, Running, write};
use common::request;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

fn rules(limit: u64) -> String {
    format!(
        "[[rule]]\nid = \"per-address\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"remote_address\" }}] }}\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1h\"\n"
    )
}

#[tokio::test]
async fn it_serves_health_and_metrics_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    write(&path, &rules(2));
    let running = Running::start(&[
        "--rules",
        path.to_str().expect("utf-8"),
        "--metrics",
        "127.0.0.1:0",
        "--drain",
        "100ms",
    ]);

    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", running.grpc))
        .expect("an endpoint")
        .connect()
        .await
        .expect("connect");
    let mut health = HealthClient::new(channel);
    let service = "envoy.service.ratelimit.v3.RateLimitService".to_owned();
    let answer = health
        .check(HealthCheckRequest { service })
        .await
        .expect("a health answer")
        .into_inner();
    assert_eq!(answer.status, ServingStatus::Serving as i32);
    let service = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService".to_owned();
    let answer = health
        .check(HealthCheckRequest { service })
        .await
        .expect("a health answer")
        .into_inner();
    assert_eq!(answer.status, ServingStatus::Serving as i32);

    let mut client = running.client().await;
    let ask = || request("edge", &[&[("remote_address", "203.0.113.7")]]);
    let codes: Vec<i32> = [
        client
            .should_rate_limit(ask())
            .await
            .expect("1")
            .into_inner()
            .overall_code,
        client
            .should_rate_limit(ask())
            .await
            .expect("2")
            .into_inner()
            .overall_code,
        client
            .should_rate_limit(ask())
            .await
            .expect("3")
            .into_inner()
            .overall_code,
    ]
    .into();
    assert_eq!(
        codes,
        [Code::Ok as i32, Code::Ok as i32, Code::OverLimit as i32]
    );

    let url = format!(
        "http://{}/metrics",
        running.metrics.expect("a metrics address")
    );
    let text = reqwest::get(&url)
        .await
        .expect("scrape")
        .text()
        .await
        .expect("a body");
    assert!(
        text.contains(r#"tollgate_checks_total{rule="per-address",outcome="allowed"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"tollgate_checks_total{rule="per-address",outcome="refused"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"tollgate_envoy_answers_total{code="over_limit"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"tollgate_config_loads_total{result="success"}"#),
        "{text}"
    );

    let (status, said) = running.terminate();
    assert!(status.success(), "exit {status}");
    assert!(
        said.iter().any(|line| line.ends_with("stopped")),
        "{said:?}"
    );
}

#[tokio::test]
async fn a_rule_file_change_is_in_force_without_a_restart_and_a_bad_one_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    write(&path, &rules(1));
    let running = Running::start(&["--rules", path.to_str().expect("utf-8"), "--drain", "100ms"]);
    let mut client = running.client().await;
    let limit = |response: &tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse| {
        response.statuses[0].current_limit.as_ref().map_or(0, |limit| limit.requests_per_unit)
    };
    let ask = || request("edge", &[&[("remote_address", "198.51.100.1")]]);
    assert_eq!(
        limit(
            &client
                .should_rate_limit(ask())
                .await
                .expect("first")
                .into_inner()
        ),
        1
    );

    write(&path, &rules(100));
    // Wait on the answer, not on a clock: the watcher debounces, then swaps.
    let mut seen = 1;
    for _ in 0..500 {
        seen = limit(
            &client
                .should_rate_limit(ask())
                .await
                .expect("asked")
                .into_inner(),
        );
        if seen == 100 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen, 100, "the change is in force");

    write(&path, "[[rule]]\nid = \"broken\"\nlimit = \"many\"\n");
    // A bad file is refused and logged; the rules in force stay. Ask a few times while the
    // watcher reads it: every answer is the good file's.
    for _ in 0..20 {
        assert_eq!(
            limit(
                &client
                    .should_rate_limit(ask())
                    .await
                    .expect("asked")
                    .into_inner()
            ),
            100
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, printed) = running.terminate();
    assert!(
        status.success(),
        "a clean stop: {status:?}, printed {printed:?}"
    );
}

#[test]
fn a_bad_rule_file_does_not_start_and_says_where() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, "[[rule]]\nid = \"x\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"k\" }] }\nalgorithm = \"pacing\"\nrate = { amount = 1, per = \"1s\" }\nmax_delay = \"1s\"\n").expect("write");
    let output = Command::new(BINARY)
        .args(["serve", "--listen", "127.0.0.1:0", "--rules"])
        .arg(&path)
        .output()
        .expect("run");
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("rules.toml:4:14:") && said.contains("cannot use \"pacing\""),
        "{said}"
    );
}

#[test]
fn check_lists_the_rules_and_migrate_turns_a_ratelimit_config_into_a_rule_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules_path = dir.path().join("rules.toml");
    std::fs::write(&rules_path, rules(20)).expect("write");
    let output = Command::new(BINARY)
        .arg("check")
        .arg(&rules_path)
        .output()
        .expect("check");
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "per-address [edge] remote_address: fixed_window 20 per 1h"
    );

    let yaml = dir.path().join("config.yaml");
    std::fs::write(&yaml, "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: minute\n      requests_per_unit: 20\n").expect("write");
    let output = Command::new(BINARY)
        .arg("migrate")
        .arg(&yaml)
        .output()
        .expect("migrate");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let migrated = dir.path().join("migrated.toml");
    std::fs::write(&migrated, &output.stdout).expect("write");
    let output = Command::new(BINARY)
        .arg("check")
        .arg(&migrated)
        .output()
        .expect("check");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("remote_address: fixed_window 20 per 1m")
    );

    std::fs::write(&yaml, "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 20\n").expect("write");
    let output = Command::new(BINARY)
        .arg("migrate")
        .arg(&yaml)
        .output()
        .expect("migrate");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("config.yaml:5:"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_examples_rule_file_loads_for_the_domain_its_envoy_config_names() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/envoy");
    let output = Command::new(BINARY)
        .arg("check")
        .arg(root.join("rules.toml"))
        .output()
        .expect("check");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed = String::from_utf8_lossy(&output.stdout).into_owned();
    let envoy =
        std::fs::read_to_string(root.join("envoy.yaml")).expect("the example's Envoy config");
    assert!(
        envoy.contains("domain: tollgate") && listed.contains("[tollgate]"),
        "{listed}"
    );
    assert_eq!(listed.lines().count(), 2, "{listed}");
}

#[tokio::test]
async fn with_redis_down_at_start_it_serves_and_each_rule_answers_by_its_policy() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    let rule = |id: &str, policy: &str| {
        format!(
            "[[rule]]\nid = \"{id}\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"{id}\" }}] }}\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\non_store_failure = \"{policy}\"\n"
        )
    };
    write(&path, &(rule("closed", "closed") + &rule("open", "open")));
    // Nothing listens on port 1.
    let running = Running::start(&[
        "--rules",
        path.to_str().expect("utf-8"),
        "--redis",
        "redis://127.0.0.1:1/",
        "--drain",
        "100ms",
    ]);
    let mut client = running.client().await;
    let closed = client
        .should_rate_limit(request("edge", &[&[("closed", "x")]]))
        .await
        .expect_err("closed");
    assert_eq!(closed.code(), tonic::Code::Unavailable);
    let open = client
        .should_rate_limit(request("edge", &[&[("open", "x")]]))
        .await
        .expect("open")
        .into_inner();
    assert_eq!(open.overall_code, Code::Ok as i32);
    let (status, printed) = running.terminate();
    assert!(
        status.success(),
        "a clean stop: {status:?}, printed {printed:?}"
    );
}
