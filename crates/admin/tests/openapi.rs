//! The OpenAPI document: served by the router, valid OpenAPI 3.1 by a real validator (the
//! Python `openapi-spec-validator`, which `scripts/test` installs), listing every route the
//! router serves.

mod common;

use std::process::Command;

use common::{Gateway, RULES, gateway};
use reqwest::Method;

/// The Python that has `openapi_spec_validator`: `$OPENAPI_SPEC_PYTHON` (set by
/// `scripts/test`), else `python3`.
fn validator_python() -> String {
    std::env::var("OPENAPI_SPEC_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Runs the validator on `document`; its exit status and output.
fn validate(document: &str) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, document).expect("write");
    let python = validator_python();
    let output = Command::new(&python)
        .args(["-m", "openapi_spec_validator"])
        .arg(&path)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {python}: {error}; run scripts/test, which installs openapi-spec-validator, or `pip install openapi-spec-validator` and set OPENAPI_SPEC_PYTHON"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !text.contains("No module named"),
        "{python} has no openapi_spec_validator: run scripts/test (it installs it) or `pip install openapi-spec-validator` and set OPENAPI_SPEC_PYTHON\n{text}"
    );
    (output.status.success(), text)
}

#[tokio::test]
async fn the_served_document_is_valid_openapi_3_1_and_lists_every_route() {
    let gateway = gateway(RULES).await;
    let response = gateway
        .admin(Method::GET, "/v1/openapi.json")
        .send()
        .await
        .expect("openapi");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let text = response.text().await.expect("body");
    let (valid, report) = validate(&text);
    assert!(valid, "the validator refused the document:\n{report}");

    // The validator is real: it refuses a broken document.
    let mut broken: serde_json::Value = serde_json::from_str(&text).expect("json");
    broken["paths"]["/v1/rules"]["get"]["responses"] = serde_json::json!("none");
    let (valid, _) = validate(&broken.to_string());
    assert!(!valid, "a broken document passed");

    let document: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(document["openapi"], "3.1.0");
    let mut listed: Vec<(String, String)> = Vec::new();
    for (path, operations) in document["paths"].as_object().expect("paths") {
        for method in operations.as_object().expect("operations").keys() {
            listed.push((method.to_uppercase(), path.clone()));
        }
    }
    listed.sort();
    let mut served: Vec<(String, String)> = [
        ("GET", "/v1/rules"),
        ("GET", "/v1/rules/{id}"),
        ("PUT", "/v1/rules/{id}"),
        ("PATCH", "/v1/rules/{id}"),
        ("DELETE", "/v1/rules/{id}/change"),
        ("GET", "/v1/rules/{id}/stats"),
        ("POST", "/v1/rules/{id}/reset"),
        ("GET", "/v1/health"),
        ("GET", "/v1/openapi.json"),
        ("GET", "/"),
        ("GET", "/login"),
        ("POST", "/login"),
        ("POST", "/logout"),
    ]
    .iter()
    .map(|(method, path)| ((*method).to_owned(), (*path).to_owned()))
    .collect();
    served.sort();
    assert_eq!(listed, served);

    // Every listed route is served: never 404 for an unknown route or 405.
    for (method, path) in &listed {
        // The page is the mount point itself: `/admin`.
        let path = if path == "/" {
            String::new()
        } else {
            path.replace("{id}", "reads")
        };
        let request = gateway.admin(
            Method::from_bytes(method.as_bytes()).expect("method"),
            &path,
        );
        let request = match method.as_str() {
            "POST" if path == "/login" => request.form(&[("token", "x")]),
            "POST" | "PATCH" => request.json(&serde_json::json!({})),
            _ => request,
        };
        let (status, body) = Gateway::json(request).await;
        assert!(
            status != 405 && body["error"] != "no such admin route",
            "{method} {path}: {status} {body}"
        );
    }
}
