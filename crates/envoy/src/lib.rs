//! Envoy's rate limit services from tollgate rule files: `ShouldRateLimit` of
//! `envoy.service.ratelimit.v3` (RLS) and `StreamRateLimitQuotas` of
//! `envoy.service.rate_limit_quota.v3` (RLQS), counted in any tollgate store, so one rule file
//! and one Redis limit both an Envoy or Istio edge and axum services behind it.
//!
//! Moving from envoyproxy/ratelimit: [`migrate`] turns its YAML configuration into a rule file.

pub mod migrate;
