//! The document says what the server does: each answer a fuzzer once found the document did not
//! list (issue 28), asked of a real server, and looked up in the document it serves.

mod common;

use common::{Gateway, RULES, gateway, gateway_using};
use reqwest::Method;
use serde_json::{Value, json};
use tollgate_config::Extractors;
use tollgate_tower::key::ExtensionKey;

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

/// The schema of `method path`'s `media_type` request body, resolved.
fn request_schema<'d>(
    document: &'d Value,
    method: &str,
    path: &str,
    media_type: &str,
) -> &'d Value {
    let schema = &operation(document, method, path)["requestBody"]["content"][media_type]["schema"];
    match schema["$ref"].as_str() {
        Some(reference) => {
            &document["components"]["schemas"]
                [reference.trim_start_matches("#/components/schemas/")]
        }
        None => schema,
    }
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

#[tokio::test]
async fn a_patch_of_another_shape_is_400_and_a_rule_it_breaks_422() {
    let gateway = gateway(RULES).await;
    let document = document(&gateway).await;
    let schema = request_schema(&document, "PATCH", "/v1/rules/{id}", "application/json");
    assert_eq!(schema["minProperties"], 1, "{schema}");
    assert_eq!(schema["additionalProperties"], false, "{schema}");
    assert!(schema["properties"]["limit"].is_object(), "{schema}");
    for patch in [
        json!({}),
        json!({"key": "global"}),
        json!({"limit": null}),
        json!([1]),
    ] {
        let (status, body) =
            Gateway::json(gateway.admin(Method::PATCH, "/v1/rules/reads").json(&patch)).await;
        assert_eq!(status, 400, "{patch}: {body}");
        assert_lists(&document, "PATCH", "/v1/rules/{id}", 400);
    }
    // Of the documented shape, but a field the rule's algorithm does not take.
    let (status, body) = Gateway::json(
        gateway
            .admin(Method::PATCH, "/v1/rules/reads")
            .json(&json!({"capacity": 5})),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_lists(&document, "PATCH", "/v1/rules/{id}", 422);
    assert!(body["errors"][0]["line"].is_u64(), "{body}");
}

/// The account a request is made for, set by the service's own authentication.
#[derive(Clone)]
struct Account(String);

#[tokio::test]
async fn a_reset_of_a_key_no_value_names_is_409_and_values_of_no_caller_422() {
    let rules = format!(
        "{RULES}\n[[rule]]\nid = \"per-account\"\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\nkey = \"account\"\n"
    );
    let extractors = Extractors::new().with(
        "account",
        ExtensionKey::new(|account: &Account| account.0.clone()),
    );
    let gateway = gateway_using(&rules, extractors, common::admin).await;
    let document = document(&gateway).await;
    for (rule, key, status) in [
        ("per-account", json!("acct-1"), 409),
        ("reads", json!("not an address"), 422),
        ("reads", json!(["127.0.0.1", "extra"]), 422),
        ("reads", json!("127.0.0.1"), 200),
    ] {
        let (got, body) = Gateway::json(
            gateway
                .admin(Method::POST, &format!("/v1/rules/{rule}/reset"))
                .json(&json!({ "key": key })),
        )
        .await;
        assert_eq!(got, status, "{rule} {key}: {body}");
        assert_lists(&document, "POST", "/v1/rules/{id}/reset", status);
    }
}

#[tokio::test]
async fn a_rule_put_as_json_is_its_toml_table_and_both_are_documented() {
    let gateway = gateway(RULES).await;
    let document = document(&gateway).await;
    let content = &operation(&document, "PUT", "/v1/rules/{id}")["requestBody"]["content"];
    assert!(content["application/toml"].is_object(), "{content}");
    let schema = request_schema(&document, "PUT", "/v1/rules/{id}", "application/json");
    assert_eq!(schema["type"], "object", "{schema}");
    assert_eq!(
        schema["required"],
        json!(["id", "algorithm", "key"]),
        "{schema}"
    );

    let one_an_hour = json!({
        "id": "reads",
        "match": {"method": "GET", "path": "/hello"},
        "algorithm": "fixed_window",
        "limit": 1,
        "window": "1h",
        "key": "peer_ip",
    });
    let (status, body) = Gateway::json(
        gateway
            .admin(Method::PUT, "/v1/rules/reads")
            .json(&one_an_hour),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_lists(&document, "PUT", "/v1/rules/{id}", 200);
    let toml = body["rule"]["toml"].as_str().expect("toml");
    assert!(toml.contains("limit = 1\n"), "{toml}");
    assert_eq!(gateway.hello().await, 200);
    assert_eq!(gateway.hello().await, 429, "the JSON rule is in force");

    // A mistake is located in the table the JSON was written as, which the answer carries.
    let mut bad = one_an_hour.clone();
    bad["limit"] = json!(0);
    let (status, body) =
        Gateway::json(gateway.admin(Method::PUT, "/v1/rules/reads").json(&bad)).await;
    assert_eq!(status, 422, "{body}");
    assert_lists(&document, "PUT", "/v1/rules/{id}", 422);
    let written = body["document"].as_str().expect("document");
    let line = usize::try_from(body["errors"][0]["line"].as_u64().expect("line")).expect("small");
    assert!(
        written
            .lines()
            .nth(line - 1)
            .expect("the line")
            .starts_with("limit = 0"),
        "{body}"
    );

    // What TOML cannot hold, or not an object: 400.
    let mut null = one_an_hour.clone();
    null["match"]["method"] = Value::Null;
    for body in [null, json!(["reads"]), json!("reads")] {
        let (status, answer) =
            Gateway::json(gateway.admin(Method::PUT, "/v1/rules/reads").json(&body)).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_lists(&document, "PUT", "/v1/rules/{id}", 400);
    }
    let (_, answer) = Gateway::json(gateway.admin(Method::PUT, "/v1/rules/reads").json(&json!({
        "id": "reads", "algorithm": "fixed_window", "key": "peer_ip", "match": {"method": null}
    })))
    .await;
    assert!(
        answer["error"]
            .as_str()
            .expect("error")
            .contains("`match.method`"),
        "{answer}"
    );

    // TOML as before: said so, or said nothing.
    let toml = "[[rule]]\nid = \"reads\"\nmatch = { method = \"GET\", path = \"/hello\" }\nalgorithm = \"fixed_window\"\nlimit = 7\nwindow = \"1h\"\nkey = \"peer_ip\"\n";
    for content_type in [Some("application/toml"), None] {
        let mut request = gateway.admin(Method::PUT, "/v1/rules/reads").body(toml);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let (status, body) = Gateway::json(request).await;
        assert_eq!(status, 200, "{content_type:?}: {body}");
    }
}

#[tokio::test]
async fn a_method_a_path_does_not_list_is_405_with_allow_naming_the_listed_ones() {
    let gateway = gateway(RULES).await;
    let document = document(&gateway).await;
    let every = ["GET", "PUT", "POST", "PATCH", "DELETE", "OPTIONS", "TRACE"];
    for (path, operations) in document["paths"].as_object().expect("paths") {
        let mut listed: Vec<String> = operations
            .as_object()
            .expect("operations")
            .keys()
            .map(|method| method.to_uppercase())
            .collect();
        if listed.iter().any(|method| method == "GET") {
            listed.push("HEAD".to_owned());
        }
        listed.sort();
        // Under the mount point, as a client joins them: `/` is `/admin/`.
        let address = path.replace("{id}", "reads");
        for method in every
            .iter()
            .filter(|method| !listed.iter().any(|m| m == *method))
        {
            let response = gateway
                .admin(
                    Method::from_bytes(method.as_bytes()).expect("method"),
                    &address,
                )
                .send()
                .await
                .expect("send");
            assert_eq!(response.status(), 405, "{method} {path}");
            let mut allowed: Vec<String> = response.headers()["allow"]
                .to_str()
                .expect("text")
                .split(',')
                .map(|method| method.trim().to_owned())
                .collect();
            allowed.sort();
            assert_eq!(allowed, listed, "{method} {path}");
        }
    }
}

#[tokio::test]
async fn withdrawing_a_change_deletes_the_change_not_the_rule() {
    let gateway = gateway(RULES).await;
    let document = document(&gateway).await;
    assert!(
        document["paths"]["/v1/rules/{id}"]["delete"].is_null(),
        "a DELETE of the rule would promise it gone"
    );
    let (status, body) = Gateway::json(
        gateway
            .admin(Method::PATCH, "/v1/rules/reads")
            .json(&json!({"limit": 9})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let response = gateway
        .admin(Method::DELETE, "/v1/rules/reads")
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 405);

    let (status, body) =
        Gateway::json(gateway.admin(Method::DELETE, "/v1/rules/reads/change")).await;
    assert_eq!(status, 200, "{body}");
    assert_lists(&document, "DELETE", "/v1/rules/{id}/change", 200);
    // The rule is still there, as the file has it; the change is gone.
    let (status, rule) = Gateway::json(gateway.admin(Method::GET, "/v1/rules/reads")).await;
    assert_eq!(
        (status, rule["source"].as_str()),
        (200, Some("file")),
        "{rule}"
    );
    let (status, _) = Gateway::json(gateway.admin(Method::DELETE, "/v1/rules/reads/change")).await;
    assert_eq!(status, 404);
    assert_lists(&document, "DELETE", "/v1/rules/{id}/change", 404);
}

#[tokio::test]
async fn a_json_rules_match_and_key_are_typed_as_the_rule_file_takes_them() {
    let gateway = gateway(RULES).await;
    let document = document(&gateway).await;
    let schemas = &document["components"]["schemas"];
    assert_eq!(schemas["RuleMatch"]["additionalProperties"], false);
    assert!(
        schemas["KeyKind"]["anyOf"].is_array(),
        "{}",
        schemas["KeyKind"]
    );
    let rule = |key: Value, method: Value| {
        json!({
            "id": "reads",
            "match": {"method": method, "path": "/hello"},
            "algorithm": "fixed_window",
            "limit": 3,
            "window": "1h",
            "key": key,
        })
    };
    for (key, method, status) in [
        (json!({"header": "x-api-key"}), json!(["GET", "HEAD"]), 200),
        (json!(["peer_ip", "endpoint"]), json!("GET"), 200),
        (json!({"peer_ip": {"ipv6_prefix": 48}}), json!("GET"), 200),
        (
            json!({"client_ip": {"trusted_proxies": ["10.0.0.0/8"], "header": "x-forwarded-for"}}),
            json!("GET"),
            200,
        ),
        // What the schema refuses, the server refuses too.
        (json!({"header": "x-api-key", "also": 1}), json!("GET"), 422),
        (json!({"peer_ip": {"ipv4_prefix": 33}}), json!("GET"), 422),
        (json!([]), json!("GET"), 422),
        (json!("peer_ip"), json!([]), 422),
    ] {
        let body = rule(key, method);
        let (got, answer) =
            Gateway::json(gateway.admin(Method::PUT, "/v1/rules/reads").json(&body)).await;
        assert_eq!(got, status, "{body}: {answer}");
    }
}
