//! Rules for gRPC methods from a file: `match = { grpc = "package.Service/Method" }` (or
//! `"package.Service/*"`) is the method's path, whatever the HTTP method, and wrong forms are mistakes at
//! their line and column.

mod config_common;

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Empty;
use tollgate_config::{Extractors, RuleFile};
use tollgate_core::MemoryStore;
use tollgate_tower::RateLimitLayer;
use tower::{Layer, ServiceExt, service_fn};

fn rule_matching(matching: &str) -> String {
    format!(
        "[[rule]]\nid = \"feed\"\nmatch = {matching}\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\nkey = \"global\"\n"
    )
}

/// How many of 8 calls with `method` to `path` pass the file's rules (5 a minute on the
/// matched route).
async fn passing(file: &RuleFile, method: http::Method, path: &str) -> usize {
    let layer = RateLimitLayer::new(MemoryStore::new());
    layer
        .handle()
        .replace_rules(file.rules().clone())
        .expect("memory counts these rules");
    let service = layer.layer(service_fn(|_: http::Request<()>| async {
        Ok::<_, Infallible>(http::Response::new(Empty::<Bytes>::new()))
    }));
    let mut passed = 0;
    for _ in 0..8 {
        let request = http::Request::builder()
            .method(method.clone())
            .uri(path)
            .body(())
            .expect("a request");
        let response = service.clone().oneshot(request).await.expect("infallible");
        passed += usize::from(response.status() == http::StatusCode::OK);
    }
    passed
}

#[tokio::test]
async fn a_grpc_method_is_its_path_whatever_the_http_method() {
    let post = http::Method::POST;
    let one = rule_matching("{ grpc = \"chirp.v1.Feed/Get\" }");
    let file = RuleFile::parse("rules.toml", &one, &Extractors::new())
        .unwrap_or_else(|errors| panic!("{errors}"));
    assert!(
        file.to_toml().contains("chirp.v1.Feed/Get"),
        "written back as given"
    );
    assert_eq!(passing(&file, post.clone(), "/chirp.v1.Feed/Get").await, 5);
    assert_eq!(passing(&file, post.clone(), "/chirp.v1.Feed/List").await, 8);
    // Another HTTP method is the same call to tonic: counted too.
    assert_eq!(
        passing(&file, http::Method::GET, "/chirp.v1.Feed/Get").await,
        5
    );

    let every = rule_matching("{ grpc = \"chirp.v1.Feed/*\" }");
    let file = RuleFile::parse("rules.toml", &every, &Extractors::new())
        .unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(passing(&file, post.clone(), "/chirp.v1.Feed/List").await, 5);
    assert_eq!(passing(&file, post, "/chirp.v1.Other/List").await, 8);
}

#[test]
fn wrong_grpc_methods_are_mistakes_at_their_line() {
    let cases = [
        ("{ grpc = \"chirp.v1.Feed\" }", "3:19", "names no method"),
        (
            "{ grpc = \"chirp..Feed/Get\" }",
            "3:19",
            "dot-separated identifiers",
        ),
        (
            "{ grpc = \"chirp.Feed/Get-it\" }",
            "3:19",
            "not an identifier",
        ),
        ("{ grpc = 5 }", "3:18", "must be a string"),
        (
            "{ grpc = \"chirp.Feed/Get\", path = \"/x\" }",
            "3:9",
            "not both",
        ),
    ];
    for (matching, at, message) in cases {
        let found = config_common::config_errors(&rule_matching(matching), &Extractors::new());
        assert_eq!(found.len(), 1, "{matching}: {found:?}");
        assert!(
            found[0].starts_with(&format!("{at}: ")),
            "{matching}: {found:?}"
        );
        assert!(found[0].contains(message), "{matching}: {found:?}");
    }
}
