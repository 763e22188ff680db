//! One address, one spelling: IPv4-mapped IPv6 addresses are IPv4 addresses.

use std::net::IpAddr;

/// Returns `ip` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) turned into the IPv4 address
/// `a.b.c.d`; every other address is returned unchanged.
///
/// A dual-stack listener (one socket bound to `[::]`) reports IPv4 peers in their mapped form, so
/// the same caller would otherwise appear under two spellings: it would escape an IPv4 trusted-proxy
/// range and get a second rate-limit bucket. Everything in [`crate::client_ip`] canonicalises before
/// it compares or groups.
///
/// The deprecated IPv4-*compatible* form (`::a.b.c.d`) is an ordinary IPv6 address and stays one.
///
/// # Example
///
/// ```
/// use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
/// use tollgate_key::client_ip::canonical_ip;
///
/// let mapped: IpAddr = "::ffff:192.0.2.7".parse()?;
/// assert_eq!(canonical_ip(mapped), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)));
///
/// let v6: IpAddr = "2001:db8::1".parse()?;
/// assert_eq!(canonical_ip(v6), v6);
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
#[must_use]
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn mapped_becomes_ipv4() {
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 1, 2, 3).to_ipv6_mapped());
        assert_eq!(canonical_ip(mapped), IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)));
    }

    #[test]
    fn others_unchanged() {
        for text in [
            "10.1.2.3",
            "2001:db8::1",
            "::1",
            "::",
            "::10.1.2.3",
            "64:ff9b::1.2.3.4",
        ] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(canonical_ip(ip), ip, "{text}");
        }
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert_eq!(canonical_ip(v6), v6);
    }
}
