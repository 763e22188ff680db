//! # tollgate-tower
//!
//! The tower middleware of [tollgate](https://docs.rs/tollgate): add one [`RateLimitLayer`] to a
//! service, name who to count (see [`key`]) and how much each may do, per route, and get correct
//! `429`s with `Retry-After` and the IETF `RateLimit` / `RateLimit-Policy` fields.
//!
//! ```
//! use std::time::Duration;
//! use bytes::Bytes;
//! use http::{Method, Request, Response, StatusCode};
//! use tollgate_core::{MemoryStore, Quota, Rate};
//! use tollgate_tower::key::{ExtensionKey, PeerIp};
//! use tollgate_tower::{RateLimitLayer, Rule};
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! #[derive(Clone)]
//! struct AccountId(String);
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let layer = RateLimitLayer::new(MemoryStore::new())
//!     // Reads: bursts of 50, then 10 a second, per client address.
//!     .rule(Rule::new("reads", Quota::token_bucket(50, Rate::per_second(10))?, PeerIp::new())?)
//!     // Posting: 30 an hour per account, bursts of 5.
//!     .route(
//!         Method::POST,
//!         "/posts",
//!         Rule::new(
//!             "posting",
//!             Quota::token_bucket(5, Rate::per_hour(30))?,
//!             ExtensionKey::new(|account: &AccountId| account.0.clone()),
//!         )?,
//!     )?;
//! let service = ServiceBuilder::new()
//!     .layer(layer)
//!     .service(service_fn(|_request: Request<()>| async {
//!         Ok::<_, std::convert::Infallible>(Response::new(http_body_util::Empty::<Bytes>::new()))
//!     }));
//!
//! let mut request = Request::post("/posts").body(())?;
//! request.extensions_mut().insert(std::net::SocketAddr::from(([203, 0, 113, 7], 50_000)));
//! request.extensions_mut().insert(AccountId("account-4821".into()));
//! let response = service.oneshot(request).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//! assert!(response.headers().contains_key("ratelimit-policy"));
//! # Ok(())
//! # }
//! ```
//!
//! ## One request, start to end
//!
//! 1. Requests matching an exemption (a health-check path, an internal network) pass untouched.
//! 2. The current [`RuleSet`] is loaded (one atomic load; it can be replaced at runtime), and
//!    the rules matching the method and path are found: rules for every request, then the route
//!    table's rows.
//! 3. Each rule's key extractor names the caller; a missing key skips the rule (counted, and
//!    logged at `warn` the first time), or refuses the request if the rule says so
//!    ([`MissingKey`]). A key that cannot be found because of the deployment — an IP rule on a
//!    request with no peer address — answers `500` and logs the fix at `error`.
//! 4. All matching rules go to the store in **one** all-or-nothing call.
//! 5. Allowed: the inner service is called (after the pacing delay, if any) and its response
//!    gets the `RateLimit` / `RateLimit-Policy` fields of the disclosed policies. Refused:
//!    `429 Too Many Requests` with `Retry-After` (whole seconds, rounded up) and an RFC 9457
//!    problem body — or the rule's own action: a custom response, or a [`Flagged`] pass.
//! 6. Each refusal, real or shadow, is a `debug` `tracing` event on target `tollgate::refusal`
//!    (keys as keyed-hash fingerprints by default, see [`KeyLogging`]), and each rule sums its
//!    refusals up at `info` at most once a minute.
//! 7. When the store fails, rules that fail `open` let the request through and rules that fail
//!    `closed` answer `503` with `Retry-After`.
//!
//! ## Features
//!
//! * `axum` — read the peer address from axum's `ConnectInfo<SocketAddr>` too, and count per
//!   route with axum's `MatchedPath` (tollgate-key's `axum` feature). Without it, a service
//!   supplies the peer as a [`PeerAddr`](key::PeerAddr) request extension, as below.
//! * `metrics` — each rule's decisions through the `metrics` facade
//!   ([`RateLimitLayer::metrics`]).
//! * `grpc` — answer gRPC calls (`content-type: application/grpc*`) as gRPC clients read: a
//!   refusal is a trailers-only `RESOURCE_EXHAUSTED` with `google.rpc.RetryInfo` and
//!   `QuotaFailure` details, a rule failing closed `UNAVAILABLE`, a misconfigured one `INTERNAL`;
//!   IP rules read a tonic server's `TcpConnectInfo`. Rules for gRPC methods
//!   ([`RateLimitLayer::grpc`]) need no feature.
//!
//! ## Without axum
//!
//! A plain tower service served by hyper inserts each connection's peer address, so that IP
//! rules can count:
//!
//! ```no_run
//! use std::convert::Infallible;
//! use std::time::Duration;
//! use http::{Request, Response};
//! use hyper::body::Incoming;
//! use hyper_util::rt::{TokioIo, TokioTimer};
//! use hyper_util::service::TowerToHyperService;
//! use tollgate_core::{MemoryStore, Quota};
//! use tollgate_tower::key::{PeerAddr, PeerIp};
//! use tollgate_tower::{RateLimitLayer, Rule};
//! use tower::{ServiceBuilder, service_fn};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let limits = RateLimitLayer::new(MemoryStore::new())
//!     .rule(Rule::new("per-ip", Quota::fixed_window(100, Duration::from_secs(60))?, PeerIp::new())?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! loop {
//!     let (stream, peer) = listener.accept().await?;
//!     let service = ServiceBuilder::new()
//!         // Every request of this connection carries its peer.
//!         .map_request(move |mut request: Request<Incoming>| {
//!             request.extensions_mut().insert(PeerAddr(peer));
//!             request
//!         })
//!         .layer(limits.clone())
//!         .service(service_fn(|_request: Request<Incoming>| async {
//!             Ok::<_, Infallible>(Response::new(String::from("hello")))
//!         }));
//!     tokio::spawn(async move {
//!         let connection = hyper::server::conn::http1::Builder::new()
//!             .timer(TokioTimer::new())
//!             .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
//!         let _ = connection.await;
//!     });
//! }
//! # }
//! ```
//!
//! The guide's chapters *Routes and typed limits* (`docs/guide/src/routes.md`) and *Refusals and
//! headers* (`docs/guide/src/refusals.md`) in the repository show it at work, task by task.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "grpc")]
mod grpc;
pub mod headers;

