//! The rate limit service's own conformance cases, through a real gRPC client on loopback, on
//! memory, Redis and Redis Cluster: every case runs on each store (`cases!` below makes the
//! tests), on a manual clock.

mod common;

use common::{Backend, descriptor, request, rules, served};
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use tollgate_envoy::envoy_types::pb::google::protobuf::UInt64Value;

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

/// The codes of a response's statuses.
fn codes(response: &RateLimitResponse) -> Vec<i32> {
    response.statuses.iter().map(|status| status.code).collect()
}

/// A response's added header `name`.
fn header<'r>(response: &'r RateLimitResponse, name: &str) -> Option<&'r str> {
    response
        .response_headers_to_add
        .iter()
        .find(|header| header.key.eq_ignore_ascii_case(name))
        .map(|header| header.value.as_str())
}

/// A rule of `limit` a minute on a descriptor of `entries` (TOML), for Envoy only.
fn per_minute(id: &str, limit: u64, entries: &str) -> String {
    format!(
        "[[rule]]\nid = \"{id}\"\nenvoy = {{ domain = \"edge\", descriptor = [{entries}] }}\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1m\"\n"
    )
}

async fn twenty_a_minute_called_25_times(backend: Backend) {
    let file = rules(&per_minute(
        "per-address",
        20,
        "{ key = \"remote_address\" }",
    ));
    let mut served = served(backend, &file).await;
    let ask = || request("edge", &[&[("remote_address", "203.0.113.7")]]);
    for call in 0..25_u32 {
        let response = served.ask(ask()).await.expect("an answer");
        let status = &response.statuses[0];
        if call < 20 {
            assert_eq!(response.overall_code, OK, "call {call}");
            assert_eq!(status.code, OK, "call {call}");
            assert_eq!(status.limit_remaining, 19 - call, "call {call}");
            assert_eq!(
                header(&response, "ratelimit"),
                Some(format!("\"per-address\";r={};t=20", 19 - call).as_str())
            );
            assert!(response.raw_body.is_empty());
        } else {
            assert_eq!(response.overall_code, OVER, "call {call}");
            assert_eq!(status.code, OVER, "call {call}");
            assert_eq!(status.limit_remaining, 0);
            // The window started 40 s into the minute: 20 s to go.
            assert_eq!(header(&response, "retry-after"), Some("20"));
            assert_eq!(
                header(&response, "content-type"),
                Some("application/problem+json")
            );
            let body: serde_json::Value =
                serde_json::from_slice(&response.raw_body).expect("a problem body");
            assert_eq!(body["status"], 429);
            assert_eq!(body["policy"], "per-address");
        }
        let limit = status.current_limit.as_ref().expect("the limit");
        assert_eq!(
            (limit.name.as_str(), limit.requests_per_unit, limit.unit),
            ("per-address", 20, Unit::Minute as i32)
        );
        let reset = status
            .duration_until_reset
            .as_ref()
            .expect("the time to reset");
        assert_eq!(reset.seconds, 20);
        assert_eq!(
            header(&response, "ratelimit-policy"),
            Some("\"per-address\";q=20;w=60")
        );
    }
}

async fn two_descriptors_flip_at_the_smaller_limit(backend: Backend) {
    let text = per_minute("small", 3, "{ key = \"user\" }")
        + &per_minute("large", 5, "{ key = \"route\" }");
    let mut served = served(backend, &rules(&text)).await;
    let ask = || request("edge", &[&[("user", "alice")], &[("route", "/feed")]]);
    for call in 0..3_u32 {
        let response = served.ask(ask()).await.expect("an answer");
        assert_eq!(
            (response.overall_code, codes(&response)),
            (OK, vec![OK, OK]),
            "call {call}"
        );
        assert_eq!(response.statuses[1].limit_remaining, 4 - call);
    }
    let response = served.ask(ask()).await.expect("an answer");
    assert_eq!(response.overall_code, OVER);
    assert_eq!(
        codes(&response),
        [OVER, OK],
        "a status for each, the smaller limit refusing"
    );
    assert_eq!(
        response.statuses[0]
            .current_limit
            .as_ref()
            .map(|limit| limit.requests_per_unit),
        Some(3)
    );
    assert_eq!(
        response.statuses[1]
            .current_limit
            .as_ref()
            .map(|limit| limit.requests_per_unit),
        Some(5)
    );
    // The larger rule was not charged by the refused request: 2 left, as it says.
    assert_eq!(response.statuses[1].limit_remaining, 2);
}

async fn an_unknown_domain_is_ok_without_statuses(backend: Backend) {
    let mut served = served(backend, &rules(&per_minute("r", 1, "{ key = \"k\" }"))).await;
    for _ in 0..3 {
        let response = served
            .ask(request("elsewhere", &[&[("k", "v")]]))
            .await
            .expect("an answer");
        assert_eq!(response.overall_code, OK);
        assert!(response.statuses.is_empty());
    }
}

