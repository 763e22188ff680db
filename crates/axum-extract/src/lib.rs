//! # tollgate-axum
//!
//! Business limits next to their handlers: this crate will hold typed limits (a `Limit` trait a
//! small type implements, such as `FollowsPerDay`), the `Limited<L>` extractor that enforces one
//! while extracting, a limiter handle for keys known only inside a handler (login attempts per
//! target account, SMS codes per phone number), and the admin router.
//!
//! It is a skeleton for now; it builds on [`tollgate_tower`] (for the shared refusal responses
//! and headers) and [`tollgate_core`] (quotas, decisions, stores).

/// The tower middleware this crate shares responses and headers with.
pub use tollgate_tower as tower;
