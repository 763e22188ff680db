//! The `envoy.filters.http.ratelimit` filter: which service it asks, and what it does when
//! that service cannot answer.

use std::net::SocketAddr;
use std::time::Duration;

use crate::yaml::{duration, scalar};

/// The name of the gRPC cluster the filter's calls go to.
pub(crate) const RATE_LIMIT_CLUSTER: &str = "rate_limit_service";

/// The filter's settings (`envoy.extensions.filters.http.ratelimit.v3.RateLimit`): the domain
/// its descriptors are sent under, the rate limit service (a gRPC server on `service`, reached
/// over HTTP/2 with the v3 API), and how it fails.
///
/// ```
/// use std::time::Duration;
/// use tollgate_envoy_harness::RateLimitFilter;
///
/// let filter = RateLimitFilter::new("tollgate", "127.0.0.1:8081".parse().unwrap())
///     .failure_mode_deny(true) // the service down: refuse...
///     .status_on_error(503) // ...with 503 rather than Envoy's 500
///     .x_ratelimit_headers(true) // X-RateLimit-Limit/-Remaining/-Reset on answers
///     .timeout(Duration::from_millis(500));
/// # let _ = filter;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct RateLimitFilter {
    domain: String,
    service: SocketAddr,
    failure_mode_deny: bool,
    status_on_error: Option<u16>,
    x_ratelimit_headers: bool,
    timeout: Duration,
}

/// The filter's timeout unless one is set: Envoy's own default, 20 ms, is shorter than a busy
/// test machine's pauses.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

impl RateLimitFilter {
    /// The filter asking the service on `service` about descriptors in `domain`; it lets
    /// requests through when the service fails (`failure_mode_deny: false`), waits
    /// [`DEFAULT_TIMEOUT`] for an answer and adds no `X-RateLimit-*` headers.
    pub fn new(domain: impl Into<String>, service: SocketAddr) -> Self {
        Self {
            domain: domain.into(),
            service,
            failure_mode_deny: false,
            status_on_error: None,
            x_ratelimit_headers: false,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Whether a request is refused when the service fails (cannot be reached, times out,
    /// answers an error): `failure_mode_deny`. Refused with 500 unless
    /// [`status_on_error`](Self::status_on_error) says otherwise.
    pub fn failure_mode_deny(mut self, deny: bool) -> Self {
        self.failure_mode_deny = deny;
        self
    }

    /// The HTTP status of a request refused because the service failed: `status_on_error`.
    /// Envoy takes only the statuses of its `envoy.type.v3.StatusCode` (503, 429, ...).
    pub fn status_on_error(mut self, status: u16) -> Self {
        self.status_on_error = Some(status);
        self
    }

    /// Whether Envoy adds the `X-RateLimit-Limit`, `-Remaining` and `-Reset` headers from the
    /// service's answer: `enable_x_ratelimit_headers: DRAFT_VERSION_03`.
    pub fn x_ratelimit_headers(mut self, on: bool) -> Self {
        self.x_ratelimit_headers = on;
        self
    }

    /// How long Envoy waits for the service's answer before counting it as failed.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Where the service listens (the address of the gRPC cluster the filter calls).
    pub(crate) fn service(&self) -> SocketAddr {
        self.service
    }

    /// The filter as a mapping of the HCM's `http_filters` list.
    pub(crate) fn to_yaml(&self) -> String {
        let mut yaml = format!(
            "name: envoy.filters.http.ratelimit\n\
             typed_config:\n\
             \x20 \"@type\": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit\n\
             \x20 domain: {domain}\n\
             \x20 # When the service fails (down, slow, an error): refuse (true) or let through (false).\n\
             \x20 failure_mode_deny: {deny}\n",
            domain = scalar(&self.domain),
            deny = self.failure_mode_deny,
        );
        if let Some(status) = self.status_on_error {
            yaml.push_str(&format!(
                "  # The status of a request refused because the service failed (Envoy's default: 500).\n\
                 \x20 status_on_error: {{code: {status}}}\n"
            ));
        }
        if self.x_ratelimit_headers {
            yaml.push_str(
                "  # X-RateLimit-Limit, -Remaining and -Reset on answers, from the service's.\n\
                 \x20 enable_x_ratelimit_headers: DRAFT_VERSION_03\n",
            );
        }
        yaml.push_str(&format!(
            "  # How long to wait for the service's answer (Envoy's default, 20ms, is short).\n\
             \x20 timeout: {timeout}\n\
             \x20 rate_limit_service:\n\
             \x20   transport_api_version: V3\n\
             \x20   grpc_service:\n\
             \x20     envoy_grpc: {{cluster_name: {RATE_LIMIT_CLUSTER}}}\n",
            timeout = duration(self.timeout),
        ));
        yaml
    }
}
