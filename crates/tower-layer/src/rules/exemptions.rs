//! Requests that skip limiting altogether: health checks by path, internal callers by network.

use std::sync::OnceLock;

use http::request::Parts;

use super::path_index::PathIndex;
use crate::rules::path_pattern::PathPattern;
use tollgate_key::client_ip::Cidr;
use tollgate_key::peer_addr;

/// Exempt paths and peer networks: the layer's own, and a rule set's (a rule file's `[exempt]`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Exemptions {
    paths: Vec<PathPattern>,
    /// The paths as one tree, made on the first request after they change.
    index: OnceLock<PathIndex>,
    pub(crate) peers: Vec<Cidr>,
}

impl Exemptions {
    /// Exempts the paths `patterns` match too.
    pub(crate) fn add_paths(&mut self, patterns: impl IntoIterator<Item = PathPattern>) {
        self.paths.extend(patterns);
        self.index = OnceLock::new();
    }

    /// Whether the request skips limiting.
    pub(crate) fn covers(&self, request: &Parts) -> bool {
        let path = request.uri.path();
        if !self.paths.is_empty()
            && self
                .index
                .get_or_init(|| PathIndex::new(&self.paths))
                .any(path)
        {
            return true;
        }
        if self.peers.is_empty() {
            return false;
        }
        peer_addr(request).is_some_and(|peer| self.peers.iter().any(|cidr| cidr.contains(peer)))
    }
}
