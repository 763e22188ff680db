//! Envoy's rate limit services from tollgate rule files, counted in any tollgate store, so one
//! rule file and one Redis limit both an Envoy or Istio edge and the axum services behind it:
//!
//! * [`RateLimitService`] — `ShouldRateLimit` of `envoy.service.ratelimit.v3` (RLS): Envoy's
//!   rate limit filter asks for each request;
//! * [`QuotaService`] — `StreamRateLimitQuotas` of `envoy.service.rate_limit_quota.v3` (RLQS):
//!   Envoy's `rate_limit_quota` filter enforces locally, with assignments leased from the same
//!   store by the same rules ([`RateLimitService::quota_service`]; its design and fleet-wide
//!   bound are in [`rlqs`]).
//!
//! A rule names where it applies at the edge with `envoy = { domain, descriptor }` (see
//! `tollgate_config`'s `DescriptorMatch`); both services answer from those rules, as tonic
//! services to mount or through the `tollgate-envoy` binary. Moving from envoyproxy/ratelimit:
//! [`migrate`] turns its YAML configuration into a rule file.
//!
//! * `caps.rs` — what a request may hold, and `INVALID_ARGUMENT` past it;
//! * `table.rs` — the rules by domain, and which one a descriptor or a quota bucket matches;
//! * `plan.rs` — descriptors to store items; `answer.rs` — decisions to Envoy's answer;
//! * `unit.rs` — a quota as Envoy's `current_limit`; `observe.rs` — metrics;
//! * `service.rs` — the rate limit service; `rlqs/` — the quota service;
//! * `migrate/` — envoyproxy/ratelimit's YAML to a rule file.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod answer;
pub mod caps;
pub mod migrate;
mod observe;
mod plan;
pub mod rlqs;
mod service;
mod table;
mod unit;

pub use observe::{ANSWERS, QUOTA_ACTIONS};
pub use rlqs::QuotaService;
pub use service::RateLimitService;

/// The generated types of Envoy's APIs this crate speaks (the `envoy-types` crate), for
/// clients and tests.
pub use envoy_types;
