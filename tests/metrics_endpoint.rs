//! The metrics example's `/metrics` page, served by a real axum server and parsed with a real
//! Prometheus text-format parser: each rule's decisions, exact, and no caller's key anywhere.

mod common;

#[allow(dead_code, reason = "the example's own main is not run here")]
#[path = "../examples/metrics.rs"]
mod example;

use metrics_exporter_prometheus::PrometheusBuilder;
use prometheus_parse::{Scrape, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_metrics_page_parses_and_counts_each_decision() {
    let metrics = PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder of this test binary");
    let base = common::serve(example::app(metrics).expect("the example's app")).await;
    let client = common::client();
    let mut statuses = Vec::new();
    for _ in 0..7 {
        let response = client
            .get(format!("{base}/"))
            .send()
            .await
            .expect("answers");
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429]);

    let page = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("answers")
        .text()
        .await
        .expect("text");
    let scrape =
        Scrape::parse(page.lines().map(|line| Ok(line.to_owned()))).expect("valid Prometheus text");
    let value = |name: &str, labels: &[(&str, &str)]| {
        scrape
            .samples
            .iter()
            .find(|sample| {
                sample.metric == name
                    && labels
                        .iter()
                        .all(|(key, value)| sample.labels.get(key) == Some(*value))
            })
            .map(|sample| match sample.value {
                Value::Counter(value) | Value::Gauge(value) | Value::Untyped(value) => value,
                _ => f64::NAN,
            })
    };
    let checks = |outcome| {
        value(
            "tollgate_checks_total",
            &[("rule", "per-client"), ("outcome", outcome)],
        )
    };
    assert_eq!(checks("allowed"), Some(5.0), "{page}");
    assert_eq!(checks("refused"), Some(2.0), "{page}");
    assert_eq!(
        value("tollgate_near_limit_total", &[("rule", "per-client")]),
        Some(1.0),
        "{page}"
    );
    assert_eq!(value("tollgate_memory_keys", &[]), Some(1.0), "{page}");
    assert!(
        !page.contains("127.0.0.1"),
        "no caller's key in a label: {page}"
    );
}
