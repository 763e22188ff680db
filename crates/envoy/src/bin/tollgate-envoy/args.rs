//! The command line: flags, each with an environment variable of its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Envoy's rate limit service (RLS v3, and the quota service RLQS) from a tollgate rule file.
#[derive(Debug, Parser)]
#[command(name = "tollgate-envoy", version)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serves the rate limit service until SIGTERM or Ctrl-C.
    Serve(Settings),
    /// Checks a rule file: prints its rules for Envoy (exit 0) or its mistakes (exit 1).
    Check {
        /// The rule file.
        file: PathBuf,
    },
    /// Turns an envoyproxy/ratelimit YAML config into a rule file, printed; what it cannot
    /// express is refused with the YAML line it came from (exit 1).
    Migrate {
        /// The envoyproxy/ratelimit config (one domain).
        file: PathBuf,
    },
}

/// How `serve` runs.
#[derive(Debug, Args)]
pub(crate) struct Settings {
    /// The rule file, followed for changes (a bad change is refused and logged; the rules in
    /// force stay).
    #[arg(long, env = "TOLLGATE_RULES")]
    pub(crate) rules: PathBuf,
    /// Where Envoy reaches the gRPC services (RLS, RLQS, grpc.health.v1).
    #[arg(long, env = "TOLLGATE_LISTEN", default_value = "127.0.0.1:8081")]
    pub(crate) listen: SocketAddr,
    /// Where Prometheus scrapes `/metrics` (no metrics endpoint when left out).
    #[arg(long, env = "TOLLGATE_METRICS")]
    pub(crate) metrics: Option<SocketAddr>,
    /// Count in this Redis (`redis://host:port/`); in memory when neither this nor
    /// `--redis-cluster` is given.
    #[arg(long, env = "TOLLGATE_REDIS", conflicts_with = "redis_cluster")]
    pub(crate) redis: Option<String>,
    /// Count in this Redis Cluster: its nodes' URLs, comma-separated.
    #[arg(long, env = "TOLLGATE_REDIS_CLUSTER", value_delimiter = ',')]
    pub(crate) redis_cluster: Vec<String>,
    /// The prefix of every key in Redis: the same as the axum services' to count with them.
    #[arg(long, env = "TOLLGATE_REDIS_PREFIX", default_value = "tg")]
    pub(crate) redis_prefix: String,
    /// How long a store call may take before each rule's `on_store_failure` answers instead
    /// (Envoy's own rate limit `timeout` must be longer).
    #[arg(long, env = "TOLLGATE_STORE_TIMEOUT", default_value = "50ms", value_parser = humantime::parse_duration)]
    pub(crate) store_timeout: Duration,
    /// On SIGTERM, how long calls in flight (and Envoy's open connections) get to finish
    /// before the process exits.
    #[arg(long, env = "TOLLGATE_DRAIN", default_value = "5s", value_parser = humantime::parse_duration)]
    pub(crate) drain: Duration,
}
