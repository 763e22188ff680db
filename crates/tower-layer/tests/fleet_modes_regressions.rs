//! Split allowances and sub-buckets through the layer: what an adversarial review found, kept
//! as regressions.

#![cfg(feature = "config")]

mod common;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tollgate_core::{FleetStore, MemoryStore};
use tollgate_tower::RateLimitLayer;
use tollgate_tower::config::{Extractors, RuleFile};

use common::server::TestServer;

/// D11 through the layer: a shadow rule with `split = 2` must never refuse a request, but
/// past its part every request gets 429 (FleetStore takes the batch's verdict from the shadow
/// item's would-be decision).
#[tokio::test]
async fn a_shadow_split_rule_never_refuses() {
    let text = r#"
[[rule]]
id = "search"
algorithm = "fixed_window"
limit = 10
window = "1m"
key = "global"
mode = "shadow"
split = 2
"#;
    let file = RuleFile::parse("rules.toml", text, &Extractors::new())
        .unwrap_or_else(|errors| panic!("a valid file:\n{errors}"));
    let layer = RateLimitLayer::new(FleetStore::new(MemoryStore::new())).gateway(0);
    layer.replace_rules(file.rules().clone());
    let server = TestServer::start(
        Router::new()
            .route("/search", get(|| async { "ok" }))
            .layer(layer),
    )
    .await;
    let mut refused = 0;
    for _ in 0..12 {
        let response = server
            .client
            .get(server.url("/search"))
            .send()
            .await
            .expect("the server answers");
        refused += u32::from(response.status() != StatusCode::OK);
    }
    assert_eq!(refused, 0, "a shadow rule refused {refused} of 12 requests");
}

/// D11b: a shadow split rule beside an enforcing rule on the same route. Once the shadow part
/// is used up, FleetStore refuses the whole batch (undoing / not charging the enforcing rule)
/// — does the enforcing limit still hold?
#[tokio::test]
async fn a_shadow_split_rule_does_not_switch_off_an_enforcing_rule() {
    let text = r#"
[[rule]]
id = "watch"
algorithm = "fixed_window"
limit = 10
window = "1m"
key = "global"
mode = "shadow"
split = 2

[[rule]]
id = "cap"
algorithm = "fixed_window"
limit = 8
window = "1m"
key = "global"
"#;
    let file = RuleFile::parse("rules.toml", text, &Extractors::new())
        .unwrap_or_else(|errors| panic!("a valid file:\n{errors}"));
    let layer = RateLimitLayer::new(FleetStore::new(MemoryStore::new())).gateway(0);
    layer.replace_rules(file.rules().clone());
    let server = TestServer::start(
        Router::new()
            .route("/search", get(|| async { "ok" }))
            .layer(layer),
    )
    .await;
    let mut admitted = 0;
    for _ in 0..30 {
        let response = server
            .client
            .get(server.url("/search"))
            .send()
            .await
            .expect("the server answers");
        admitted += u32::from(response.status() == StatusCode::OK);
    }
    assert_eq!(
        admitted, 8,
        "the enforcing cap of 8 let {admitted} of 30 through"
    );
}

mod config_common;

/// Cosmetic: the convention (fleet_modes.rs) is that a conflict is reported at the line of
/// the field that makes it, the last one given; with the fields in the other order the error
/// still points at `split` / `sub_buckets` / `cache_blocked`, not the later field.
#[test]
fn conflicts_are_reported_at_the_later_field_in_either_order() {
    let rule = |extra: &str| {
        format!(
            "[[rule]]\nid = \"r\"\nalgorithm = \"token_bucket\"\ncapacity = 8\nrefill = {{ amount = 8, per = \"1s\" }}\nkey = \"global\"\n{extra}\n"
        )
    };
    let mut wrong = Vec::new();
    for extra in [
        "split = 2\ncounting = \"lease\"",
        "sub_buckets = 2\ncounting = \"sync\"",
        "cache_blocked = true\nsplit = 2",
        "sub_buckets = 2\nsplit = 2",
    ] {
        let errors = config_common::config_errors(&rule(extra), &Extractors::new());
        let line = format!("{}:", 6 + extra.lines().count());
        if !errors.iter().any(|error| error.starts_with(&line)) {
            wrong.push(format!("{extra:?} -> {errors:?}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// An operator's reset on one gateway clears every sub-bucket of the caller in the shared
/// store, though that gateway never counted in them (another gateway did, or it restarted).
#[tokio::test]
async fn a_reset_from_another_gateway_clears_every_sub_bucket() {
    let text = r#"
[[rule]]
id = "search"
algorithm = "fixed_window"
limit = 12
window = "1h"
key = "global"
sub_buckets = 4
"#;
    let file = RuleFile::parse("rules.toml", text, &Extractors::new())
        .unwrap_or_else(|errors| panic!("a valid file:\n{errors}"));
    let shared = MemoryStore::new();
    let busy = RateLimitLayer::new(FleetStore::new(shared.clone()));
    busy.replace_rules(file.rules().clone());
    let admin = RateLimitLayer::new(FleetStore::new(shared.clone()));
    admin.replace_rules(file.rules().clone());
    let server = TestServer::start(
        Router::new()
            .route("/search", get(|| async { "ok" }))
            .layer(busy),
    )
    .await;
    let admitted = || async {
        let mut admitted = 0;
        for _ in 0..30 {
            let response = server
                .client
                .get(server.url("/search"))
                .send()
                .await
                .expect("the server answers");
            admitted += u32::from(response.status() == StatusCode::OK);
        }
        admitted
    };
    assert!(admitted().await >= 6);
    assert_eq!(admitted().await, 0, "spent");
    let done = admin.reset("search", &[]).await.expect("resets");
    assert_eq!(
        done.cleared.len(),
        5,
        "the rule's key and its 4 sub-buckets"
    );
    assert!(
        admitted().await >= 6,
        "the caller's sub-buckets were cleared"
    );
}
