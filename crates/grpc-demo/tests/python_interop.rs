//! Interop with an independent gRPC client: Python's grpcio (with grpcio-status) calls the demo's
//! feed service and reads the refusal from `grpc-status-details-bin` — the same code, delay and
//! policy as tonic's client reads. `scripts/test` installs grpcio and grpcio-status into a
//! virtualenv under `target/` and names its python in `GRPC_PYTHON`. The demo's rules are
//! counted at a standing clock, so the delay both clients read is the rule's whole refill
//! interval, however long either burst took.

mod common;

use std::process::Command;
use std::time::Duration;

use tollgate_grpc_demo::feed::FeedRequest;
use tollgate_grpc_demo::feed::feed_client::FeedClient;
use tonic_types::StatusExt;

/// The python with grpcio: `GRPC_PYTHON`, else `python3` if it has grpcio; a clear failure
/// otherwise.
fn python() -> String {
    if let Ok(python) = std::env::var("GRPC_PYTHON") {
        return python;
    }
    let has_grpc = Command::new("python3")
        .args(["-c", "import grpc, grpc_status"])
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        has_grpc,
        "this test needs Python's grpcio and grpcio-status: run scripts/test (it installs them \
         into target/test-tools/python-venv), or `pip install grpcio grpcio-status` and set \
         GRPC_PYTHON to that python"
    );
    "python3".to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_reads_the_same_code_delay_and_policy_as_tonic() {
    let address = common::serve_at_a_standing_clock().await;

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop.py");
    let python = python();
    let address_text = address.to_string();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .args([script, &address_text, "py-caller"])
            .output()
            .expect("python runs")
    })
    .await
    .expect("the task ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "python failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON");
    assert_eq!(answer["code"], "RESOURCE_EXHAUSTED", "{answer}");
    assert_eq!(answer["status_code"], 8, "{answer}");
    assert_eq!(answer["subject"], "feed-get", "{answer}");
    let python_delay = answer["retry_delay"].as_f64().expect("a RetryInfo delay");

    // tonic, on an account of its own: the same rule, the same answer.
    let mut client = FeedClient::connect(format!("http://{address}"))
        .await
        .expect("connects");
    let call = || {
        let mut request = tonic::Request::new(FeedRequest {
            account: "rust-caller".to_owned(),
        });
        request
            .metadata_mut()
            .insert("x-account", "rust-caller".parse().expect("ascii"));
        request
    };
    for _ in 0..5 {
        client.get(call()).await.expect("allowed");
    }
    let refused = client.get(call()).await.expect_err("refused");
    assert_eq!(refused.code() as i32, 8);
    let tonic_delay = refused
        .get_details_retry_info()
        .and_then(|info| info.retry_delay)
        .expect("a RetryInfo");
    // Both were told the wait until the next token: 2 s, the same to the nanosecond.
    assert_eq!(tonic_delay, Duration::from_secs(2));
    assert_eq!(Duration::from_secs_f64(python_delay), tonic_delay);
}
