//! A rule file's fleet modes through the layer: `split` gives each gateway its part of the
//! limit (over real HTTP, one server per gateway), `sub_buckets` spreads a key's count and an
//! operator's reset reaches every sub-bucket, a shadow split rule never refuses, and every
//! mode's mistakes are reported at their line (the later of two conflicting fields).

#[path = "../../tower-layer/tests/common/mod.rs"]
mod common;
mod config_common;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tollgate_config::{Extractors, RuleFile};
use tollgate_core::{FleetStore, MemoryStore};
use tollgate_tower::RateLimitLayer;

use common::server::TestServer;

const SPLIT_RULES: &str = r#"
[[rule]]
id = "search"
algorithm = "fixed_window"
limit = 10
window = "1m"
key = "global"
split = 4
"#;

fn rules(text: &str) -> RuleFile {
    RuleFile::parse("rules.toml", text, &Extractors::new())
        .unwrap_or_else(|errors| panic!("a valid file:\n{errors}"))
}

/// A server answering `/search` behind `layer`, which counts `text`'s rules.
async fn serve<St: tollgate_core::Store>(layer: RateLimitLayer<St>, text: &str) -> TestServer {
    layer.handle().replace_rules(rules(text).rules().clone());
    TestServer::start(
        Router::new()
            .route("/search", get(|| async { "ok" }))
            .layer(layer),
    )
    .await
}

/// How many of `attempts` requests to `server` were let through, and the last
/// `RateLimit-Policy` header seen on a success.
async fn admitted(server: &TestServer, attempts: u32) -> (u32, String) {
    let (mut admitted, mut header) = (0, String::new());
    for _ in 0..attempts {
        let response = server
            .client
            .get(server.url("/search"))
            .send()
            .await
            .expect("the server answers");
        if response.status() == StatusCode::OK {
            admitted += 1;
            if let Some(value) = response.headers().get("ratelimit-policy") {
                header = value.to_str().unwrap_or_default().to_owned();
            }
        } else {
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        }
    }
    (admitted, header)
}

/// Four gateways, each its own server and its own in-memory store (no shared state), reading
/// one rule file with `split = 4` on a limit of 10: gateway i lets through part i (3, 3, 2,
/// 2), which add up to the limit; a gateway that is not told its number takes ⌊10/4⌋ = 2.
#[tokio::test]
async fn a_split_rule_gives_each_gateway_its_part_of_the_limit() {
    let mut parts = Vec::new();
    for index in 0..4 {
        let server = serve(
            RateLimitLayer::new(MemoryStore::new()).gateway(index),
            SPLIT_RULES,
        )
        .await;
        let (got, header) = admitted(&server, 10).await;
        let part = [3, 3, 2, 2][index as usize];
        assert_eq!(
            header,
            format!("\"search\";q={part};w=60"),
            "the policy is this gateway's part"
        );
        parts.push(got);
    }
    assert_eq!(parts, [3, 3, 2, 2]);
    assert_eq!(
        parts.iter().sum::<u32>(),
        10,
        "the parts add up to the limit"
    );
    let server = serve(
        RateLimitLayer::new(FleetStore::new(MemoryStore::new())),
        SPLIT_RULES,
    )
    .await;
    assert_eq!(admitted(&server, 10).await.0, 2);
}

/// `sub_buckets = 4` spreads one key's count over sub-keys of the store under a fleet store:
/// the shared store holds several keys for one caller, and the limit still holds.
#[tokio::test]
async fn sub_buckets_spread_a_key_and_a_reset_from_any_gateway_clears_them() {
    let text = r#"
[[rule]]
id = "search"
algorithm = "fixed_window"
limit = 40
window = "1h"
key = "global"
sub_buckets = 4
"#;
    let shared = MemoryStore::new();
    let server = serve(RateLimitLayer::new(FleetStore::new(shared.clone())), text).await;
    let (got, _) = admitted(&server, 60).await;
    assert!((20..=40).contains(&got), "admitted {got}");
    assert_eq!(shared.stats().keys, 4, "one stored key per sub-bucket");
    assert_eq!(admitted(&server, 10).await.0, 0, "spent");
    // Another gateway, which never counted in the sub-buckets, resets the caller.
    let admin = RateLimitLayer::new(FleetStore::new(shared.clone()));
    admin.handle().replace_rules(rules(text).rules().clone());
    let done = admin.handle().reset("search", &[]).await.expect("resets");
    assert_eq!(
        done.cleared.len(),
        5,
        "the rule's key and its 4 sub-buckets"
    );
    assert!(
        admitted(&server, 60).await.0 >= 20,
        "every sub-bucket was cleared"
    );
}

