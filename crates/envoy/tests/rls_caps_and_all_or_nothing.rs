//! The rate limit service through a real tonic client, pushed at its stated caps and
//! its all-or-nothing claim, on memory, Redis and Redis Cluster, and concurrently on Redis.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{Backend, descriptor, request, rules, served};
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::{
    RateLimitRequest, RateLimitResponse,
};
use tollgate_envoy::envoy_types::pb::google::protobuf::UInt64Value;

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

fn rule(id: &str, entries: &str, quota: &str, extra: &str) -> String {
    format!(
        "[[rule]]\nid = \"{id}\"\nenvoy = {{ domain = \"edge\", descriptor = [{entries}] }}\n{quota}\n{extra}"
    )
}

fn per_hour(id: &str, limit: u64, entries: &str, extra: &str) -> String {
    rule(
        id,
        entries,
        &format!("algorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1h\""),
        extra,
    )
}

fn header<'r>(response: &'r RateLimitResponse, name: &str) -> Option<&'r str> {
    response
        .response_headers_to_add
        .iter()
        .find(|header| header.key.eq_ignore_ascii_case(name))
        .map(|header| header.value.as_str())
}

fn remaining(response: &RateLimitResponse, at: usize) -> u32 {
    response.statuses[at].limit_remaining
}

// ---- caps, exactly at and one past each number the guide states -----------------------------

#[tokio::test]
async fn each_cap_holds_at_its_number_and_refuses_one_past_it() {
    let text = per_hour("r", 1_000, "{ key = \"k\" }", "");
    let mut served = served(Backend::Memory, &rules(&text)).await;
    let ok = |request: RateLimitRequest| request;
    let at_caps = [
        ok(request("edge", &[&[("k", "v")] as &[_]; 64])),
        ok(request(&"d".repeat(256), &[&[("k", "v")]])),
        ok(request("edge", &[&[(&"k".repeat(256) as &str, "v")]])),
        ok(request("edge", &[&[("k", &"v".repeat(4096) as &str)]])),
        ok(request("edge", &[&[("k", "v"); 16]])),
    ];
    for request in at_caps {
        let answer = served.ask(request.clone()).await;
        assert!(answer.is_ok(), "{answer:?} for a request at the caps");
    }
    let past = [
        request("edge", &[&[("k", "v")] as &[_]; 65]),
        request(&"d".repeat(257), &[&[("k", "v")]]),
        request("edge", &[&[(&"k".repeat(257) as &str, "v")]]),
        request("edge", &[&[("k", &"v".repeat(4097) as &str)]]),
        request("edge", &[&[("k", "v"); 17]]),
    ];
    for request in past {
        let status = served.ask(request).await.expect_err("past a cap");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    }
    // Multi-byte characters: the caps are bytes.
    let status = served
        .ask(request("edge", &[&[("k", &"é".repeat(2049) as &str)]]))
        .await
        .expect_err("4098 bytes");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
}

/// A request within every stated cap at once (64 descriptors of 16 entries, each value 4096
/// bytes) is over 4 MB, tonic's default message limit: it cannot reach the caps check.
#[tokio::test]
async fn the_largest_request_within_the_caps_is_answered() {
    let text = per_hour("r", 1_000, "{ key = \"k\" }", "");
    let mut served = served(Backend::Memory, &rules(&text)).await;
    let value = "v".repeat(4096);
    let entries: Vec<(&str, &str)> = (0..16).map(|_| ("k", value.as_str())).collect();
    let descriptors: Vec<&[(&str, &str)]> = (0..64).map(|_| entries.as_slice()).collect();
    let answer = served.ask(request("edge", &descriptors)).await;
    assert!(
        answer.is_ok(),
        "a request within every stated cap: {:?}",
        answer
            .err()
            .map(|status| (status.code(), status.message().to_owned()))
    );
}

// ---- hits_addend --------------------------------------------------------------------------

