//! Each rule's decisions as metrics, read back exactly through `metrics-util`'s debugging
//! recorder: allowed, refused, shadow refusals, near the limit, and rule-file loads.

use std::collections::HashMap;
use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use std::time::Duration;

use tollgate_config::{Extractors, RuleWatcher};
use tollgate_core::{MemoryStore, Quota};
use tollgate_tower::key::Global;
use tollgate_tower::{Escalation, RateLimitLayer, Rule, RuleSet};
use tower::{Layer, ServiceExt, service_fn};

const RULES: &str = r#"
[[rule]]
id = "posting"
match = { path = "/post" }
algorithm = "fixed_window"
limit = 5
window = "1d"
key = "global"

[[rule]]
id = "shadowy"
match = { path = "/shadow" }
algorithm = "fixed_window"
limit = 1
window = "1d"
key = "global"
mode = "shadow"
"#;

/// Every counter the recorder holds, by `name{label=value,...}`.
fn counters(snapshotter: &Snapshotter) -> HashMap<String, u64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let DebugValue::Counter(value) = value else {
                return None;
            };
            let labels: Vec<String> = key
                .key()
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            Some((
                format!("{}{{{}}}", key.key().name(), labels.join(",")),
                value,
            ))
        })
        .collect()
}

async fn status(layer: &RateLimitLayer<MemoryStore>, path: &str) -> StatusCode {
    let service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let request = Request::builder().uri(path).body(()).expect("a request");
    service.oneshot(request).await.expect("infallible").status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_sequence_gives_exact_counts() {
    // Installed for the whole process (this file's only test), before the layer is built, as
    // a service would: handles are made when rules are installed, reloads included.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, RULES).expect("write");
    // `.metrics()` after the watcher starts: the watcher still feeds this layer, metered.
    let layer = RateLimitLayer::new(MemoryStore::new());
    let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("a valid file");
    let layer = layer.metrics();

    for _ in 0..6 {
        status(&layer, "/post").await;
    }
    for _ in 0..3 {
        assert_eq!(status(&layer, "/shadow").await, StatusCode::OK);
    }
    assert_eq!(status(&layer, "/elsewhere").await, StatusCode::OK);

    let seen = counters(&snapshotter);
    let count = |name: &str| seen.get(name).copied().unwrap_or_default();
    assert_eq!(
        count("tollgate_checks_total{rule=posting,outcome=allowed}"),
        5
    );
    assert_eq!(
        count("tollgate_checks_total{rule=posting,outcome=refused}"),
        1
    );
    assert_eq!(
        count("tollgate_checks_total{rule=posting,outcome=shadow_refused}"),
        0
    );
    assert_eq!(
        count("tollgate_near_limit_total{rule=posting}"),
        1,
        "only the fifth left < 20 %"
    );
    assert_eq!(
        count("tollgate_checks_total{rule=shadowy,outcome=allowed}"),
        1
    );
    assert_eq!(
        count("tollgate_checks_total{rule=shadowy,outcome=shadow_refused}"),
        2
    );
    assert_eq!(
        count("tollgate_checks_total{rule=shadowy,outcome=refused}"),
        0
    );
    assert_eq!(
        count("tollgate_config_loads_total{result=success}"),
        0,
        "the first load came before metrics were on"
    );
    assert!(
        seen.keys().all(|name| !name.contains("key=")),
        "no caller's key in any label: {seen:?}"
    );

    // A bad document, then a good one (through the overlay a fleet follower drives, so no file
    // event can add a load); the new rules count under the same names.
    let overlay = watcher.overlay();
    assert!(overlay.apply("1", "[[rule]]\nid = \"posting\"\n").is_err());
    assert!(
        overlay
            .apply("2", &RULES.replace("limit = 5", "limit = 7"))
            .is_ok()
    );
    assert_eq!(status(&layer, "/post").await, StatusCode::OK, "7 a day now");
    // The debugging recorder's snapshots hand counters over: these are the counts since the last.
    let seen = counters(&snapshotter);
    let count = |name: &str| seen.get(name).copied().unwrap_or_default();
    assert_eq!(count("tollgate_config_loads_total{result=error}"), 1);
    assert_eq!(count("tollgate_config_loads_total{result=success}"), 1);
    assert_eq!(
        count("tollgate_checks_total{rule=posting,outcome=allowed}"),
        1
    );
    assert_eq!(
        count("tollgate_checks_total{rule=posting,outcome=refused}"),
        0
    );

    // A set taken from a metered layer and extended, installed where metrics are off: nothing.
    let taken = RuleSet::clone(&layer.handle().rules()).rule(
        Rule::new(
            "beta",
            Quota::fixed_window(1, Duration::from_secs(60)).expect("valid"),
            Global,
        )
        .expect("id"),
    );
    let plain = RateLimitLayer::new(MemoryStore::new());
    plain
        .handle()
        .replace_rules(taken)
        .expect("the layer's store can count these rules");
    status(&plain, "/post").await;
    status(&plain, "/post").await;
    let seen = counters(&snapshotter);
    assert!(
        seen.values().all(|count| *count == 0),
        "an unmetered layer recorded: {seen:?}"
    );

    // A caller blocked by an escalating rule: the request's other rules are still counted.
    let minute = Duration::from_secs(60);
    let escalating = RateLimitLayer::new(MemoryStore::new())
        .rule(
            Rule::new(
                "everyone",
                Quota::fixed_window(1000, minute).expect("valid"),
                Global,
            )
            .expect("id"),
        )
        .rule(
            Rule::new(
                "hammer",
                Quota::fixed_window(1, minute * 60).expect("valid"),
                Global,
            )
            .expect("id")
            .escalate(Escalation::new(1, minute, minute * 60).expect("valid"))
            .expect("room for derived ids"),
        )
        .metrics();
    for _ in 0..4 {
        status(&escalating, "/").await;
    }
    let seen = counters(&snapshotter);
    let count = |name: &str| seen.get(name).copied().unwrap_or_default();
    assert_eq!(
        count("tollgate_checks_total{rule=everyone,outcome=allowed}"),
        4,
        "{seen:?}"
    );
    assert_eq!(
        count("tollgate_checks_total{rule=hammer,outcome=allowed}")
            + count("tollgate_checks_total{rule=hammer,outcome=refused}"),
        4,
        "{seen:?}"
    );
}
