//! Counting by address: the TCP peer, or the client behind trusted proxies, grouped into blocks.

use std::net::{IpAddr, SocketAddr};

use http::request::Parts;

use super::{KeyBuilder, KeyExtractor, KeyValueError, next_value};
use crate::client_ip::{IpGrouping, TrustedProxies};

/// The TCP peer of a request, as a request extension: what a serve loop that is not axum's
/// inserts so that [`PeerIp`] and [`ClientIp`] can count by address.
///
/// axum apps need nothing of this: serve with `into_make_service_with_connect_info::<SocketAddr>()`
/// and enable the `axum` feature, and the layer reads axum's `ConnectInfo`. With plain tower and
/// hyper, insert it per connection, as tollgate-tower's crate documentation shows ("Without
/// axum").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerAddr(pub SocketAddr);

/// The TCP peer's address of a request: a [`PeerAddr`] or `SocketAddr` request extension, (with
/// the `axum` feature) axum's `ConnectInfo<SocketAddr>`, which
/// `into_make_service_with_connect_info` inserts, or (with the `tonic` feature) the
/// `TcpConnectInfo` a tonic server inserts in every call. `None` when none is there.
pub fn peer_addr(request: &Parts) -> Option<IpAddr> {
    if let Some(PeerAddr(addr)) = request.extensions.get::<PeerAddr>() {
        return Some(addr.ip());
    }
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
    #[cfg(feature = "tonic")]
    if let Some(addr) = request
        .extensions
        .get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(tonic::transport::server::TcpConnectInfo::remote_addr)
    {
        return Some(addr.ip());
    }
    None
}

/// What an IP rule says when the request carries no peer address: the service is set up so that
/// no address can ever be found, which no caller can cause or fix.
const NO_PEER_ADDRESS: &str = if cfg!(feature = "axum") {
    "no peer address on the request: serve the app with \
     `into_make_service_with_connect_info::<SocketAddr>()`, or insert a \
     `tollgate_key::PeerAddr` extension in the serve loop"
} else {
    "no peer address on the request: enable tollgate's `axum` feature and serve the app with \
     `into_make_service_with_connect_info::<SocketAddr>()`, or insert a \
     `tollgate_key::PeerAddr` extension in the serve loop"
};

fn no_peer_address(request: &Parts) -> Option<&'static str> {
    peer_addr(request).is_none().then_some(NO_PEER_ADDRESS)
}

/// Counts by the TCP peer's address, grouped into blocks ([`IpGrouping`]: IPv4 /32 and IPv6
/// /64 by default; IPv4-mapped IPv6 peers count as IPv4). Behind a proxy every request has the
/// proxy's address: use [`ClientIp`] there.
///
/// ```
/// use tollgate_key::client_ip::IpGrouping;
/// use tollgate_key::PeerIp;
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

    fn misconfiguration(&self, request: &Parts) -> Option<&'static str> {
        no_peer_address(request)
    }

    fn key_from_values(
        &self,
        values: &mut dyn Iterator<Item = &str>,
        key: &mut KeyBuilder,
    ) -> Result<(), KeyValueError> {
        block_of_value(&self.grouping, values, key)
    }
}

/// Counts by the client's address: behind trusted proxies, the address their one configured
/// header reports (read right to left, only from trusted peers; see [`TrustedProxies`]), else
/// the peer's; grouped into blocks like [`PeerIp`].
///
/// ```
/// use tollgate_key::client_ip::{ProxyHeader, TrustedProxies};
/// use tollgate_key::ClientIp;
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

    fn misconfiguration(&self, request: &Parts) -> Option<&'static str> {
        no_peer_address(request)
    }

    fn key_from_values(
        &self,
        values: &mut dyn Iterator<Item = &str>,
        key: &mut KeyBuilder,
    ) -> Result<(), KeyValueError> {
        block_of_value(&self.grouping, values, key)
    }
}

/// An address given by hand, grouped as requests' are.
fn block_of_value(
    grouping: &IpGrouping,
    values: &mut dyn Iterator<Item = &str>,
    key: &mut KeyBuilder,
) -> Result<(), KeyValueError> {
    const EXPECTED: &str = "an IP address";
    let value = next_value(values, EXPECTED)?;
    let ip: IpAddr = value.trim().parse().map_err(|_| KeyValueError::Invalid {
        value: value.to_owned(),
        expected: EXPECTED,
    })?;
    append_block(grouping, ip, key);
    Ok(())
}

fn append_block(grouping: &IpGrouping, ip: IpAddr, key: &mut KeyBuilder) {
    key.part(grouping.key(ip).as_bytes());
}
