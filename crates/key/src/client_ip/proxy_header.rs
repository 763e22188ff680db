//! Which header the trusted proxies write the forwarding chain into.

use http::HeaderName;
use http::header::FORWARDED;

/// The one header a deployment's proxies append the client address to.
///
/// Exactly one is configured, and the others are never read: a proxy that appends to
/// `X-Forwarded-For` passes a client's own `Forwarded` or `X-Real-IP` header through untouched,
/// so reading more than one would let a client write its own address.
///
/// # Example
///
/// ```
/// use tollgate_key::client_ip::ProxyHeader;
///
/// assert_eq!(ProxyHeader::Forwarded.header_name(), "forwarded");
/// assert_eq!(ProxyHeader::XForwardedFor.header_name(), "x-forwarded-for");
/// assert_eq!(ProxyHeader::XRealIp.header_name(), "x-real-ip");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProxyHeader {
    /// The standard `Forwarded` header (RFC 7239); the address is each element's `for=` parameter,
    /// e.g. `Forwarded: for=192.0.2.60;proto=https, for="[2001:db8::1]:4711"`.
    Forwarded,
    /// The de-facto `X-Forwarded-For` header: a comma-separated list of addresses, e.g.
    /// `X-Forwarded-For: 192.0.2.60, 2001:db8::1`.
    XForwardedFor,
    /// The `X-Real-IP` header many nginx set-ups send instead of a list
    /// (`proxy_set_header X-Real-IP $remote_addr;`): **one** address, optionally with a port,
    /// e.g. `X-Real-IP: 192.0.2.60`. It is believed only from a trusted peer, like the others;
    /// a header sent more than once, or holding more than one value, is not believed (the peer
    /// counts), since a proxy that sets it replaces it and never appends.
    XRealIp,
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

impl ProxyHeader {
    /// The name of the header this variant reads.
    #[must_use]
    pub fn header_name(&self) -> HeaderName {
        match self {
            Self::Forwarded => FORWARDED,
            Self::XForwardedFor => X_FORWARDED_FOR,
            Self::XRealIp => X_REAL_IP,
        }
    }
}