async fn extreme_hits_never_panic_and_never_pass(backend: Backend) {
    let text = per_hour("r", 5, "{ key = \"k\" }", "")
        + &per_hour("s", 5, "{ key = \"s\" }", "mode = \"shadow\"\n");
    let mut served = served(backend, &rules(&text)).await;
    let mut huge = request("edge", &[&[("k", "a")]]);
    huge.descriptors[0].hits_addend = Some(UInt64Value { value: u64::MAX });
    let response = served.ask(huge).await.expect("an answer");
    assert_eq!(response.overall_code, OVER);
    assert_eq!(remaining(&response, 0), 5, "nothing charged");
    let mut big = request("edge", &[&[("k", "a")]]);
    big.hits_addend = u32::MAX;
    assert_eq!(served.ask(big).await.expect("u32::MAX").overall_code, OVER);
    let mut shadow = request("edge", &[&[("s", "a")]]);
    shadow.descriptors[0].hits_addend = Some(UInt64Value { value: u64::MAX });
    assert_eq!(served.ask(shadow).await.expect("shadow").overall_code, OK);
    // u64::MAX on one descriptor, 1 on another of the same rule and key.
    let mut mixed = request("edge", &[&[("k", "b")], &[("k", "b")]]);
    mixed.descriptors[0].hits_addend = Some(UInt64Value {
        value: u64::MAX - 1,
    });
    let response = served.ask(mixed).await.expect("mixed");
    assert_eq!(response.overall_code, OVER);
    // Exactly the limit passes, then an explicit 0 checks without counting.
    let mut five = request("edge", &[&[("k", "c")]]);
    five.hits_addend = 5;
    assert_eq!(served.ask(five).await.expect("5").overall_code, OK);
    let mut zero = request("edge", &[&[("k", "c")]]);
    zero.descriptors[0].hits_addend = Some(UInt64Value { value: 0 });
    let response = served.ask(zero).await.expect("0");
    assert_eq!((response.overall_code, remaining(&response, 0)), (OK, 0));
    assert_eq!(
        served
            .ask(request("edge", &[&[("k", "c")]]))
            .await
            .expect("1")
            .overall_code,
        OVER
    );
}

// ---- all or nothing -----------------------------------------------------------------------

async fn a_refused_request_charges_neither_its_shadow_nor_its_duplicate_descriptors(
    backend: Backend,
) {
    let text = per_hour("one", 1, "{ key = \"user\" }", "")
        + &per_hour("watch", 10, "{ key = \"route\" }", "mode = \"shadow\"\n")
        + &per_hour("three", 3, "{ key = \"team\" }", "");
    let mut served = served(backend, &rules(&text)).await;
    let both = || request("edge", &[&[("user", "alice")], &[("route", "/feed")]]);
    assert_eq!(served.ask(both()).await.expect("first").overall_code, OK);
    for _ in 0..3 {
        assert_eq!(
            served.ask(both()).await.expect("refused").overall_code,
            OVER
        );
    }
    let alone = served
        .ask(request("edge", &[&[("route", "/feed")]]))
        .await
        .expect("alone");
    assert_eq!(
        remaining(&alone, 0),
        8,
        "the shadow rule was charged by the first and this only"
    );

    // Two descriptors of one rule and one key: each counts, and a refusal charges neither.
    let twice = || request("edge", &[&[("team", "red")], &[("team", "red")]]);
    let response = served.ask(twice()).await.expect("2 of 3");
    assert_eq!(response.overall_code, OK);
    let response = served.ask(twice()).await.expect("4 of 3");
    assert_eq!(response.overall_code, OVER);
    let response = served
        .ask(request("edge", &[&[("team", "red")]]))
        .await
        .expect("3 of 3");
    assert_eq!((response.overall_code, remaining(&response, 0)), (OK, 0));
    let response = served
        .ask(request("edge", &[&[("team", "red")]]))
        .await
        .expect("4 of 3");
    assert_eq!(response.overall_code, OVER);
}

