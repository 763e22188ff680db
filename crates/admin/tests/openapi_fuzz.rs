//! schemathesis, a property-based OpenAPI fuzzer, against a live admin API: it reads the
//! document the server serves, generates requests that fit it and requests that do not, sends
//! them to the server, and checks every answer against the document — statuses, content types,
//! bodies, headers, `405` with `Allow` for unlisted methods, `401` without a token, valid data
//! accepted and invalid data refused. Every check, a bounded number of examples per operation,
//! zero findings. `scripts/test` installs it (a pinned version, in its Python virtualenv) and
//! sets `SCHEMATHESIS` to its `st` command.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use common::{Gateway, ONCALL, RULES, gateway_using};
use reqwest::Method;
use tollgate_config::Extractors;
use tollgate_tower::key::ExtensionKey;

/// How to get the fuzzer, for a failure's message.
const HOW_TO_GET_IT: &str = "run scripts/test, which installs it (schemathesis==4.32.5 from PyPI, in target/test-tools/python-venv) and sets SCHEMATHESIS; or `pip install schemathesis==4.32.5` and set SCHEMATHESIS to its `st` command";

/// Test cases per operation and phase: enough to reach every status the document lists, few
/// enough for the whole run to take well under a minute.
const MAX_EXAMPLES: &str = "25";

/// The one check whose default this run changes, and why. A body of the documented shape can
/// still fail the rule file's checks (a quota field its algorithm does not take, a key the
/// service did not register, values that are not a caller of the rule's key): the API answers
/// those `422` with each mistake located, a status the document lists, which a JSON Schema
/// cannot rule out in advance. `400` — a body not of the documented shape — stays a finding
/// for valid data, as do the check's other defaults.
const CONFIG: &str = r#"
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]
"#;

/// The fuzzer's `st` command: `$SCHEMATHESIS` (set by `scripts/test`), else the one
/// `scripts/test` installed in the workspace's test-tools virtualenv (a later `cargo test` of
/// this crate alone finds it there), else `st` on the path.
fn schemathesis() -> String {
    if let Ok(st) = std::env::var("SCHEMATHESIS") {
        return st;
    }
    let installed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools/python-venv/bin/st");
    if installed.is_file() {
        return installed.display().to_string();
    }
    "st".to_owned()
}

/// Runs `st` with `args` in `dir`, failing the test, with how to get it, when it cannot run.
fn run(st: &str, dir: &Path, args: &[String]) -> Output {
    Command::new(st)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {st}: {error}; {HOW_TO_GET_IT}"))
}

/// The account a request is made for, set by the service's own authentication.
#[derive(Clone)]
struct Account(String);

#[tokio::test]
async fn schemathesis_finds_nothing_the_document_does_not_say() {
    let st = schemathesis();
    let dir = tempfile::tempdir().expect("tempdir");
    let version = run(&st, dir.path(), &["--version".to_owned()]);
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    assert!(
        version.contains("version 4."),
        "{st} is not schemathesis 4 ({version:?}), whose command line this test speaks; {HOW_TO_GET_IT}"
    );

    // Rules of each kind the API treats apart: keys named by value (an address), a key built
    // by code (an extension: no value names its callers), another algorithm's quota.
    let rules = format!(
        "{RULES}
[[rule]]
id = \"per-account\"
algorithm = \"fixed_window\"
limit = 5
window = \"1m\"
key = \"account\"

[[rule]]
id = \"bursts\"
match = {{ path = \"/hello\" }}
algorithm = \"token_bucket\"
capacity = 100
refill = {{ amount = 10, per = \"1s\" }}
key = {{ header = \"x-api-key\" }}
"
    );
    let extractors = Extractors::new().with(
        "account",
        ExtensionKey::new(|account: &Account| account.0.clone()),
    );
    let gateway = gateway_using(&rules, extractors, common::admin).await;
    // A change in force, so withdrawing one has something to withdraw.
    let (status, body) = Gateway::json(
        gateway
            .admin(Method::PATCH, "/v1/rules/posts")
            .json(&serde_json::json!({"limit": 50})),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let document = gateway
        .admin(Method::GET, "/v1/openapi.json")
        .send()
        .await
        .expect("openapi")
        .text()
        .await
        .expect("body");
    let operations: usize =
        serde_json::from_str::<serde_json::Value>(&document).expect("json")["paths"]
            .as_object()
            .expect("paths")
            .values()
            .map(|operations| operations.as_object().map_or(0, serde_json::Map::len))
            .sum();
    std::fs::write(dir.path().join("openapi.json"), &document).expect("write document");
    std::fs::write(dir.path().join("schemathesis.toml"), CONFIG).expect("write config");

    let args: Vec<String> = [
        "--config-file",
        "schemathesis.toml",
        "--no-color",
        "run",
        "openapi.json",
        "--url",
        &format!("{}/admin", gateway.url),
        "--header",
        &format!("Authorization: Bearer {ONCALL}"),
        "--checks",
        "all",
        "--max-examples",
        MAX_EXAMPLES,
        "--generation-database",
        "none",
        "--request-timeout",
        "5",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    let started = Instant::now();
    let path = dir.path().to_owned();
    let output = tokio::task::spawn_blocking(move || run(&st, &path, &args))
        .await
        .expect("the fuzzer's thread");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "schemathesis found what the document does not say (replay a case with the curl line it prints; the seed is at the end):\n{report}"
    );
    // Every operation of the document was fuzzed: none left out in silence.
    let tested = format!("Tested: {operations}");
    assert!(
        report.lines().any(|line| line.trim() == tested),
        "not every one of the document's {operations} operations was tested:\n{report}"
    );
    eprintln!(
        "{report}\nschemathesis: {operations} operations, no findings, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
