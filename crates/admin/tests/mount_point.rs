//! Where a mounted admin router answers: the status page at the mount point with and without a
//! trailing slash (the OpenAPI document's `/` under `/admin` is `/admin/`), under a deeper
//! path, and at the root.

mod common;

use common::{Gateway, ONCALL, RULES, gateway, serve_app};
use reqwest::Method;
use reqwest::header::{ALLOW, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};

/// A client that shows redirects instead of following them.
fn not_following() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

#[tokio::test]
async fn the_page_answers_at_the_mount_point_with_and_without_a_trailing_slash() {
    let gateway = gateway(RULES).await;
    let client = not_following();
    for address in ["/admin", "/admin/"] {
        let url = format!("{}{address}", gateway.url);
        let page = client
            .get(&url)
            .bearer_auth(ONCALL)
            .send()
            .await
            .expect("page");
        assert_eq!(page.status(), 200, "{address}");
        assert!(
            page.headers()[CONTENT_TYPE]
                .to_str()
                .expect("text")
                .starts_with("text/html"),
            "{address}"
        );
        let html = page.text().await.expect("body");
        // Links are under the mount point whichever address the page was opened at.
        assert!(
            html.contains("action=\"/admin/logout\""),
            "{address}: {html}"
        );

        let anonymous = client.get(&url).send().await.expect("page");
        assert_eq!(anonymous.status(), 303, "{address}");
        assert_eq!(anonymous.headers()[LOCATION], "/admin/login", "{address}");

        let challenged = client
            .get(format!("{url}?auth=basic"))
            .send()
            .await
            .expect("page");
        assert_eq!(challenged.status(), 401, "{address}");
        assert!(challenged.headers().contains_key(WWW_AUTHENTICATE));
        let form = challenged.text().await.expect("body");
        assert!(
            form.contains("action=\"/admin/login\""),
            "{address}: {form}"
        );
    }
}

#[tokio::test]
async fn a_method_the_page_does_not_take_is_405_with_allow_at_either_address() {
    let gateway = gateway(RULES).await;
    for address in ["", "/"] {
        for method in [Method::POST, Method::DELETE, Method::TRACE] {
            let response = gateway
                .admin(method.clone(), address)
                .send()
                .await
                .expect("send");
            assert_eq!(response.status(), 405, "{method} /admin{address}");
            assert_eq!(
                response.headers()[ALLOW],
                "GET,HEAD",
                "{method} /admin{address}"
            );
        }
    }
    let (status, body) = Gateway::json(gateway.admin(Method::POST, "/")).await;
    assert_eq!(status, 405);
    assert!(body["error"].is_string(), "{body}");
}

#[tokio::test]
async fn a_deeper_mount_point_and_the_root_serve_every_route() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, RULES).expect("write");
    let layer = tollgate_tower::RateLimitLayer::new(tollgate_core::MemoryStore::new());
    let watcher =
        tollgate_config::RuleWatcher::start(&path, tollgate_config::Extractors::new(), &layer)
            .expect("load");
    let client = not_following();

    // A trailing slash on the mount point is dropped.
    let deep = serve_app(common::admin(&layer, &watcher).router_at("/ops/admin/")).await;
    for address in ["/ops/admin", "/ops/admin/", "/ops/admin/v1/rules"] {
        let response = client
            .get(format!("{deep}{address}"))
            .bearer_auth(ONCALL)
            .send()
            .await
            .expect("send");
        assert_eq!(response.status(), 200, "{address}");
    }
    let anonymous = client
        .get(format!("{deep}/ops/admin/"))
        .send()
        .await
        .expect("send");
    assert_eq!(anonymous.headers()[LOCATION], "/ops/admin/login");

    // At the root, the router is `Admin::router`: `/` is the page.
    let root = serve_app(common::admin(&layer, &watcher).router_at("/")).await;
    for address in ["/", "/v1/rules"] {
        let response = client
            .get(format!("{root}{address}"))
            .bearer_auth(ONCALL)
            .send()
            .await
            .expect("send");
        assert_eq!(response.status(), 200, "{address}");
    }
}
