//! Rules whose cost is settled after the response, from a file: the estimate (`cost`, a number,
//! a request header or a registered function) and the actual cost (`settle`, a response header,
//! what the handler reports, or a registered function), through the layer; and every mistake
//! at its line and column.

mod config_common;

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_config::{Extractors, RuleFile};
use tollgate_core::{Item, Key, MemoryStore, RuleId, Store};
use tollgate_testing::ManualClock;
use tollgate_tower::{ActualCost, RateLimitLayer};
use tower::{Layer, ServiceExt, service_fn};

fn extractors() -> Extractors {
    Extractors::new()
        .cost("double_hint", |request| {
            request
                .headers
                .get("x-hint")
                .and_then(|hint| hint.to_str().ok()?.parse::<u64>().ok())
                .map_or(1, |hint| hint * 2)
        })
        .settle("usage_pair", |response| {
            let usage = response.headers.get("x-usage")?.to_str().ok()?;
            let (input, output) = usage.split_once('/')?;
            Some(input.parse::<u64>().ok()? + output.parse::<u64>().ok()?)
        })
}

fn parse(text: &str) -> RuleFile {
    RuleFile::parse("rules.toml", text, &extractors())
        .unwrap_or_else(|errors| panic!("a valid file:\n{errors}"))
}

fn rule_with(extra: &str) -> String {
    format!(
        "[[rule]]\nid = \"tokens\"\nalgorithm = \"token_bucket\"\ncapacity = 1000\nrefill = {{ amount = 1000, per = \"1h\" }}\nkey = \"global\"\n{extra}\n"
    )
}

type Store_ = MemoryStore<ManualClock>;

/// Sends one request with `headers` through the file's rules to a service that answers with
/// `answer_headers` (and `extension`, if any), reads the response to its end, and answers what
/// the caller has left.
async fn left_after(
    file: &RuleFile,
    store: &Store_,
    headers: &[(&str, &str)],
    answer_headers: &'static [(&'static str, &'static str)],
    extension: Option<u64>,
) -> u64 {
    let layer = RateLimitLayer::new(store.clone());
    layer
        .handle()
        .replace_rules(file.rules().clone())
        .expect("memory counts these rules");
    let service = layer.layer(service_fn(move |_: Request<()>| async move {
        let mut response = Response::new(Empty::<Bytes>::new());
        for (name, value) in answer_headers {
            response
                .headers_mut()
                .insert(*name, value.parse().expect("a value"));
        }
        if let Some(actual) = extension {
            response.extensions_mut().insert(ActualCost(actual));
        }
        Ok::<_, Infallible>(response)
    }));
    let mut request = Request::builder().uri("/complete");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = service
        .oneshot(request.body(()).expect("a request"))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    drop(response); // the body ends: settled now (in memory, at once)
    let (rule, key) = (RuleId::new("tokens").expect("valid"), Key::global());
    let quota = *file.rules().rules().next().expect("one rule").quota();
    let item = Item::new(&rule, quota, &key).with_cost(0);
    store.peek(&item).await.expect("memory answers").remaining()
}

fn store() -> Store_ {
    let clock = ManualClock::new(tollgate_testing::conformance::START);
    MemoryStore::builder().clock(clock).build()
}

#[tokio::test]
async fn a_file_settles_from_a_response_header_after_a_fixed_estimate() {
    let file = parse(&rule_with(
        "cost = 100\nsettle = { header = \"x-tokens-used\" }",
    ));
    let rule = file.rules().rules().next().expect("one rule");
    assert!(rule.settles());
    let store = store();
    let left = left_after(&file, &store, &[], &[("x-tokens-used", "250")], None).await;
    assert_eq!(left, 750);
}

#[tokio::test]
async fn a_file_takes_its_estimate_from_a_request_header_with_a_default() {
    let file = parse(&rule_with(
        "cost = { header = \"x-max-tokens\", default = 40 }\nsettle = \"reported\"",
    ));
    let store = store();
    // Nothing reported: the estimates stand, 300 from the header, then the default 40.
    assert_eq!(
        left_after(&file, &store, &[("x-max-tokens", "300")], &[], None).await,
        700
    );
    assert_eq!(left_after(&file, &store, &[], &[], None).await, 660);
    // Reported by the handler as an extension.
    assert_eq!(left_after(&file, &store, &[], &[], Some(10)).await, 650);
}

#[tokio::test]
async fn a_file_names_cost_and_settle_functions_registered_in_code() {
    let file = parse(&rule_with(
        "cost = { function = \"double_hint\" }\nsettle = { function = \"usage_pair\" }",
    ));
    let store = store();
    let left = left_after(
        &file,
        &store,
        &[("x-hint", "50")],
        &[("x-usage", "30/90")],
        None,
    )
    .await;
    assert_eq!(left, 880, "estimate 100, settled at 30 + 90");
}

#[test]
fn settling_mistakes_are_reported_at_their_line() {
    let cases: &[(&str, &str, &str)] = &[
        ("settle = \"metered\"", "7:11", "`settle` is \"reported\""),
        (
            "settle = { trailer = \"x\" }",
            "7:10",
            "there is no source `trailer`",
        ),
        ("settle = 5", "7:10", "not a number"),
        (
            "settle = { function = \"nope\" }",
            "7:24",
            "no settle named \"nope\"",
        ),
        (
            "settle = { header = \"bad header\" }",
            "7:22",
            "is not a header name",
        ),
        (
            "settle = { header = \"x-a\", function = \"usage_pair\" }",
            "7:10",
            "names one source",
        ),
        (
            "settle = \"reported\"\ncounting = \"lease\"",
            "7:11",
            "cannot be counted by `lease`",
        ),
        (
            "settle = \"reported\"\nsplit = 4",
            "7:11",
            "cannot be counted by `split`",
        ),
        (
            "settle = \"reported\"\nmode = \"shadow\"",
            "7:11",
            "settles nothing; settle an enforcing rule",
        ),
        (
            "settle = \"reported\"\non_refusal = \"flag\"",
            "7:11",
            "settles nothing; settle an enforcing rule",
        ),
        ("cost = { header = \"x-max\" }", "7:8", "needs `default`"),
        (
            "cost = { function = \"nope\" }",
            "7:22",
            "no cost named \"nope\"",
        ),
        (
            "cost = { header = \"x-max\", default = 5000 }",
            "7:8",
            "above the quota's limit 1000",
        ),
    ];
    for (extra, at, message) in cases {
        let found = config_common::config_errors(&rule_with(extra), &extractors());
        assert_eq!(found.len(), 1, "{extra}: {found:?}");
        assert!(
            found[0].starts_with(&format!("{at}: ")),
            "{extra}: {found:?}"
        );
        assert!(found[0].contains(message), "{extra}: {found:?}");
    }
}

#[test]
fn concurrency_and_pacing_rules_settle_nothing() {
    for (quota, why) in [
        ("algorithm = \"concurrency\"\nlimit = 3", "held, not spent"),
        (
            "algorithm = \"pacing\"\nrate = { amount = 10, per = \"1s\" }\nmax_delay = \"1s\"",
            "a place in its queue",
        ),
    ] {
        let text =
            format!("[[rule]]\nid = \"x\"\n{quota}\nkey = \"global\"\nsettle = \"reported\"\n");
        let found = config_common::config_errors(&text, &extractors());
        assert_eq!(found.len(), 1, "{quota}: {found:?}");
        assert!(found[0].contains(why), "{quota}: {found:?}");
    }
}
