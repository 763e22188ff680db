//! # tollgate-client
//!
//! The other side of a 429: a client that waits as long as the server asks, never less, with a
//! little jitter so a crowd does not come back in one instant, gives up when asked to wait too
//! long, and does not turn a refusal into a retry storm. One [`RetryAfterLayer`] around any
//! tower HTTP client (hyper-util's, say), or one [`RetryAfterMiddleware`] in a
//! `reqwest-middleware` client (feature `reqwest`).
//!
//! ## What it does on a `429` or `503`
//!
//! **Precedence** — the wait is, in order:
//!
//! 1. the server's `Retry-After`, as delta-seconds (`Retry-After: 30`) or an HTTP-date
//!    (measured against the response's own `Date` header when it has one, so a client whose
//!    clock is off still waits what the server meant);
//! 2. else the draft-10 `RateLimit` field's `t=` for a policy with nothing left (`r=0`; the
//!    longest of them);
//! 3. else the client's own capped exponential backoff with full jitter,
//!    `U(0, min(10 s, 100 ms × 2^retry))`.
//!
//! A server's wait gets a bounded jitter on top, never below it:
//! `server + U(0, min(0.1 × server, 1 s))` ([`Jitter`]). A server's "now" (`Retry-After: 0`, a
//! date already past, `t=0`) is never an immediate loop: the backoff's wait is used. A server's wait above the cap (default
//! 60 s) is not waited: the response is returned at once. So is the last response when the
//! retries (default 3) or the retry budget run out.
//!
//! **What is retried** — `429` and `503` (configurable), for requests safe to repeat: idempotent
//! methods (`GET`, `HEAD`, `OPTIONS`, `PUT`, `DELETE`, `TRACE`) or any request carrying an
//! `Idempotency-Key`, with a body that can be sent again (buffered up to 64 KiB; a larger or
//! streaming body is sent once and its answer returned as it is; a body that said it was
//! smaller than it is fails when it passes the limit, since it cannot be sent any more).
//!
//! **The retry budget** — tower's `TpsBudget`: over the last `ttl` (10 s), retries stay at or
//! below `retry_percent` (20 %) of the requests plus `min_per_sec` (10) × `ttl`. A retry the
//! budget refuses returns the response as it is, so a struggling server gets fewer requests,
//! not more.
//!
//! **The shared cool-down** — once a host answered "wait 30 s" (`Retry-After` on a retried
//! status), every request through this client to that host waits until then (or fails fast with
//! [`CoolingDown`], [`WhenCooling::FailFast`]) instead of each finding the 429 itself. A response
//! of any status saying a policy has nothing left (`RateLimit: "p";r=0;t=N`) holds later
//! requests with the same method and path on that host for N seconds: a client cannot know
//! which other paths a policy covers. A host is its name and port (the scheme's default made
//! explicit; never the userinfo; a relative URI's `Host` header); a request naming no host
//! neither waits nor holds. The table is bounded ([`CoolDowns`], 4,096 entries; a host's wait
//! outlives every route's).
//!
//! **Observability** — a `tracing` event on target `tollgate::client` per wait (host, status,
//! the server's value, the wait chosen), and with feature `metrics` the counters
//! `tollgate_client_retries_total{status}`, `tollgate_client_gave_up_total{reason}` and
//! `tollgate_client_cool_down_waits_total`.
//!
//! ## A recipe for Chirp's apps
//!
//! "Wait as long as Retry-After says (with jitter), and never retry immediately in a loop":
//!
//! ```
//! use std::time::Duration;
//! use tollgate_client::{RetryAfterLayer, RetryPolicy, WhenCooling};
//!
//! // Reads and idempotent writes wait up to 30 s, three times at most; a post carries an
//! // Idempotency-Key so it is safe to send again; the app shows "try again later" at once when
//! // Chirp already said to wait.
//! let policy = RetryPolicy::default()
//!     .max_wait(Duration::from_secs(30))
//!     .max_retries(3)
//!     .when_cooling(WhenCooling::FailFast);
//! let layer = RetryAfterLayer::new(policy);
//! # let _ = layer;
//! ```
//!
//! ## Features
//!
//! * `reqwest` — [`RetryAfterMiddleware`] for `reqwest-middleware`.
//! * `metrics` — counters through the `metrics` facade.
//!
//! The guide's chapter *The client side* (`docs/guide/src/client.md`) in the repository shows it at
//! work, task by task.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod attempts;
mod cool_down;
mod error;
#[cfg(feature = "grpc")]
mod grpc;
mod hint;
pub mod metric_names;
#[cfg(feature = "reqwest")]
mod middleware;
mod policy;
mod service;
mod wait;

pub use cool_down::{CoolDowns, DEFAULT_MAX_ENTRIES};
pub use error::CoolingDown;
#[cfg(feature = "grpc")]
pub use grpc::{GrpcRetry, GrpcRetryLayer, TonicBody, grpc_retry_delay};
pub use hint::{HintSource, ServerHint, exhausted_for, server_wait};
#[cfg(feature = "reqwest")]
pub use middleware::RetryAfterMiddleware;
pub use policy::{RetryPolicy, WhenCooling};
pub use service::{BoxError, RetryAfter, RetryAfterLayer};
pub use wait::{Backoff, Jitter};
