//! # tollgate-envoy-harness
//!
//! Test support for tollgate (not published): a real Envoy, started on free loopback ports in a
//! temp dir, in front of a test's upstream server, with Envoy's HTTP rate limit filter
//! (`envoy.filters.http.ratelimit`) pointed at a test's rate limit service. So far, the config
//! it runs:
//!
//! * [`EnvoyConfig`] — the bootstrap config, built up and rendered as YAML
//!   ([`to_yaml`](EnvoyConfig::to_yaml)): one listener routing everything to the upstream
//!   cluster, the [`RateLimitFilter`] and the route's rate limit [`Action`]s, room for another
//!   filter and its gRPC cluster.

mod action;
mod config;
mod rate_limit_filter;
mod yaml;

pub use action::Action;
pub use config::{ADMIN_PORT, EnvoyConfig, LISTENER_PORT, UPSTREAM_CLUSTER};
pub use rate_limit_filter::{DEFAULT_TIMEOUT, RateLimitFilter};
