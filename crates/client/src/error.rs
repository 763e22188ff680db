//! The error of a request that was not sent because its host is cooling down.

use std::time::Duration;

/// A request failed fast, unsent: its host (or its method and path) said "wait" a moment ago,
/// and the policy says not to wait ([`WhenCooling::FailFast`](crate::WhenCooling::FailFast)).
///
/// ```
/// use std::time::Duration;
/// use tollgate_client::CoolingDown;
/// let error = CoolingDown::new("api.example".into(), Duration::from_secs(12));
/// assert_eq!(error.retry_after(), Duration::from_secs(12));
/// assert!(error.to_string().contains("api.example"));
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[error("{host} asked to wait {retry_after:?} more before another request; not sent")]
pub struct CoolingDown {
    host: String,
    retry_after: Duration,
}

impl CoolingDown {
    /// `host` is cooling down for `retry_after` more.
    pub fn new(host: String, retry_after: Duration) -> Self {
        CoolingDown { host, retry_after }
    }

    /// The host (authority) that asked to wait.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// How much longer it asked to wait.
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }
}
