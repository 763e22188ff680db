//! # tollgate-axum
//!
//! Business limits next to their handlers. Limits whose key the request parts carry belong in
//! the [`RateLimitLayer`](tollgate_tower::RateLimitLayer); limits such as "400 follows a day per
//! account" or "10 login attempts per target account per 15 minutes" belong next to the handler
//! that knows the key. This crate makes them typed:
//!
//! * a [`Limit`] is declared once as a small type: policy id, default quota, key, cost, mode and
//!   store-failure policy; its live quota comes from the
//!   [`QuotaRegistry`](tollgate_tower::QuotaRegistry) the layer also reads, so limits change at
//!   runtime without rebuilding the router;
//! * [`Limited<L>`] enforces `L` while extracting; `Option<Limited<L>>` is `None` only when the
//!   request has no key;
//! * [`Limiter`] checks limits on keys known only inside the handler (the target account of a
//!   login, the phone number of an SMS code), one or several at once, all or nothing, and
//!   [`Charged::refund`] takes a charge back ("count only failed logins");
//! * refusals are [`LimitRejection`]s that render exactly the layer's `429` (same code:
//!   [`Refused::for_policy`](tollgate_tower::Refused::for_policy)).
//!
//! Handlers and the layer share one store and one registry through a [`Tollgate`] request
//! extension; a router that forgot it answers `500` with an error log, never a panic.
//!
//! The example `examples/chirp_limits.rs` (run with `cargo run --features axum --example chirp_limits`)
//! has a follow endpoint, a login endpoint (per target account, failing closed) and an SMS-code
//! endpoint (per phone number, failing closed, plus a global cap).
//!
//! The guide's chapter *Routes and typed limits* (`docs/guide/src/routes.md`) in the repository
//! shows it at work, task by task.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod charge;
mod limit;
mod limited;
mod limiter;
mod rejection;
mod source;
mod tollgate;

pub use charge::{Charged, RefundFailed};
pub use limit::Limit;
pub use limited::Limited;
pub use limiter::{Checks, Limiter};
pub use rejection::LimitRejection;
pub use source::TollgateSource;
pub use tollgate::Tollgate;

/// The tower middleware this crate shares responses and headers with.
pub use tollgate_tower as tower;
