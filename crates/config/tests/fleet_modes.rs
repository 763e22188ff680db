//! A rule file's fleet modes through the layer: `split` gives each gateway its part of the
//! limit (over real HTTP, one server per gateway), `sub_buckets` spreads a key's count and an
//! operator's reset reaches every sub-bucket, a shadow split rule never refuses, every mode's
//! mistakes are reported at their line (the later of two conflicting fields), and a mode the
//! layer's store cannot carry out is refused at its field when the file is installed or
//! watched.

#[path = "../../tower-layer/tests/common/mod.rs"]
mod common;
mod config_common;

use axum::Router;
use axum::routing::get;
use http::StatusCode;
use tollgate_config::{Extractors, RuleFile, RuleWatcher, WatchError};
use tollgate_core::{MemoryStore, Store};
use tollgate_tower::RateLimitLayer;
use tollgate_wrappers::{BlockedCache, FleetStore, Stores, SubBuckets};

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
    layer
        .handle()
        .replace_rules(rules(text).rules().clone())
        .expect("the layer's store can count these rules");
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
    admin
        .handle()
        .replace_rules(rules(text).rules().clone())
        .expect("the layer's store can count these rules");
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
    expect("replica_ack = \"2s\"", "above the most");
    expect("replica_ack = \"0ms\"", "longer than zero");
    expect("replica_ack = 50", "a string");
    expect(
        "counting = \"lease\"\nreplica_ack = \"50ms\"",
        "counted exactly",
    );
    expect("replica_ack = \"50ms\"\nsplit = 2", "counted exactly");
    let fine = rule("sub_buckets = 4\ncache_blocked = true\nstore = \"home\"");
    assert!(config_common::config_errors(&fine, &Extractors::new()).is_empty());
}

/// A store every gateway shares and that knows nothing of fleet modes (as the Redis store).
use tollgate_testing::SharedMemory as Shared;

/// A rule of 8 a second on one global key, with `extra` fields from line 7 on.
fn asking(extra: &str) -> String {
    format!(
        "[[rule]]\nid = \"r\"\nalgorithm = \"token_bucket\"\ncapacity = 8\nrefill = {{ amount = 8, per = \"1s\" }}\nkey = \"global\"\n{extra}\n"
    )
}

/// `text`, asking what `layer`'s store cannot do, is refused by `RuleFile::install` and by
/// `RuleWatcher::start` at `line` (the field that asks), with a sentence that `says` what to
/// add; nothing is installed.
#[track_caller]
fn refused<St: Store>(layer: &RateLimitLayer<St>, text: &str, line: usize, says: &str) {
    let file = rules(text);
    let errors = file
        .install(layer)
        .expect_err("the store cannot do it")
        .to_string();
    assert!(
        errors.starts_with(&format!("rules.toml:{line}:")),
        "{errors}"
    );
    assert!(errors.contains(says), "{errors}");
    assert_eq!(
        layer.handle().rules().rules().count(),
        0,
        "nothing installed"
    );

    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, text).expect("write the rule file");
    let Err(WatchError::Invalid(errors)) = RuleWatcher::start(&path, Extractors::new(), layer)
    else {
        panic!("the watcher must refuse what install refuses:\n{text}");
    };
    let errors = errors.to_string();
    assert!(errors.contains(&format!("rules.toml:{line}:")), "{errors}");
    assert!(errors.contains(says), "{errors}");
    assert_eq!(
        layer.handle().rules().rules().count(),
        0,
        "nothing installed"
    );
}

/// `text` is installed over `layer`'s store, by `RuleFile::install` and by a watcher.
#[track_caller]
fn installed<St: Store>(layer: &RateLimitLayer<St>, text: &str) {
    rules(text)
        .install(layer)
        .unwrap_or_else(|errors| panic!("the store can do it:\n{errors}"));
    assert_eq!(layer.handle().rules().rules().count(), 1);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, text).expect("write the rule file");
    let watcher = RuleWatcher::start(&path, Extractors::new(), layer);
    assert!(watcher.is_ok(), "the watcher installs it too");
}

fn home<S: Store>(default: S, home: S) -> Stores<S> {
    Stores::new(default)
        .with("home", home)
        .expect("a valid name")
}

