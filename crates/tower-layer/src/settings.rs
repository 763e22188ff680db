//! Layer-wide settings: headers, the responder hook, exemptions, how keys appear in events.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;

use crate::client_ip::Cidr;
use crate::headers::HeaderStyle;
use crate::key::peer_addr;
use crate::respond::Refused;
use crate::{PathPattern, QuotaRegistry};

/// Renders a refusal the service's own way (custom JSON, a gRPC status).
pub(crate) type Responder = Arc<dyn Fn(&Refused) -> http::Response<Bytes> + Send + Sync>;

/// How keys appear in refusal events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KeyLogging {
    /// A short SHA-256 fingerprint of the key: correlatable across gateways, not reversible.
    #[default]
    Hashed,
    /// The key's stored bytes, escaped (`Key(\x0caccount-4821)`): readable for text keys such as
    /// account ids; IP blocks appear as their binary encoding.
    Raw,
}

/// Everything layer-wide that is not the store or the rules.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) header_style: HeaderStyle,
    pub(crate) responder: Option<Responder>,
    pub(crate) key_logging: KeyLogging,
    pub(crate) unavailable_retry_after: Duration,
    pub(crate) exempt_paths: Vec<PathPattern>,
    pub(crate) exempt_peers: Vec<Cidr>,
    pub(crate) registry: Option<QuotaRegistry>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            header_style: HeaderStyle::default(),
            responder: None,
            key_logging: KeyLogging::default(),
            unavailable_retry_after: Duration::from_secs(1),
            exempt_paths: Vec::new(),
            exempt_peers: Vec::new(),
            registry: None,
        }
    }
}

impl Settings {
    /// Whether the request skips limiting altogether (health checks, internal networks).
    pub(crate) fn is_exempt(&self, request: &Parts) -> bool {
        let path = request.uri.path();
        if self
            .exempt_paths
            .iter()
            .any(|pattern| pattern.matches(path))
        {
            return true;
        }
        if self.exempt_peers.is_empty() {
            return false;
        }
        peer_addr(request)
            .is_some_and(|peer| self.exempt_peers.iter().any(|cidr| cidr.contains(peer)))
    }
}
