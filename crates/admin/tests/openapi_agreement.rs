//! The document says what the server does: each answer a fuzzer once found the document did not
//! list (issue 28), asked of a real server, and looked up in the document it serves.

mod common;

use common::{Gateway, RULES, gateway};
use reqwest::Method;
use serde_json::Value;

/// The document the gateway serves.
async fn document(gateway: &Gateway) -> Value {
    let (status, document) = Gateway::json(gateway.admin(Method::GET, "/v1/openapi.json")).await;
    assert_eq!(status, 200);
    document
}

/// The operation `method path` of `document`.
fn operation<'d>(document: &'d Value, method: &str, path: &str) -> &'d Value {
    let operation = &document["paths"][path][method.to_lowercase()];
    assert!(
        operation.is_object(),
        "{method} {path} is not in the document"
    );
    operation
}

/// Asserts that `method path` lists `status` among its responses.
fn assert_lists(document: &Value, method: &str, path: &str, status: u16) {
    let responses = &operation(document, method, path)["responses"];
    assert!(
        responses[status.to_string()].is_object(),
        "{method} {path} answers {status}, which the document does not list: {responses}"
    );
}

#[tokio::test]
async fn top_outside_its_documented_range_is_400() {
    let gateway = gateway(RULES).await;
    let document = document(&gateway).await;
    let stats = operation(&document, "GET", "/v1/rules/{id}/stats");
    let top = stats["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .find(|parameter| parameter["name"] == "top")
        .expect("top is documented");
    assert_eq!(top["schema"]["minimum"], 1, "{top}");
    assert_eq!(top["schema"]["maximum"], 100, "{top}");
    for (top, status) in [
        ("0", 400),
        ("101", 400),
        ("-1", 400),
        ("ten", 400),
        ("1", 200),
        ("100", 200),
    ] {
        let (got, body) =
            Gateway::json(gateway.admin(Method::GET, &format!("/v1/rules/reads/stats?top={top}")))
                .await;
        assert_eq!(got, status, "top={top}: {body}");
        assert_lists(&document, "GET", "/v1/rules/{id}/stats", status);
        if status == 400 {
            assert!(body["error"].is_string(), "top={top}: {body}");
        }
    }
}

#[tokio::test]
async fn a_login_that_is_not_a_form_is_415_and_one_without_a_token_422() {
    let gateway = gateway(RULES).await;
    let document = document(&gateway).await;
    let login = gateway.client.post(format!("{}/admin/login", gateway.url));
    for (request, status) in [
        (
            login
                .try_clone()
                .expect("clone")
                .json(&serde_json::json!({"token": "x"})),
            415,
        ),
        (login.try_clone().expect("clone"), 415),
        (
            login.try_clone().expect("clone").form(&[("password", "x")]),
            422,
        ),
        (
            login.try_clone().expect("clone").form(&[("token", "x")]),
            401,
        ),
        (
            login
                .body(vec![b'a'; 100 * 1024])
                .header("content-type", "application/x-www-form-urlencoded"),
            413,
        ),
    ] {
        let (got, body) = Gateway::json(request).await;
        assert_eq!(got, status, "{body}");
        assert_lists(&document, "POST", "/login", status);
        if status != 401 {
            assert!(body["error"].is_string(), "{status}: {body}");
        }
    }
}