/// Two descriptors in one request, one for an exhausted caller: the other caller's descriptor
/// is uncharged, and its status says what it has (uncharged) — not refused.
async fn statuses_of_a_refused_request(backend: Backend) {
    let text = per_hour("per-user", 1, "{ key = \"user\" }", "");
    let mut served = served(backend, &rules(&text)).await;
    assert_eq!(
        served
            .ask(request("edge", &[&[("user", "alice")]]))
            .await
            .expect("1")
            .overall_code,
        OK
    );
    let response = served
        .ask(request("edge", &[&[("user", "bob")], &[("user", "alice")]]))
        .await
        .expect("refused");
    assert_eq!(response.overall_code, OVER);
    let codes: Vec<i32> = response.statuses.iter().map(|status| status.code).collect();
    assert_eq!(codes, [OK, OVER]);
    assert_eq!(remaining(&response, 0), 1, "bob uncharged");
    assert_eq!(
        served
            .ask(request("edge", &[&[("user", "bob")]]))
            .await
            .expect("bob")
            .overall_code,
        OK
    );
}

// ---- what Envoy is told ---------------------------------------------------------------------

/// Envoy's `enable_x_ratelimit_headers: DRAFT_VERSION_03` (the guide's configuration) turns
/// every status that has a `current_limit` into `X-RateLimit-*` headers, the one with the least
/// `limit_remaining` deciding `X-RateLimit-Remaining`. A shadow rule (never refuses) or a rule
/// with `disclose = false` must not show up there: they send no `current_limit`.
#[tokio::test]
async fn shadow_and_undisclosed_rules_send_no_current_limit() {
    let text = per_hour("enforced", 100, "{ key = \"user\" }", "")
        + &per_hour("trial", 1, "{ key = \"route\" }", "mode = \"shadow\"\n")
        + &per_hour("secret", 50, "{ key = \"team\" }", "disclose = false\n");
    let mut served = served(Backend::Memory, &rules(&text)).await;
    let ask = || {
        request(
            "edge",
            &[
                &[("user", "alice")],
                &[("route", "/feed")],
                &[("team", "red")],
            ],
        )
    };
    served.ask(ask()).await.expect("1");
    let response = served.ask(ask()).await.expect("2");
    assert_eq!(response.overall_code, OK);
    assert!(response.statuses[0].current_limit.is_some());
    assert_eq!(
        response.statuses[1].current_limit, None,
        "the shadow rule, exhausted, would make Envoy say X-RateLimit-Remaining: 0 on an allowed request"
    );
    assert_eq!(response.statuses[2].current_limit, None, "disclose = false");
    // The service's own fields disclose the enforcing rule alone.
    let policy = header(&response, "ratelimit-policy").unwrap_or_default();
    assert!(
        policy.contains("enforced") && !policy.contains("trial") && !policy.contains("secret"),
        "{policy}"
    );
}

#[tokio::test]
async fn a_refusal_by_an_undisclosed_rule_discloses_nothing() {
    let text = per_hour("secret", 1, "{ key = \"team\" }", "disclose = false\n");
    let mut served = served(Backend::Memory, &rules(&text)).await;
    served
        .ask(request("edge", &[&[("team", "red")]]))
        .await
        .expect("1");
    let response = served
        .ask(request("edge", &[&[("team", "red")]]))
        .await
        .expect("2");
    assert_eq!(response.overall_code, OVER);
    for name in ["ratelimit-policy", "ratelimit"] {
        assert_eq!(
            header(&response, name),
            None,
            "{name}: {:?}",
            response.response_headers_to_add
        );
    }
    assert!(header(&response, "retry-after").is_some());
    // The problem body names the policy, as the HTTP layer's default refusal does.
}