/// A shadow rule with `split = 2` never refuses a request, alone or beside an enforcing cap of
/// 8, which still holds.
#[tokio::test]
async fn a_shadow_split_rule_never_refuses_and_leaves_the_enforcing_rule_alone() {
    let shadow = r#"
[[rule]]
id = "watch"
algorithm = "fixed_window"
limit = 10
window = "1m"
key = "global"
mode = "shadow"
split = 2
"#;
    let server = serve(
        RateLimitLayer::new(FleetStore::new(MemoryStore::new())).gateway(0),
        shadow,
    )
    .await;
    assert_eq!(admitted(&server, 12).await.0, 12);
    let with_cap = format!(
        "{shadow}\n[[rule]]\nid = \"cap\"\nalgorithm = \"fixed_window\"\nlimit = 8\nwindow = \"1m\"\nkey = \"global\"\n"
    );
    let server = serve(
        RateLimitLayer::new(FleetStore::new(MemoryStore::new())).gateway(0),
        &with_cap,
    )
    .await;
    assert_eq!(admitted(&server, 30).await.0, 8);
}

#[test]
fn fleet_mode_mistakes_are_reported_at_their_line() {
    let rule = |extra: &str| {
        format!(
            "[[rule]]\nid = \"r\"\nalgorithm = \"token_bucket\"\ncapacity = 8\nrefill = {{ amount = 8, per = \"1s\" }}\nkey = \"global\"\n{extra}\n"
        )
    };
    // Each mistake is reported at the line of the field that makes it (the last one given).
    let expect = |extra: &str, says: &str| {
        let errors = config_common::config_errors(&rule(extra), &Extractors::new());
        let line = format!("{}:", 6 + extra.lines().count());
        assert!(
            errors
                .iter()
                .any(|error| error.starts_with(&line) && error.contains(says)),
            "{extra}: {errors:?}"
        );
    };
    expect("split = 16", "a part would be empty");
    expect("split = 0", "`split` must be at least 1");
    expect("counting = \"lease\"\nsplit = 2", "keep one");
    expect("split = 2\ncounting = \"lease\"", "keep one");
    expect("sub_buckets = 2\ncounting = \"sync\"", "counted exactly");
    expect("sub_buckets = 2\nsplit = 2", "counted exactly");
    expect("cache_blocked = true\nsplit = 2", "counted exactly");
    expect("sub_buckets = 9", "a part would be empty");
    expect("sub_buckets = 5000", "above the most");
    expect("counting = \"sync\"\nsub_buckets = 2", "counted exactly");
    expect("split = 2\ncache_blocked = true", "counted exactly");
    expect("cache_blocked = \"yes\"", "true or false");
    expect("store = \"home region\"", "is not a store name");
    let pacing = "[[rule]]\nid = \"p\"\nalgorithm = \"leaky_bucket\"\nrate = { amount = 8, per = \"1s\" }\nmax_delay = \"1s\"\nkey = \"global\"\nsplit = 2\n";
    let errors = config_common::config_errors(pacing, &Extractors::new());
    assert!(
        errors.iter().any(|error| error.contains("pacing")),
        "{errors:?}"
    );
    let fine = rule("sub_buckets = 4\ncache_blocked = true\nstore = \"home\"");
    assert!(config_common::config_errors(&fine, &Extractors::new()).is_empty());
}
