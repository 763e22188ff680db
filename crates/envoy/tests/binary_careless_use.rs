//! The `tollgate-envoy` binary treated carelessly — its rule file deleted, replaced by a
//! directory, SIGHUP at odd times, SIGTERM with clients holding connections and quota streams,
//! Redis nowhere — and its metrics' labels.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::binary::{BINARY, Running, write};
use common::request;
use tokio::sync::mpsc as tokio_mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tollgate_envoy::envoy_types::pb::envoy::service::rate_limit_quota::v3::RateLimitQuotaUsageReports;
use tollgate_envoy::envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;

fn rules(limit: u64) -> String {
    format!(
        "[[rule]]\nid = \"per-address\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"remote_address\" }}] }}\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1h\"\n"
    )
}

fn limit(response: &RateLimitResponse) -> u32 {
    response.statuses[0]
        .current_limit
        .as_ref()
        .map_or(0, |limit| limit.requests_per_unit)
}

async fn limit_now(client: &mut RateLimitServiceClient<tonic::transport::Channel>) -> u32 {
    let response = client
        .should_rate_limit(request("edge", &[&[("remote_address", "198.51.100.1")]]))
        .await
        .expect("an answer")
        .into_inner();
    limit(&response)
}

/// Waits (up to 10 s) until the limit in force is `wanted`; the last seen.
async fn wait_for_limit(
    client: &mut RateLimitServiceClient<tonic::transport::Channel>,
    wanted: u32,
) -> u32 {
    let mut seen = 0;
    for _ in 0..500 {
        seen = limit_now(client).await;
        if seen == wanted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    seen
}

#[tokio::test]
async fn a_deleted_or_directory_rule_file_keeps_the_rules_and_a_new_file_is_followed() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("rules.toml");
    write(&path, &rules(7));
    let mut running =
        Running::start(&["--rules", path.to_str().expect("utf-8"), "--drain", "100ms"]);
    let mut client = running.client().await;
    assert_eq!(limit_now(&mut client).await, 7);

    std::fs::remove_file(&path).expect("delete");
    tokio::time::sleep(Duration::from_millis(500)).await;
    running.signal("-HUP");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(running.alive());
    assert_eq!(
        limit_now(&mut client).await,
        7,
        "deleted: the rules in force stay"
    );

    std::fs::create_dir(&path).expect("a directory in its place");
    tokio::time::sleep(Duration::from_millis(500)).await;
    running.signal("-HUP");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(running.alive());
    assert_eq!(
        limit_now(&mut client).await,
        7,
        "a directory: the rules in force stay"
    );

    std::fs::remove_dir(&path).expect("remove the directory");
    std::fs::write(&path, rules(9)).expect("a file again");
    assert_eq!(
        wait_for_limit(&mut client, 9).await,
        9,
        "a file again is followed"
    );

    // An empty file (a truncating editor's first write) is refused; the rules stay.
    std::fs::write(&path, "").expect("truncate");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(limit_now(&mut client).await, 9);
    std::fs::write(&path, rules(11)).expect("write in place");
    assert_eq!(
        wait_for_limit(&mut client, 11).await,
        11,
        "an in-place write is followed"
    );

    // The directory holding the file replaced (a ConfigMap's `..data` swap, by hand).
    let other = tempfile::tempdir().expect("another directory");
    std::fs::write(other.path().join("rules.toml"), rules(13)).expect("write");
    let moved = dir.path().join("old");
    std::fs::create_dir(&moved).expect("mkdir");
    std::fs::rename(&path, moved.join("rules.toml")).expect("move away");
    std::os::unix::fs::symlink(other.path().join("rules.toml"), &path).expect("symlink");
    assert_eq!(
        wait_for_limit(&mut client, 13).await,
        13,
        "a symlink swap is followed"
    );
    // SIGHUP storms do not stop it.
    for _ in 0..50 {
        running.signal("-HUP");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(running.alive());
    assert_eq!(limit_now(&mut client).await, 13);
}

/// SIGTERM while a client holds an idle connection and another holds an RLQS stream open:
/// exit 0 within the drain, and a new call after the stop began is refused.
#[tokio::test]
async fn sigterm_with_clients_connected_exits_within_the_drain() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("rules.toml");
    write(&path, &rules(5));
    let mut running = Running::start(&["--rules", path.to_str().expect("utf-8"), "--drain", "1s"]);
    let mut client = running.client().await;
    assert_eq!(limit_now(&mut client).await, 5);
    let mut quotas = RateLimitQuotaServiceClient::connect(format!("http://{}", running.grpc))
        .await
        .expect("connect");
    let (reports, outbound) = tokio_mpsc::channel::<RateLimitQuotaUsageReports>(4);
    let _answers = quotas
        .stream_rate_limit_quotas(ReceiverStream::new(outbound))
        .await
        .expect("a stream");
    let started = Instant::now();
    running.signal("-TERM");
    let status = loop {
        if let Some(status) = running.exited() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "still running 10 s after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    drop(reports);
    let said: Vec<String> = running.printed();
    assert!(
        said.iter().any(|line| line.ends_with("stopped")),
        "{said:?}"
    );
}

#[tokio::test]
async fn redis_nowhere_still_serves_by_each_rules_policy() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("rules.toml");
    write(
        &path,
        &(rules(5).replace("per-address", "open")
            + "on_store_failure = \"open\"\n"
            + &rules(5)
                .replace("per-address", "closed")
                .replace("remote_address", "user")
            + "on_store_failure = \"closed\"\n"),
    );
    let running = Running::start(&[
        "--rules",
        path.to_str().expect("utf-8"),
        "--redis",
        "redis://127.0.0.1:1/",
        "--store-timeout",
        "20ms",
        "--drain",
        "100ms",
    ]);
    let mut client = running.client().await;
    let started = Instant::now();
    let open = client
        .should_rate_limit(request("edge", &[&[("remote_address", "198.51.100.1")]]))
        .await
        .expect("open answers");
    assert_eq!(open.get_ref().overall_code, 1);
    let closed = client
        .should_rate_limit(request("edge", &[&[("user", "alice")]]))
        .await
        .expect_err("closed fails");
    assert_eq!(closed.code(), tonic::Code::Unavailable);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn metrics_name_each_answer_and_rule() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("rules.toml");
    write(&path, &rules(1));
    let running = Running::start(&[
        "--rules",
        path.to_str().expect("utf-8"),
        "--metrics",
        "127.0.0.1:0",
        "--drain",
        "100ms",
    ]);
    let mut client = running.client().await;
    for _ in 0..2 {
        let _ = client
            .should_rate_limit(request("edge", &[&[("remote_address", "198.51.100.1")]]))
            .await;
    }
    let _ = client
        .should_rate_limit(request("", &[&[("k", "v")]]))
        .await;
    let metrics = running.metrics.expect("a metrics address");
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .expect("scrape")
        .text()
        .await
        .expect("text");
    for wanted in [
        "tollgate_envoy_answers_total{code=\"ok\"} 1",
        "tollgate_envoy_answers_total{code=\"over_limit\"} 1",
        "tollgate_envoy_answers_total{code=\"invalid_argument\"} 1",
        "tollgate_config_loads_total{result=\"success\"} 1",
    ] {
        assert!(text.contains(wanted), "{wanted} not in:\n{text}");
    }
    assert!(
        text.lines()
            .any(|line| line.starts_with("tollgate_checks_total{")
                && line.contains("rule=\"per-address\"")),
        "{text}"
    );
}

#[test]
fn migrate_of_a_deeply_nested_file_is_refused_not_a_crash() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("deep.yaml");
    std::fs::write(
        &path,
        format!("domain: edge\ndescriptors:\n{}x\n", "- ".repeat(50_000)),
    )
    .expect("write");
    let output = Command::new(BINARY)
        .arg("migrate")
        .arg(&path)
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1), "{:?}", output);
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("deep.yaml:"), "{said}");
}
