//! # tollgate-tower
//!
//! The tower middleware of [tollgate](https://docs.rs/tollgate): this crate will hold
//! `RateLimitLayer`, `RateLimit<S>` and its `ResponseFuture` (split the way tower-http splits a
//! middleware), the key extractors that name who to count (peer IP, client IP behind trusted
//! proxies, IPv6 /64 blocks, headers, request extensions, global), route matching, and the
//! refusal responses with `Retry-After` and the IETF `RateLimit` / `RateLimit-Policy` fields.
//!
//! It is a skeleton for now: the quotas, algorithms and stores it builds on live in
//! [`tollgate_core`], re-exported here as [`core`].

/// The core crate this middleware is built on.
pub use tollgate_core as core;