#[tokio::test]
async fn a_refusal_carries_retry_after_and_a_problem_body() {
    let text = per_hour("per-user", 1, "{ key = \"user\" }", "");
    let mut served = served(Backend::Memory, &rules(&text)).await;
    served
        .ask(request("edge", &[&[("user", "a")]]))
        .await
        .expect("1");
    let response = served
        .ask(request("edge", &[&[("user", "a")]]))
        .await
        .expect("2");
    assert_eq!(response.overall_code, OVER);
    assert!(header(&response, "retry-after").is_some_and(|value| value.parse::<u64>().is_ok()));
    assert_eq!(
        header(&response, "content-type"),
        Some("application/problem+json")
    );
    let body: serde_json::Value = serde_json::from_slice(&response.raw_body).expect("JSON");
    assert_eq!(body["type"], "urn:tollgate:problem:rate-limited");
    assert_eq!(body["status"], 429);
    for header in &response.response_headers_to_add {
        assert!(
            header.value.is_ascii() && !header.value.contains('\n'),
            "{header:?}"
        );
    }
}

#[tokio::test]
async fn units_are_envoys_when_exact_and_unknown_otherwise() {
    let cases = [
        (
            "algorithm = \"fixed_window\"\nlimit = 3\nwindow = \"1s\"",
            Unit::Second,
            3,
        ),
        (
            "algorithm = \"fixed_window\"\nlimit = 3\nwindow = \"7d\"",
            Unit::Week,
            3,
        ),
        (
            "algorithm = \"sliding_window_counter\"\nlimit = 3\nwindow = \"30d\"",
            Unit::Month,
            3,
        ),
        (
            "algorithm = \"fixed_window\"\nlimit = 3\nwindow = \"365d\"",
            Unit::Year,
            3,
        ),
        (
            "algorithm = \"fixed_window\"\nlimit = 10\nwindow = \"15m\"",
            Unit::Unknown,
            10,
        ),
        (
            "algorithm = \"fixed_window\"\nlimit = 3\nwindow = \"1500ms\"",
            Unit::Unknown,
            3,
        ),
        (
            "algorithm = \"token_bucket\"\ncapacity = 5\nrefill = { amount = 5, per = \"1m\" }",
            Unit::Minute,
            5,
        ),
        (
            "algorithm = \"token_bucket\"\ncapacity = 5\nrefill = { amount = 1, per = \"7s\" }",
            Unit::Unknown,
            5,
        ),
        (
            "algorithm = \"gcra\"\ncapacity = 60\nrefill = { amount = 1, per = \"1s\" }",
            Unit::Minute,
            60,
        ),
        (
            "algorithm = \"fixed_window\"\nlimit = 5000000000\nwindow = \"1h\"",
            Unit::Hour,
            u32::MAX,
        ),
    ];
    for (quota, unit, per_unit) in cases {
        let text = rule("r", "{ key = \"k\" }", quota, "");
        let mut served = served(Backend::Memory, &rules(&text)).await;
        let response = served
            .ask(request("edge", &[&[("k", "v")]]))
            .await
            .expect("answer");
        let limit = response.statuses[0].current_limit.clone().expect("a limit");
        assert_eq!(
            (limit.unit, limit.requests_per_unit),
            (unit as i32, per_unit),
            "{quota}"
        );
    }
}

// ---- a caller-controlled value that names no caller -----------------------------------------

