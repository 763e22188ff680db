//! Requests that skip limiting altogether: health checks by path, internal callers by network.

use http::request::Parts;

use crate::PathPattern;
use crate::client_ip::Cidr;
use crate::key::peer_addr;

/// Exempt paths and peer networks: the layer's own, and a rule set's (a rule file's `[exempt]`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Exemptions {
    pub(crate) paths: Vec<PathPattern>,
    pub(crate) peers: Vec<Cidr>,
}

impl Exemptions {
    /// Whether the request skips limiting.
    pub(crate) fn covers(&self, request: &Parts) -> bool {
        let path = request.uri.path();
        if self.paths.iter().any(|pattern| pattern.matches(path)) {
            return true;
        }
        if self.peers.is_empty() {
            return false;
        }
        peer_addr(request).is_some_and(|peer| self.peers.iter().any(|cidr| cidr.contains(peer)))
    }
}
