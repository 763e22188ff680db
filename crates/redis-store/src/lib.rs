//! # tollgate-redis
//!
//! The shared count: this crate will hold the [`tollgate_core`] `Store` on Redis and Redis
//! Cluster — one Lua script per batch, run atomically on the server's clock (`TIME`), a key layout
//! that keeps each rule and key in one hash slot, and the per-rule failure policy wiring.
//!
//! It is a skeleton for now; the contract it will implement, and the conformance suite it will
//! pass, live in [`tollgate_core`].

/// The core crate whose `Store` contract this crate implements.
pub use tollgate_core as core;
