//! The bootstrap config: one listener routing every request to the test's upstream, through
//! the rate limit filter (and any other filter a test adds) to the router.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use crate::action::Action;
use crate::rate_limit_filter::{RATE_LIMIT_CLUSTER, RateLimitFilter};
use crate::yaml::{list_item, scalar};

/// The port [`EnvoyConfig::to_yaml`] gives the listener; [`Envoy::start`](crate::Envoy::start)
/// lets the kernel choose one instead.
pub const LISTENER_PORT: u16 = 10_000;

/// The port [`EnvoyConfig::to_yaml`] gives the admin interface (Envoy's customary one);
/// [`Envoy::start`](crate::Envoy::start) lets the kernel choose one instead.
pub const ADMIN_PORT: u16 = 9_901;

/// The name of the cluster of the test's upstream; the rate limit filter's statistics are under
/// `cluster.upstream.ratelimit.*`.
pub const UPSTREAM_CLUSTER: &str = "upstream";

/// The ports a config is rendered with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ports {
    pub(crate) listener: u16,
    pub(crate) admin: u16,
}

/// What the Envoy of a test runs: an Envoy bootstrap config, built up and rendered as YAML.
///
/// One HTTP listener on 127.0.0.1 routes every request to the `upstream` cluster (the test's
/// server on the address given to [`new`](Self::new)). With a
/// [`rate_limit_filter`](Self::rate_limit_filter), requests go through
/// `envoy.filters.http.ratelimit` first, which sends the descriptors the route's
/// [`rate_limit`](Self::rate_limit) entries make to the rate limit service. The connection
/// manager uses the peer's address as the client's (`use_remote_address: true`, no trusted
/// `X-Forwarded-For` hop), so [`Action::RemoteAddress`] gives `127.0.0.1` on loopback.
///
/// Room for filters still to come (the quota filter, `envoy.filters.http.rate_limit_quota`):
/// [`http_filter`](Self::http_filter) takes a filter's YAML, placed before the router, and
/// [`grpc_cluster`](Self::grpc_cluster) adds the HTTP/2 cluster it calls.
///
/// ```
/// use tollgate_envoy_harness::{Action, EnvoyConfig, RateLimitFilter};
///
/// let upstream = "127.0.0.1:3000".parse().unwrap();
/// let service = "127.0.0.1:8081".parse().unwrap();
/// let config = EnvoyConfig::new(upstream)
///     .rate_limit_filter(RateLimitFilter::new("tollgate", service))
///     .rate_limit([Action::remote_address()]);
/// assert!(config.to_yaml().contains("- remote_address: {}"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct EnvoyConfig {
    upstream: SocketAddr,
    rate_limit_filter: Option<RateLimitFilter>,
    rate_limits: Vec<Vec<Action>>,
    http_filters: Vec<String>,
    grpc_clusters: Vec<(String, SocketAddr)>,
    log_level: String,
}

/// The level Envoy logs at unless a config says otherwise ([`EnvoyConfig::log_level`]).
pub const DEFAULT_LOG_LEVEL: &str = "warn";

impl EnvoyConfig {
    /// A plain proxy: every request to the server on `upstream`, no filter but the router.
    pub fn new(upstream: SocketAddr) -> Self {
        Self {
            upstream,
            rate_limit_filter: None,
            rate_limits: Vec::new(),
            http_filters: Vec::new(),
            grpc_clusters: Vec::new(),
            log_level: DEFAULT_LOG_LEVEL.to_owned(),
        }
    }

    /// The level Envoy logs at (`--log-level`: `trace`, `debug`, `info`, `warn` — the default —,
    /// `error`, `critical`, `off`), what [`Envoy::log`](crate::Envoy::log) then holds. A filter's
    /// conversation with its service shows at `debug` (the quota filter logs each report it
    /// sends and each response it receives).
    ///
    /// ```
    /// use tollgate_envoy_harness::EnvoyConfig;
    ///
    /// let config = EnvoyConfig::new("127.0.0.1:3000".parse().unwrap()).log_level("debug");
    /// assert_ne!(config, EnvoyConfig::new("127.0.0.1:3000".parse().unwrap()));
    /// ```
    pub fn log_level(mut self, level: impl Into<String>) -> Self {
        self.log_level = level.into();
        self
    }

