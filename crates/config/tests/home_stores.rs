//! A rule file whose security rule says `store = "home"`, through a real axum server and a real
//! client: the login rule is counted in the layer's home store and the rest in the default one,
//! a request refused at home leaves no charge locally, and a file naming a store the layer does
//! not have is refused at the rule's `store` line.

#[path = "../../tower-layer/tests/common/mod.rs"]
mod common;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tollgate_config::{Extractors, RuleWatcher, WatchError};
use tollgate_core::{Item, Key, MemoryStore, Quota, RuleId, Store};
use tollgate_tower::RateLimitLayer;
use tollgate_wrappers::Stores;

use common::server::{Reply, TestServer};

const RULES: &str = r#"[[rule]]
id = "login"
algorithm = "fixed_window"
limit = 2
window = "1h"
key = "global"
store = "home"

[[rule]]
id = "reads"
algorithm = "fixed_window"
limit = 100
window = "1h"
key = "global"
"#;

fn two_regions() -> Stores<MemoryStore> {
    Stores::new(MemoryStore::new())
        .with("home", MemoryStore::new())
        .expect("a valid name")
}

/// What a peek at `rule`'s global count (a one-hour window of `limit`) in `store` says would
/// remain after one more.
async fn remaining(store: &MemoryStore, rule: &str, limit: u64) -> u64 {
    let (rule, key) = (RuleId::new(rule).expect("valid"), Key::global());
    let quota = Quota::fixed_window(limit, std::time::Duration::from_secs(3_600)).expect("valid");
    let item = Item::new(&rule, quota, &key);
    store.peek(&item).await.expect("peek").remaining()
}

#[tokio::test]
async fn a_home_rule_from_a_rule_file_is_counted_in_the_home_store() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, RULES).expect("write the rule file");
    let layer = RateLimitLayer::new(two_regions());
    let _watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("a valid file");
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer.clone());
    let server = TestServer::start(app).await;

    for _ in 0..2 {
        let reply = Reply::send(server.client.get(server.url("/"))).await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    let refused = Reply::send(server.client.get(server.url("/"))).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);

    let stores = layer.store();
    let home = stores.named("home").expect("a home store");
    assert_eq!(
        remaining(home, "login", 2).await,
        0,
        "both logins spent at home"
    );
    assert_eq!(
        remaining(stores.default_store(), "login", 2).await,
        1,
        "none locally"
    );
    assert_eq!(
        remaining(stores.default_store(), "reads", 100).await,
        97,
        "two reads counted locally; the refused request's read refunded"
    );
    assert_eq!(remaining(home, "reads", 100).await, 99, "no reads at home");
}

#[tokio::test]
async fn a_rule_file_naming_an_unknown_store_is_refused_at_its_line() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, RULES.replace("\"home\"", "\"hoem\"")).expect("write the rule file");
    let layer = RateLimitLayer::new(two_regions());
    let Err(WatchError::Invalid(errors)) = RuleWatcher::start(&path, Extractors::new(), &layer)
    else {
        panic!("a file naming an unknown store must be refused");
    };
    let text = errors.to_string();
    assert!(text.contains("rules.toml:7:"), "{text}");
    assert!(text.contains("\"hoem\""), "{text}");

    // A plain store knows no names at all.
    let plain = RateLimitLayer::new(MemoryStore::new());
    let path = dir.path().join("home.toml");
    std::fs::write(&path, RULES).expect("write the rule file");
    assert!(RuleWatcher::start(&path, Extractors::new(), &plain).is_err());
}

/// A rule file naming a store the layer does not have is refused by `RuleFile::install` (and
/// by a `RuleWatcher`), at its `store` line, and the rules in force stay; taken as code rules
/// (`LayerHandle::replace_rules`), the set is refused too, naming the store — never counted in
/// another store without a word.
#[tokio::test]
async fn a_misnamed_store_is_refused_by_install_and_by_replace_rules() {
    use tollgate_config::RuleFile;
    const RULES: &str = "[[rule]]\nid = \"login\"\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow = \"1h\"\nkey = \"global\"\nstore = \"hoem\"\n";
    let local = MemoryStore::new();
    let stores = Stores::new(local.clone())
        .with("home", MemoryStore::new())
        .expect("a valid name");
    let layer = RateLimitLayer::new(stores);
    let file = RuleFile::parse("rules.toml", RULES, &Extractors::new())
        .expect("parse has no store to ask, so it accepts the name");
    let refused = file.install(&layer).expect_err("no store is named hoem");
    assert!(refused.to_string().contains("rules.toml:7:"), "{refused}");
    assert_eq!(
        layer.handle().rules().rules().count(),
        0,
        "nothing installed"
    );

    let refused = layer
        .handle()
        .replace_rules(file.rules().clone())
        .expect_err("no store is named hoem");
    assert_eq!(refused.rule().as_str(), "login");
    assert!(refused.reason().is_unknown_store(), "{refused}");
    assert!(refused.to_string().contains("hoem"), "{refused}");
    assert_eq!(
        layer.handle().rules().rules().count(),
        0,
        "the rules in force stay"
    );
    let (rule, key) = (RuleId::new("login").expect("valid"), Key::global());
    let quota = Quota::fixed_window(2, std::time::Duration::from_secs(3_600)).expect("valid");
    let probe = Item::new(&rule, quota, &key).with_cost(0);
    let left = local.peek(&probe).await.expect("peeks").remaining();
    assert_eq!(left, 2, "nothing counted in the default store");
}
