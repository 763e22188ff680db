//! The YAML `EnvoyConfig` renders, checked by Envoy 1.40 itself (`envoy --mode validate`): the
//! documented example, every action, values that need quoting, another filter and its cluster.

mod common;

use common::{Upstream, get, refusing_port, upstream_body};
use tollgate_envoy_harness::{Action, Envoy, EnvoyConfig, RateLimitFilter};

fn upstream() -> std::net::SocketAddr {
    "127.0.0.1:3000".parse().expect("an address")
}

fn service() -> std::net::SocketAddr {
    "127.0.0.1:8081".parse().expect("an address")
}

/// The config of `EnvoyConfig::to_yaml`'s documentation, whose rendering is `src/example.yaml`.
fn documented_example() -> EnvoyConfig {
    EnvoyConfig::new(upstream())
        .rate_limit_filter(
            RateLimitFilter::new("tollgate", service())
                .failure_mode_deny(true)
                .status_on_error(503)
                .x_ratelimit_headers(true),
        )
        .rate_limit([Action::remote_address()])
        .rate_limit([
            Action::generic_entry("route", "api"),
            Action::request_header("x-user-id", "user"),
        ])
}

#[test]
fn the_documented_example_is_what_envoy_accepts() {
    let config = documented_example();

    assert_eq!(config.to_yaml(), include_str!("../src/example.yaml"));
    Envoy::validate(&config).unwrap();
}

#[test]
fn a_plain_proxy_is_valid() {
    let yaml = EnvoyConfig::new(upstream()).to_yaml();

    assert!(!yaml.contains("ratelimit"), "{yaml}");
    assert!(!yaml.contains("rate_limits"), "{yaml}");
    Envoy::validate(&EnvoyConfig::new(upstream())).unwrap();
}

#[test]
fn every_action_and_option_is_valid() {
    let config = EnvoyConfig::new(upstream())
        .rate_limit_filter(
            RateLimitFilter::new("tollgate", service())
                .timeout(std::time::Duration::from_millis(250))
                .status_on_error(429),
        )
        .rate_limit([Action::remote_address()])
        .rate_limit([Action::generic_key("everyone")])
        .rate_limit([
            Action::remote_address(),
            Action::generic_entry("route", "api"),
            Action::request_header("x-user-id", "user"),
            Action::request_header(":path", "path"),
        ]);
    let yaml = config.to_yaml();

    assert!(yaml.contains("timeout: 0.25s"), "{yaml}");
    assert!(yaml.contains("status_on_error: {code: 429}"), "{yaml}");
    assert!(
        yaml.contains("- generic_key: {descriptor_value: everyone}\n"),
        "{yaml}"
    );
    assert!(!yaml.contains("enable_x_ratelimit_headers"), "{yaml}");
    assert!(
        yaml.contains("request_headers: {header_name: \":path\""),
        "{yaml}"
    );
    Envoy::validate(&config).unwrap();
}

#[test]
fn values_that_yaml_would_misread_are_quoted() {
    let config = EnvoyConfig::new(upstream())
        .rate_limit_filter(RateLimitFilter::new("my domain: 2", service()))
        .rate_limit([
            Action::generic_entry("true", "1"),
            Action::generic_key("a \"quoted\" {value}, with # and \\"),
        ]);
    let yaml = config.to_yaml();

    assert!(yaml.contains("domain: \"my domain: 2\"\n"), "{yaml}");
    assert!(
        yaml.contains("{descriptor_value: \"1\", descriptor_key: \"true\"}"),
        "{yaml}"
    );
    Envoy::validate(&config).unwrap();
}

#[test]
fn an_action_list_envoy_refuses_is_reported_with_its_reason() {
    let config = EnvoyConfig::new(upstream())
        .rate_limit_filter(RateLimitFilter::new("tollgate", service()))
        .rate_limit([]);

    let error = Envoy::validate(&config).unwrap_err();

    assert!(error.is_rejected(), "{error}");
    assert!(
        error
            .to_string()
            .contains("RateLimitValidationError.Actions: value must contain at least 1 item"),
        "{error}"
    );
}

/// The quota filter (RLQS), as the Envoy quota service's tests will add it: its YAML before the
/// router, its gRPC cluster beside the rate limit service's.
const QUOTA_FILTER: &str = r#"
    name: envoy.filters.http.rate_limit_quota
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig
      rlqs_server:
        envoy_grpc: {cluster_name: quota_service}
      domain: tollgate
      bucket_matchers:
        on_no_match:
          action:
            name: everyone
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings
              bucket_id_builder:
                bucket_id_builder:
                  name: {string_value: everyone}
              reporting_interval: 1s
              no_assignment_behavior:
                fallback_rate_limit: {blanket_rule: ALLOW_ALL}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_filter_and_its_grpc_cluster_run_before_the_router() {
    let upstream = Upstream::start().await;
    let (_held, quota_service) = refusing_port();
    let (_held_too, rate_limit_service) = refusing_port();
    let config = EnvoyConfig::new(upstream.address())
        .rate_limit_filter(RateLimitFilter::new("tollgate", rate_limit_service))
        .http_filter(QUOTA_FILTER)
        .grpc_cluster("quota_service", quota_service);
    let yaml = config.to_yaml();
    let at = |needle: &str| {
        yaml.find(needle)
            .unwrap_or_else(|| panic!("{needle} in {yaml}"))
    };

    assert!(
        at("- name: envoy.filters.http.ratelimit")
            < at("- name: envoy.filters.http.rate_limit_quota")
    );
    assert!(
        at("- name: envoy.filters.http.rate_limit_quota") < at("- name: envoy.filters.http.router")
    );
    assert!(at("  - name: rate_limit_service\n") < at("  - name: quota_service\n"));
    Envoy::validate(&config).unwrap();

    // It runs: with both services down, the rate limit filter fails open and the quota
    // bucket's fallback allows all.
    let envoy = Envoy::start(&config).unwrap();
    assert_eq!(get(&envoy.url()).await, (200, upstream_body("/")));
}

#[test]
fn the_example_a_user_runs_is_the_documented_one() {
    // examples/envoy/envoy.yaml is what the guide and the example's README show.
    assert_eq!(
        include_str!("../../../examples/envoy/envoy.yaml"),
        include_str!("../src/example.yaml")
    );
}