async fn a_refused_request_charges_none_of_its_descriptors(backend: Backend) {
    let text =
        per_minute("one", 1, "{ key = \"user\" }") + &per_minute("ten", 10, "{ key = \"route\" }");
    let mut served = served(backend, &rules(&text)).await;
    let both = || request("edge", &[&[("user", "alice")], &[("route", "/feed")]]);
    assert_eq!(served.ask(both()).await.expect("first").overall_code, OK);
    for _ in 0..4 {
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
        alone.statuses[0].limit_remaining, 8,
        "only the first request counted"
    );
}

async fn hits_addend_counts_and_an_explicit_zero_only_checks(backend: Backend) {
    let mut served = served(backend, &rules(&per_minute("r", 20, "{ key = \"k\" }"))).await;
    let mut five = request("edge", &[&[("k", "v")]]);
    five.hits_addend = 5;
    assert_eq!(
        served.ask(five).await.expect("5").statuses[0].limit_remaining,
        15
    );
    let mut zero = request("edge", &[&[("k", "v")]]);
    zero.descriptors[0].hits_addend = Some(UInt64Value { value: 0 });
    zero.hits_addend = 7; // the descriptor's own addend wins
    assert_eq!(
        served.ask(zero).await.expect("0").statuses[0].limit_remaining,
        15
    );
    let mut three = request("edge", &[&[("k", "v")]]);
    three.descriptors[0].hits_addend = Some(UInt64Value { value: 3 });
    assert_eq!(
        served.ask(three).await.expect("3").statuses[0].limit_remaining,
        12
    );
    assert_eq!(
        served
            .ask(request("edge", &[&[("k", "v")]]))
            .await
            .expect("1")
            .statuses[0]
            .limit_remaining,
        11
    );
}

async fn the_most_specific_rule_wins_entry_by_entry(backend: Backend) {
    let text = per_minute(
        "exact",
        1,
        "{ key = \"client\", value = \"app-ios\" }, { key = \"user\" }",
    ) + &per_minute(
        "prefix",
        2,
        "{ key = \"client\", value = \"app-*\" }, { key = \"user\", value = \"alice\" }",
    ) + &per_minute(
        "any",
        3,
        "{ key = \"client\" }, { key = \"user\", value = \"alice\" }",
    );
    let mut served = served(backend, &rules(&text)).await;
    let name = |response: &RateLimitResponse| {
        response.statuses[0]
            .current_limit
            .as_ref()
            .map(|limit| limit.name.clone())
            .unwrap_or_default()
    };
    // Exact first entry wins although the others match the second entry more exactly.
    let response = served
        .ask(request(
            "edge",
            &[&[("client", "app-ios"), ("user", "alice")]],
        ))
        .await
        .expect("exact");
    assert_eq!(name(&response), "exact");
    let response = served
        .ask(request(
            "edge",
            &[&[("client", "app-web"), ("user", "alice")]],
        ))
        .await
        .expect("prefix");
    assert_eq!(name(&response), "prefix");
    let response = served
        .ask(request("edge", &[&[("client", "cli"), ("user", "alice")]]))
        .await
        .expect("any");
    assert_eq!(name(&response), "any");
    // Each value of an any-value entry is its own count.
    let response = served
        .ask(request(
            "edge",
            &[&[("client", "other"), ("user", "alice")]],
        ))
        .await
        .expect("any");
    assert_eq!(response.statuses[0].limit_remaining, 2);
    // A descriptor of another length matches none of them.
    let response = served
        .ask(request("edge", &[&[("client", "app-ios")]]))
        .await
        .expect("none");
    assert_eq!(
        (
            codes(&response),
            response.statuses[0].current_limit.is_none()
        ),
        (vec![OK], true)
    );
}

async fn unlimited_and_replaced_rules_count_nothing(backend: Backend) {
    let text = "[[rule]]\nid = \"internal\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"client\", value = \"internal-*\" }], unlimited = true }\n".to_owned()
        + &per_minute("clients", 1, "{ key = \"client\" }")
        + "[[rule]]\nid = \"vip\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"plan\", value = \"vip\" }], replaces = [\"clients\"] }\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow = \"1m\"\n";
    let mut served = served(backend, &rules(&text)).await;
    for _ in 0..3 {
        let response = served
            .ask(request("edge", &[&[("client", "internal-billing")]]))
            .await
            .expect("unlimited");
        assert_eq!(
            (
                response.overall_code,
                response.statuses[0].current_limit.is_none()
            ),
            (OK, true)
        );
    }
    for _ in 0..3 {
        // `vip` replaces `clients` in the requests it applies to.
        let response = served
            .ask(request(
                "edge",
                &[&[("client", "acme")], &[("plan", "vip")]],
            ))
            .await
            .expect("vip");
        assert_eq!(response.overall_code, OK);
        assert!(response.statuses[0].current_limit.is_none());
    }
    let response = served
        .ask(request("edge", &[&[("client", "acme")]]))
        .await
        .expect("alone");
    assert_eq!(
        response.statuses[0].limit_remaining, 0,
        "the replaced rule counted nothing before"
    );
    assert_eq!(response.overall_code, OK);
}

