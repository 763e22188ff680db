//! Counting by address: the TCP peer, or the client behind trusted proxies, grouped into blocks.

use std::net::{IpAddr, SocketAddr};

use http::request::Parts;

use super::{KeyBuilder, KeyExtractor};
use crate::client_ip::{IpGrouping, TrustedProxies};

/// The TCP peer's address of a request: a `SocketAddr` request extension, or (with the `axum`
/// feature) axum's `ConnectInfo<SocketAddr>`, which `into_make_service_with_connect_info`
/// inserts. `None` when neither is there.
pub fn peer_addr(request: &Parts) -> Option<IpAddr> {
    if let Some(addr) = request.extensions.get::<SocketAddr>() {
        return Some(addr.ip());
    }
    #[cfg(feature = "axum")]
    if let Some(info) = request
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(info.0.ip());
    }
    None
}

/// Counts by the TCP peer's address, grouped into blocks ([`IpGrouping`]: IPv4 /32 and IPv6
/// /64 by default; IPv4-mapped IPv6 peers count as IPv4). Behind a proxy every request has the
/// proxy's address: use [`ClientIp`] there.
///
/// ```
/// use tollgate_tower::client_ip::IpGrouping;
/// use tollgate_tower::key::PeerIp;
/// let per_block = PeerIp::new().grouping(IpGrouping::default().with_ipv4_prefix(24)?);
/// # let _ = per_block;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct PeerIp {
    grouping: IpGrouping,
}

impl PeerIp {
    /// Counts by peer address, grouped by the default prefixes.
    pub fn new() -> Self {
        PeerIp::default()
    }

    /// Groups addresses by `grouping`'s prefixes.
    #[must_use]
    pub fn grouping(mut self, grouping: IpGrouping) -> Self {
        self.grouping = grouping;
        self
    }
}

impl KeyExtractor for PeerIp {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        match peer_addr(request) {
            Some(peer) => {
                append_block(&self.grouping, peer, key);
                true
            }
            None => false,
        }
    }
}

/// Counts by the client's address: behind trusted proxies, the address their one configured
/// header reports (read right to left, only from trusted peers; see [`TrustedProxies`]), else
/// the peer's; grouped into blocks like [`PeerIp`].
///
/// ```
/// use tollgate_tower::client_ip::{ProxyHeader, TrustedProxies};
/// use tollgate_tower::key::ClientIp;
///
/// let proxies = TrustedProxies::new(ProxyHeader::XForwardedFor).trust("10.0.0.0/8".parse()?);
/// let client = ClientIp::behind(proxies);
/// # let _ = client;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClientIp {
    proxies: Option<TrustedProxies>,
    grouping: IpGrouping,
}

impl ClientIp {
    /// The peer itself, with no proxies in front (same as [`PeerIp`]).
    pub fn peer() -> Self {
        ClientIp::default()
    }

    /// The client behind `proxies`.
    pub fn behind(proxies: TrustedProxies) -> Self {
        ClientIp {
            proxies: Some(proxies),
            grouping: IpGrouping::default(),
        }
    }

    /// Groups addresses by `grouping`'s prefixes.
    #[must_use]
    pub fn grouping(mut self, grouping: IpGrouping) -> Self {
        self.grouping = grouping;
        self
    }
}

impl KeyExtractor for ClientIp {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        let Some(peer) = peer_addr(request) else {
            return false;
        };
        let client = match &self.proxies {
            Some(proxies) => proxies.client_ip(peer, &request.headers),
            None => peer,
        };
        append_block(&self.grouping, client, key);
        true
    }
}

fn append_block(grouping: &IpGrouping, ip: IpAddr, key: &mut KeyBuilder) {
    key.part(grouping.key(ip).as_bytes());
}