    /// The level Envoy logs at.
    pub(crate) fn level(&self) -> &str {
        &self.log_level
    }

    /// Puts the rate limit filter in front of the router (replacing any set before), and adds
    /// the HTTP/2 cluster `rate_limit_service` its calls go to.
    pub fn rate_limit_filter(mut self, filter: RateLimitFilter) -> Self {
        self.rate_limit_filter = Some(filter);
        self
    }

    /// Adds an entry to the route's `rate_limits`: one descriptor, whose entries are the
    /// `actions`' in order. Each call adds one more descriptor to the request's call to the
    /// service. Envoy refuses an entry without actions.
    pub fn rate_limit(mut self, actions: impl IntoIterator<Item = Action>) -> Self {
        self.rate_limits.push(actions.into_iter().collect());
        self
    }

    /// Adds an HTTP filter, given as the YAML of one item of the connection manager's
    /// `http_filters` (a mapping with `name` and `typed_config`; any indentation), after the
    /// rate limit filter and before the router, in the order added.
    ///
    /// ```
    /// use tollgate_envoy_harness::EnvoyConfig;
    ///
    /// let config = EnvoyConfig::new("127.0.0.1:3000".parse().unwrap())
    ///     .grpc_cluster("quota_service", "127.0.0.1:8082".parse().unwrap())
    ///     .http_filter(
    ///         r#"
    ///         name: envoy.filters.http.buffer
    ///         typed_config:
    ///           "@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer
    ///           max_request_bytes: 1024
    ///         "#,
    ///     );
    /// assert!(config.to_yaml().contains("          - name: envoy.filters.http.buffer\n"));
    /// ```
    pub fn http_filter(mut self, yaml: impl Into<String>) -> Self {
        self.http_filters.push(yaml.into());
        self
    }

    /// Adds a STATIC cluster `name` speaking HTTP/2 to `address`, for a gRPC service an
    /// [`http_filter`](Self::http_filter) calls (`envoy_grpc: {cluster_name: NAME}`).
    pub fn grpc_cluster(mut self, name: impl Into<String>, address: SocketAddr) -> Self {
        self.grpc_clusters.push((name.into(), address));
        self
    }

    /// The config as Envoy bootstrap YAML, listener on 127.0.0.1:[`LISTENER_PORT`] and admin on
    /// 127.0.0.1:[`ADMIN_PORT`] — an Envoy config that works, to read or copy. For
    ///
    /// ```
    /// use tollgate_envoy_harness::{Action, EnvoyConfig, RateLimitFilter};
    ///
    /// let config = EnvoyConfig::new("127.0.0.1:3000".parse().unwrap())
    ///     .rate_limit_filter(
    ///         RateLimitFilter::new("tollgate", "127.0.0.1:8081".parse().unwrap())
    ///             .failure_mode_deny(true)
    ///             .status_on_error(503)
    ///             .x_ratelimit_headers(true),
    ///     )
    ///     .rate_limit([Action::remote_address()])
    ///     .rate_limit([
    ///         Action::generic_entry("route", "api"),
    ///         Action::request_header("x-user-id", "user"),
    ///     ]);
    /// assert_eq!(config.to_yaml(), include_str!("example.yaml"));
    /// ```
    ///
    /// it renders (`src/example.yaml`, which the tests also give to `envoy --mode validate`):
    ///
    /// ```yaml
    #[doc = include_str!("example.yaml")]
    /// ```
    pub fn to_yaml(&self) -> String {
        self.render(Ports {
            listener: LISTENER_PORT,
            admin: ADMIN_PORT,
        })
    }