async fn bad_input_is_invalid_argument_and_counts_nothing(backend: Backend) {
    let mut served = served(backend, &rules(&per_minute("r", 5, "{ key = \"k\" }"))).await;
    let mut bad = vec![
        request("", &[&[("k", "v")]]),
        request("edge", &[]),
        request("edge", &[&[("k", "v")], &[]]),
        request("edge", &[&[("", "v")]]),
        request("edge", &[&[("k", "v")] as &[_]; 65]),
        request(&"d".repeat(257), &[&[("k", "v")]]),
    ];
    let long = "v".repeat(4097);
    bad.push(request("edge", &[&[("k", "v")], &[("k", long.as_str())]]));
    let mut negative = request("edge", &[&[("k", "v")]]);
    negative.descriptors[0].is_negative_hits = true;
    bad.push(negative);
    let many: Vec<(&str, &str)> = (0..17).map(|_| ("k", "v")).collect();
    bad.push(
        tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
            domain: "edge".into(),
            descriptors: vec![descriptor(&[("k", "v")]), descriptor(&many)],
            hits_addend: 0,
        },
    );
    for request in bad {
        let status = served.ask(request.clone()).await.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{request:?}");
        assert!(!status.message().is_empty());
    }
    let response = served
        .ask(request("edge", &[&[("k", "v")]]))
        .await
        .expect("valid");
    assert_eq!(
        response.statuses[0].limit_remaining, 4,
        "nothing was counted before"
    );
}

async fn addresses_count_by_their_v6_block_and_shadow_rules_never_refuse(backend: Backend) {
    let text = per_minute("per-address", 2, "{ key = \"remote_address\" }")
        + "[[rule]]\nid = \"trial\"\nmode = \"shadow\"\nenvoy = { domain = \"edge\", descriptor = [{ key = \"trial\" }] }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1m\"\n";
    let mut served = served(backend, &rules(&text)).await;
    let from = |address: &'static str| request("edge", &[&[("remote_address", address)]]);
    assert_eq!(
        served
            .ask(from("2001:db8::1"))
            .await
            .expect("1")
            .overall_code,
        OK
    );
    assert_eq!(
        served
            .ask(from("2001:db8::2"))
            .await
            .expect("2")
            .overall_code,
        OK
    );
    assert_eq!(
        served
            .ask(from("2001:db8::3"))
            .await
            .expect("3")
            .overall_code,
        OVER,
        "one /64"
    );
    assert_eq!(
        served
            .ask(from("2001:db8:0:1::1"))
            .await
            .expect("other")
            .overall_code,
        OK
    );
    // Values that name no address are counted too, all of them under one key: rotating
    // garbage earns no fresh count.
    let garbage: Vec<i32> = [
        served
            .ask(from("not an address"))
            .await
            .expect("1")
            .overall_code,
        served.ask(from("neither")).await.expect("2").overall_code,
        served.ask(from("nor this")).await.expect("3").overall_code,
    ]
    .into();
    assert_eq!(garbage, [OK, OK, OVER]);
    for _ in 0..3 {
        let response = served
            .ask(request("edge", &[&[("trial", "x")]]))
            .await
            .expect("shadow");
        assert_eq!((response.overall_code, codes(&response)), (OK, vec![OK]));
    }
}

/// A test per case and store.
macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        mod memory { $( #[tokio::test] async fn $case() { super::$case(super::Backend::Memory).await } )* }
        mod redis { $( #[tokio::test] async fn $case() { super::$case(super::Backend::Redis).await } )* }
        mod cluster { $( #[tokio::test] async fn $case() { super::$case(super::Backend::Cluster).await } )* }
    };
}

cases!(
    twenty_a_minute_called_25_times,
    two_descriptors_flip_at_the_smaller_limit,
    an_unknown_domain_is_ok_without_statuses,
    a_refused_request_charges_none_of_its_descriptors,
    hits_addend_counts_and_an_explicit_zero_only_checks,
    the_most_specific_rule_wins_entry_by_entry,
    unlimited_and_replaced_rules_count_nothing,
    bad_input_is_invalid_argument_and_counts_nothing,
    addresses_count_by_their_v6_block_and_shadow_rules_never_refuse,
);