/// An entry marked `address = true` whose value comes from a request header: a client sending
/// garbage there must not make the whole request INVALID_ARGUMENT (its other descriptors — here
/// the per-address limit it has exhausted — undecided, and Envoy, by default
/// (`failure_mode_deny: false`), letting it through); the garbage is counted under one key.
#[tokio::test]
async fn a_garbage_address_in_one_descriptor_does_not_unlimit_the_others() {
    let text = per_hour("per-address", 1, "{ key = \"remote_address\" }", "")
        + &per_hour(
            "per-forwarded",
            100,
            "{ key = \"x-client-ip\", address = true }",
            "",
        );
    let mut served = served(Backend::Memory, &rules(&text)).await;
    let from = |forwarded: &'static str| {
        request(
            "edge",
            &[
                &[("remote_address", "203.0.113.7")],
                &[("x-client-ip", forwarded)],
            ],
        )
    };
    assert_eq!(
        served
            .ask(from("198.51.100.1"))
            .await
            .expect("1")
            .overall_code,
        OK
    );
    assert_eq!(
        served
            .ask(from("198.51.100.1"))
            .await
            .expect("2")
            .overall_code,
        OVER
    );
    let answer = served.ask(from("not-an-address")).await;
    assert_eq!(
        answer
            .as_ref()
            .map(|response| response.overall_code)
            .map_err(tonic::Status::code),
        Ok(OVER),
        "the exhausted address must stay refused whatever the client puts in its header"
    );
}

// ---- concurrency on one key (Redis) ---------------------------------------------------------

async fn many_tasks_on_one_key_never_pass_more_than_the_limit(backend: Backend) {
    let text = per_hour("one-key", 100, "{ key = \"user\" }", "")
        + &per_hour("global", 150, "{ key = \"route\", value = \"/api\" }", "");
    let served = served(backend, &rules(&text)).await;
    let allowed = Arc::new(AtomicU64::new(0));
    let global_allowed = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for task in 0..32_u64 {
        let mut client = served.client.clone();
        let allowed = Arc::clone(&allowed);
        let global_allowed = Arc::clone(&global_allowed);
        tasks.push(tokio::spawn(async move {
            for call in 0..10_u64 {
                // Half the calls carry a second descriptor of another rule.
                let user = if task % 4 == 0 { "bob" } else { "alice" };
                let mut ask = if call % 2 == 0 {
                    request("edge", &[&[("user", user)], &[("route", "/api")]])
                } else {
                    request("edge", &[&[("user", user)]])
                };
                if call % 3 == 0 {
                    ask.descriptors.push(descriptor(&[("user", user)]));
                }
                let response = client
                    .should_rate_limit(ask.clone())
                    .await
                    .expect("answer")
                    .into_inner();
                if response.overall_code == OK {
                    let own = ask
                        .descriptors
                        .iter()
                        .filter(|descriptor| descriptor.entries[0].value == "alice")
                        .count() as u64;
                    allowed.fetch_add(own, Ordering::Relaxed);
                    if ask
                        .descriptors
                        .iter()
                        .any(|descriptor| descriptor.entries[0].key == "route")
                    {
                        global_allowed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("a task");
    }
    let alice = allowed.load(Ordering::Relaxed);
    assert!(alice <= 100, "alice was allowed {alice} units of 100");
    assert_eq!(
        alice, 100,
        "and all of them were used (demand was 24 tasks x >10 units)"
    );
    assert!(global_allowed.load(Ordering::Relaxed) <= 150);
    // The store agrees: alice has nothing left.
    let mut client = served.client.clone();
    let response = client
        .should_rate_limit(request("edge", &[&[("user", "alice")]]))
        .await
        .expect("answer")
        .into_inner();
    assert_eq!((response.overall_code, remaining(&response, 0)), (OVER, 0));
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        mod memory { $( #[tokio::test] async fn $case() { super::$case(super::Backend::Memory).await } )* }
        mod redis { $( #[tokio::test] async fn $case() { super::$case(super::Backend::Redis).await } )* }
        mod cluster { $( #[tokio::test] async fn $case() { super::$case(super::Backend::Cluster).await } )* }
    };
}

cases!(
    extreme_hits_never_panic_and_never_pass,
    a_refused_request_charges_neither_its_shadow_nor_its_duplicate_descriptors,
    statuses_of_a_refused_request,
    many_tasks_on_one_key_never_pass_more_than_the_limit,
);
