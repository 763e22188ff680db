//! The Grafana dashboard the guide ships (`docs/guide/dashboard.json`) names exactly the metrics
//! tollgate records: every series it queries is one of them, and every one of them is on it. Every
//! metric the guide's chapters name (their alerts, their examples) is one tollgate records.

use std::collections::BTreeSet;

const DASHBOARD: &str = include_str!("../docs/guide/dashboard.json");

/// The metric names in a PromQL expression or a chapter's text (a histogram's series read
/// through its `_bucket`); a Rust path such as `tollgate_core::metrics` is not one.
fn names_in(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("tollgate_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        if !rest.starts_with("::") {
            names.push(name.strip_suffix("_bucket").unwrap_or(&name).to_owned());
        }
    }
    names
}

/// Every name tollgate records.
fn recorded() -> BTreeSet<String> {
    tollgate::core::metrics::NAMES
        .iter()
        .chain(tollgate::client::metric_names::NAMES)
        .map(|name| (*name).to_owned())
        .collect()
}

#[test]
fn the_dashboard_queries_every_metric_tollgate_records_and_no_other() {
    let dashboard: serde_json::Value = serde_json::from_str(DASHBOARD).expect("valid JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    let mut queried = BTreeSet::new();
    for panel in panels {
        let targets = panel["targets"].as_array().expect("each panel has targets");
        assert!(!targets.is_empty(), "{}", panel["title"]);
        for target in targets {
            let expr = target["expr"].as_str().expect("a PromQL expression");
            let names = names_in(expr);
            assert!(!names.is_empty(), "{expr}");
            queried.extend(names);
        }
    }
    let recorded = recorded();
    let unknown: Vec<_> = queried.difference(&recorded).collect();
    assert!(
        unknown.is_empty(),
        "the dashboard queries names tollgate never records: {unknown:?}"
    );
    let missing: Vec<_> = recorded.difference(&queried).collect();
    assert!(
        missing.is_empty(),
        "recorded but not on the dashboard: {missing:?}"
    );
}

#[test]
fn every_metric_the_guide_names_is_one_tollgate_records() {
    let chapters = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide/src");
    let recorded = recorded();
    let mut named = 0;
    for entry in std::fs::read_dir(&chapters).expect("the guide's chapters") {
        let path = entry.expect("a chapter").path();
        // Chapters only: the simulator's pictures and results have a folder of their own.
        if path.extension().is_none_or(|extension| extension != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        for name in names_in(&text) {
            named += 1;
            assert!(
                recorded.contains(&name),
                "{} names {name}, which tollgate never records",
                path.display()
            );
        }
    }
    assert!(
        named > 10,
        "the guide names the metrics it explains ({named} found)"
    );
}
