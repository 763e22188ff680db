//! What an HTTP caller sees about its limits: the `RateLimit` and `RateLimit-Policy` fields,
//! the legacy `X-RateLimit-*` fields, `Retry-After`, and RFC 9457 problem bodies for refusals
//! (and, with the `grpc` feature, the gRPC statuses a gRPC caller reads instead); a refusal as
//! the layer's responder hook sees it ([`Refused`](crate::Refused)) is made of them.
//!
//! Everything here is formatting: it takes a policy name, its quota and this request's decision
//! ([`HeaderStyle::fields`]) and produces [`http`] header values and bodies. It does not choose what
//! to disclose; the middleware does (see [Disclosure](#disclosure)).
//!
//! # The fields
//!
//! | field | when | value |
//! |---|---|---|
//! | `RateLimit-Policy` | every response, by default ([`HeaderStyle`]) | one `"name";q=…;w=…` item per policy |
//! | `RateLimit` | every response, by default | one `"name";r=…;t=…` item per policy |
//! | `X-RateLimit-Limit`, `-Remaining`, `-Reset` | only when asked for | the first policy's limit, remaining, reset seconds |
//! | `Retry-After` | a refusal that a retry can cure | whole seconds, rounded up, at least 1 |
//! | `Content-Type: application/problem+json` | the limiter's own 429 and 503 responses | a [`Problem`] body |
//!
//! `RateLimit-Policy` and `RateLimit` follow draft-ietf-httpapi-ratelimit-headers-10: each is a
//! Structured Field (RFC 8941) List whose items are the policy names as sf-strings, in the
//! order the middleware gives them (on a 429, the refusing policy first). Their parameters:
//!
//! * `q`: the quota ([`Quota::limit`](tollgate_core::Quota::limit));
//! * `w`: the window, in seconds (mapping below);
//! * `r`: what remains now ([`Decision::remaining`](tollgate_core::Decision::remaining));
//! * `t`: seconds until the quota is whole again
//!   ([`Decision::reset_after`](tollgate_core::Decision::reset_after), rounded **up** with
//!   [`whole_seconds_up`](tollgate_core::whole_seconds_up)).
//!
//! Every number is clamped to 999,999,999,999,999 (sf-integers have at most 15 digits), and a
//! name that needs it is escaped, so the fields always parse.
//!
//! # From algorithms to `q` and `w`
//!
//! The draft describes "`q` units per `w` seconds". Windows fit that exactly; for the scheduled
//! algorithms `q` is what can be spent at once and `w` the time an exhausted caller takes to get
//! all of it back ([`Quota::replenish_time`](tollgate_core::Quota::replenish_time)), so a client
//! that spends `q` and then waits `w` is never refused. `w` is rounded up and at least 1.
//!
//! | algorithm | `q` | `w` (seconds) |
//! |---|---|---|
//! | fixed window | the limit | the window length, rounded up |
//! | sliding window counter | the limit | the window length, rounded up |
//! | sliding window log | the limit | the window length, rounded up |
//! | token bucket | the capacity | time for an empty bucket to refill completely (τ), rounded up, ≥ 1 |
//! | GCRA | the burst | τ = burst × emission interval, rounded up, ≥ 1 |
//! | leaky bucket (pacing) | the slots that can be scheduled ahead | `limit` emission intervals, rounded up, ≥ 1 |
//!
//! # `Retry-After`
//!
//! A wait is sent in whole seconds rounded **up** (300 ms → `1`, exactly 2 s → `2`, 2.001 s →
//! `3`), and a refusal always says at least `Retry-After: 1`: a client told `0` would retry at
//! once and be refused again. A refusal for [`RefusalReason::CostExceedsLimit`](tollgate_core::RefusalReason::CostExceedsLimit) carries no
//! `Retry-After` at all, because the same request can never fit however long the caller waits
//! (see [`Decision::retry_after_secs`](tollgate_core::Decision::retry_after_secs)).
//!
//! # Problem bodies
//!
//! [`Problem`] builds RFC 9457 bodies for the three responses the limiter sends itself: rate
//! limited (429, `urn:tollgate:problem:rate-limited`), cost exceeds limit (429,
//! `urn:tollgate:problem:cost-exceeds-limit`) and limiter unavailable (503,
//! `urn:tollgate:problem:limiter-unavailable`), with the extension members `policy` and
//! `retry_after` where they mean something. They are body-type-agnostic: bytes plus status and
//! headers, for the middleware to wrap in its own body type.
//!
//! # Disclosure
//!
//! Limits tell a well-behaved client how to pace itself, which is why the IETF fields are on by
//! default. They also tell an abuser exactly how fast to go, so not every rule should be shown:
//! the middleware passes only the policies it discloses. Rules whose action is a challenge, a
//! flag or a shadow check are not disclosed by default (announcing a trap defeats it, and a
//! shadow rule is not enforced, so advertising it would mislead). Only policy names, quotas,
//! remaining counts and times are sent: never the key (an IP address or user id), the store, or
//! why the limiter is unavailable. [`HeaderStyle::none`] turns all rate-limit fields off.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use http::{StatusCode, header::RETRY_AFTER};
//! use tollgate_core::{Decision, Quota, Rate, RefusalReason, RuleId};
//! use tollgate_tower::Refused;
//! use tollgate_tower::headers::HeaderStyle;
//!
//! let burst = Quota::token_bucket(100, Rate::per_second(2))?; // refills in 50 s
//! let daily = Quota::fixed_window(1000, Duration::from_secs(86_400))?;
//!
//! // Allowed: say where the caller stands under both policies.
//! let burst_ok = Decision::allowed(100, 50, Duration::from_secs(25));
//! let daily_ok = Decision::allowed(1000, 900, Duration::from_millis(3_599_500));
//! let headers = HeaderStyle::default().fields([
//!     ("burst", &burst, &burst_ok),
//!     ("daily", &daily, &daily_ok),
//! ]);
//! assert_eq!(headers["ratelimit-policy"], r#""burst";q=100;w=50, "daily";q=1000;w=86400"#);
//! assert_eq!(headers["ratelimit"], r#""burst";r=50;t=25, "daily";r=900;t=3600"#);
//!
//! // Refused by `daily`: 429, Retry-After rounded up, a problem body.
//! let daily_no = Decision::refused(
//!     RefusalReason::LimitReached, 1000, 0, Duration::from_millis(7_200_300), Duration::from_millis(300),
//! );
//! let refused = Refused::for_policy(&RuleId::new("daily")?, daily, daily_no, HeaderStyle::default());
//! let response = refused.default_response();
//! assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert_eq!(response.headers()[RETRY_AFTER], "1");
//! assert_eq!(response.headers()["ratelimit"], r#""daily";r=0;t=7201"#);
//! assert_eq!(response.headers()["content-type"], "application/problem+json");
//! assert!(String::from_utf8(response.body().to_vec())?.contains(r#""retry_after":1"#));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub(crate) mod disclosure;
#[cfg(feature = "grpc")]
pub(crate) mod grpc;
mod ietf;
mod json;
mod legacy;
mod policy;
mod problem;
pub(crate) mod refused;
mod report;
mod retry_after;
mod sf;
mod style;

pub use problem::Problem;
pub use style::HeaderStyle;