    /// The config with the listener and admin on `ports`.
    pub(crate) fn render(&self, ports: Ports) -> String {
        let mut yaml = format!(
            "admin:\n\
             \x20 address:\n\
             \x20   socket_address: {{address: 127.0.0.1, port_value: {admin}}}\n\
             static_resources:\n\
             \x20 listeners:\n\
             \x20 - name: ingress\n\
             \x20   address:\n\
             \x20     socket_address: {{address: 127.0.0.1, port_value: {listener}}}\n\
             \x20   filter_chains:\n\
             \x20   - filters:\n\
             \x20     - name: envoy.filters.network.http_connection_manager\n\
             \x20       typed_config:\n\
             \x20         \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager\n\
             \x20         stat_prefix: ingress\n\
             \x20         # The client is the peer (no proxy in front): `remote_address` is its address.\n\
             \x20         use_remote_address: true\n\
             \x20         xff_num_trusted_hops: 0\n\
             \x20         route_config:\n\
             \x20           name: ingress\n\
             \x20           virtual_hosts:\n\
             \x20           - name: upstream\n\
             \x20             domains: [\"*\"]\n\
             \x20             routes:\n\
             \x20             - match: {{prefix: \"/\"}}\n\
             \x20               route:\n\
             \x20                 cluster: {UPSTREAM_CLUSTER}\n",
            admin = ports.admin,
            listener = ports.listener,
        );
        self.write_rate_limits(&mut yaml);
        yaml.push_str("          http_filters:\n");
        let filters = self.rate_limit_filter.iter().map(RateLimitFilter::to_yaml);
        for filter in filters.chain(self.http_filters.iter().cloned()) {
            yaml.push_str(&list_item(&filter, 10));
            yaml.push('\n');
        }
        yaml.push_str(
            "          - name: envoy.filters.http.router\n\
             \x20           typed_config:\n\
             \x20             \"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router\n\
             \x20 clusters:\n",
        );
        yaml.push_str(&cluster(UPSTREAM_CLUSTER, self.upstream, false));
        let grpc = self
            .rate_limit_filter
            .iter()
            .map(|filter| (RATE_LIMIT_CLUSTER.to_owned(), filter.service()))
            .chain(self.grpc_clusters.iter().cloned());
        for (name, address) in grpc {
            yaml.push_str(&cluster(&name, address, true));
        }
        yaml
    }

    /// The route's `rate_limits`, one list of actions per descriptor.
    fn write_rate_limits(&self, yaml: &mut String) {
        if self.rate_limits.is_empty() {
            return;
        }
        yaml.push_str(
            "                  # Each entry is one descriptor sent to the service; each action adds one\n\
             \x20                 # (key, value) entry to it.\n\
             \x20                 rate_limits:\n",
        );
        for actions in &self.rate_limits {
            if actions.is_empty() {
                yaml.push_str("                  - actions: []\n");
                continue;
            }
            yaml.push_str("                  - actions:\n");
            for action in actions {
                // Writing to a `String` cannot fail.
                let _ = writeln!(yaml, "                    - {}", action.to_yaml());
            }
        }
    }
}

/// A STATIC cluster of one endpoint (an item of `clusters`); `http2` for a gRPC service.
fn cluster(name: &str, address: SocketAddr, http2: bool) -> String {
    let name = scalar(name);
    let protocol = if http2 {
        "    # gRPC: HTTP/2 to the service.\n\
         \x20   typed_extension_protocol_options:\n\
         \x20     envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n\
         \x20       \"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions\n\
         \x20       explicit_http_config:\n\
         \x20         http2_protocol_options: {}\n"
    } else {
        ""
    };
    // A dotted IPv4 address reads as a string bare; an IPv6 one (`::1`) needs quotes.
    let ip = match address.ip() {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => scalar(&ip.to_string()),
    };
    format!(
        "  - name: {name}\n\
         \x20   type: STATIC\n\
         \x20   connect_timeout: 1s\n\
         {protocol}\
         \x20   load_assignment:\n\
         \x20     cluster_name: {name}\n\
         \x20     endpoints:\n\
         \x20     - lb_endpoints:\n\
         \x20       - endpoint:\n\
         \x20           address:\n\
         \x20             socket_address: {{address: {ip}, port_value: {port}}}\n",
        port = address.port(),
    )
}