/// Each fleet mode of a rule file over a layer whose store cannot carry it out — `counting =
/// "lease"` or `"sync"` without a `FleetStore`, `split` over a store the gateways share,
/// `sub_buckets` without a `SubBuckets`, `cache_blocked` without a `BlockedCache`, `store =
/// "home"` without that store, a lease at home under a `FleetStore` around the `Stores` — is
/// refused at its field, never counted otherwise in silence; over a store that can, it is
/// installed.
#[tokio::test]
async fn a_fleet_mode_the_layer_s_store_cannot_carry_out_is_refused_at_its_field() {
    let plain = || RateLimitLayer::new(MemoryStore::new());
    for counting in [
        "counting = \"lease\"",
        "counting = { sync = { every = \"100ms\" } }",
    ] {
        let text = asking(counting);
        refused(&plain(), &text, 7, "FleetStore::new(..)");
        refused(
            &RateLimitLayer::new(Shared::default()),
            &text,
            7,
            "FleetStore",
        );
        refused(
            &RateLimitLayer::new(BlockedCache::new(SubBuckets::new(MemoryStore::new()))),
            &text,
            7,
            "FleetStore",
        );
        installed(
            &RateLimitLayer::new(FleetStore::new(MemoryStore::new())),
            &text,
        );
    }

    let split = asking("split = 2");
    refused(
        &RateLimitLayer::new(Shared::default()),
        &split,
        7,
        "one part in all",
    );
    installed(&plain(), &split);
    installed(
        &RateLimitLayer::new(FleetStore::new(Shared::default())),
        &split,
    );

    let spread = asking("sub_buckets = 4");
    refused(&plain(), &spread, 7, "SubBuckets::new(..)");
    installed(
        &RateLimitLayer::new(SubBuckets::new(Shared::default())),
        &spread,
    );
    installed(
        &RateLimitLayer::new(FleetStore::new(Shared::default())),
        &spread,
    );

    let cached = asking("cache_blocked = true");
    refused(&plain(), &cached, 7, "BlockedCache::new(..)");
    installed(
        &RateLimitLayer::new(BlockedCache::new(Shared::default())),
        &cached,
    );
    installed(
        &RateLimitLayer::new(FleetStore::new(Shared::default())),
        &cached,
    );
    // `false` asks for nothing.
    installed(&plain(), &asking("cache_blocked = false"));

    // A replica acknowledgement needs a store with replicas (Redis), wrapped or not.
    let acknowledged = asking("replica_ack = \"50ms\"");
    refused(&plain(), &acknowledged, 7, "RedisStore");
    refused(
        &RateLimitLayer::new(FleetStore::new(MemoryStore::new())),
        &acknowledged,
        7,
        "RedisStore",
    );
    installed(&RateLimitLayer::new(Shared::default()), &acknowledged);
    installed(
        &RateLimitLayer::new(FleetStore::new(Shared::default())),
        &acknowledged,
    );

    let at_home = asking("store = \"home\"");
    refused(
        &RateLimitLayer::new(FleetStore::new(Shared::default())),
        &at_home,
        7,
        "Stores",
    );
    installed(
        &RateLimitLayer::new(home(Shared::default(), Shared::default())),
        &at_home,
    );

    // A mode asked for in a named store needs its wrapper there: at the field of the mode.
    let cached_at_home = asking("store = \"home\"\ncache_blocked = true");
    let fleet_default_only = home(
        tollgate_core::DynStore::new(FleetStore::new(Shared::default())),
        tollgate_core::DynStore::new(Shared::default()),
    );
    refused(
        &RateLimitLayer::new(fleet_default_only),
        &cached_at_home,
        8,
        ".with(\"home\", BlockedCache::new(..))",
    );

    // The wrapper order: a `FleetStore` around the `Stores` leases for the default store
    // only, and says to put it inside; inside each store, the rule is leased at home.
    let leased_at_home = asking("counting = \"lease\"\nstore = \"home\"");
    refused(
        &RateLimitLayer::new(FleetStore::new(home(Shared::default(), Shared::default()))),
        &leased_at_home,
        7,
        "put one inside the `Stores`",
    );
    installed(
        &RateLimitLayer::new(home(
            FleetStore::new(Shared::default()),
            FleetStore::new(Shared::default()),
        )),
        &leased_at_home,
    );
}