mod body;
mod future;
mod handle;
mod in_force;
mod layer;
pub mod observe;
mod pipeline;
mod reset;
mod rules;
mod service;
mod settings;

pub use body::ResponseBody;
pub use future::ResponseFuture;
pub use handle::{LayerHandle, UnsupportedRule};
pub use headers::refused::{Refused, Responder};
pub use layer::RateLimitLayer;
pub use observe::alerts::{AlertShare, AlertShareError};
pub use observe::key_logging::KeyLogging;
pub use pipeline::flag::Flagged;
pub use reset::{ResetDone, ResetError};
pub use rules::actual_cost::{ActualCost, CostMeter, SettleFrom};
pub use rules::escalation::Escalation;
pub use rules::grpc_method::grpc_method_pattern;
pub use rules::missing_key::MissingKey;
pub use rules::on_refusal::OnRefusal;
pub use rules::overrides::QuotaOverrides;
pub use rules::path_pattern::{PathPattern, PathPatternError};
pub use rules::registry::QuotaRegistry;
pub use rules::rule::{CountWhen, Rule};
pub use rules::rule_set::RuleSet;
pub use service::RateLimit;

/// The core crate this middleware is built on.
pub use tollgate_core as core;
/// Who a rule counts: the key extractors (the `tollgate-key` crate).
pub use tollgate_key as key;
/// The client address behind trusted proxies (`tollgate_key::client_ip`).
pub use tollgate_key::client_ip;
