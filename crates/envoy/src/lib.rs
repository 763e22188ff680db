//! Envoy's rate limit services from tollgate rule files: `ShouldRateLimit` of
//! `envoy.service.ratelimit.v3` (RLS), counted in any tollgate store, so one rule file and one
//! Redis limit both an Envoy or Istio edge and the axum services behind it.
//!
//! A rule names where it applies at the edge with `envoy = { domain, descriptor }` (see
//! `tollgate_config`'s `DescriptorMatch`); [`RateLimitService`] answers Envoy's rate limit
//! filter from those rules, as a tonic service to mount or through the `tollgate-envoy`
//! binary. Moving from envoyproxy/ratelimit: [`migrate`] turns its YAML configuration into a
//! rule file.
//!
//! * `caps.rs` — what a request may hold, and `INVALID_ARGUMENT` past it;
//! * `table.rs` — the rules by domain, and which one a descriptor matches;
//! * `plan.rs` — descriptors to store items; `answer.rs` — decisions to Envoy's answer;
//! * `unit.rs` — a quota as Envoy's `current_limit`; `observe.rs` — metrics;
//! * `service.rs` — the service;
//! * `migrate/` — envoyproxy/ratelimit's YAML to a rule file.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod answer;
pub mod caps;
pub mod migrate;
mod observe;
mod plan;
mod service;
mod table;
mod unit;

pub use observe::ANSWERS;
pub use service::RateLimitService;

/// The generated types of Envoy's APIs this crate speaks (the `envoy-types` crate), for
/// clients and tests.
pub use envoy_types;
