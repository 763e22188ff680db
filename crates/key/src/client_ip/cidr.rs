//! An IP network: an address masked to a prefix length, like `10.0.0.0/8` or `2001:db8::/32`.
//!
//! The network arithmetic is `ipnet`'s. What this type adds is tollgate's reading of an address:
//! a bare address is a host route, IPv4-mapped IPv6 is IPv4 (in networks and in `contains`),
//! host bits are cleared rather than refused, and an error names the input it rejects — `ipnet`
//! alone accepts no bare addresses and keeps mapped networks in IPv6, which would let a
//! dual-stack listener's `::ffff:10.0.0.7` slip past a `10.0.0.0/8` proxy range.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

use crate::client_ip::canonical_ip;

/// An IPv4 or IPv6 network: an address with every bit past the prefix length cleared.
///
/// Used for trusted proxy ranges ([`TrustedProxies`](crate::client_ip::TrustedProxies)) and for
/// the blocks callers are grouped into ([`IpGrouping`](crate::client_ip::IpGrouping)).
///
/// * Parsing accepts `addr/prefix` and a bare address, which is a host route (`/32` or `/128`).
/// * Host bits are cleared, not refused: `10.1.2.3/8` is `10.0.0.0/8`.
/// * IPv4-mapped IPv6 counts as IPv4 (see [`canonical_ip`]): `::ffff:10.0.0.0/104` *is*
///   `10.0.0.0/8`, and [`contains`](Cidr::contains) canonicalises the address it is given. An IPv6
///   network never contains an IPv4 address, even `::/0`.
///
/// # Example
///
/// ```
/// use tollgate_key::client_ip::Cidr;
///
/// let office: Cidr = "192.0.2.0/24".parse()?;
/// assert!(office.contains("192.0.2.77".parse()?));
/// assert!(office.contains("::ffff:192.0.2.77".parse()?)); // a dual-stack listener's spelling
/// assert!(!office.contains("192.0.3.1".parse()?));
/// assert_eq!(office.to_string(), "192.0.2.0/24");
///
/// let host: Cidr = "2001:db8::1".parse()?;
/// assert_eq!(host.prefix(), 128);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    net: IpNet,
}

impl Cidr {
    /// The network of `addr` with `prefix` leading bits kept; the other bits are cleared.
    ///
    /// # Errors
    ///
    /// A [`CidrError`] if `prefix` is longer than the address (over 32 for IPv4, over 128 for IPv6).
    ///
    /// # Example
    ///
    /// ```
    /// use std::net::{IpAddr, Ipv4Addr};
    /// use tollgate_key::client_ip::Cidr;
    ///
    /// let net = Cidr::new(IpAddr::V4(Ipv4Addr::new(10, 9, 8, 7)), 8)?;
    /// assert_eq!(net.to_string(), "10.0.0.0/8");
    /// assert!(Cidr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 33).is_err());
    /// # Ok::<(), tollgate_key::client_ip::CidrError>(())
    /// ```
    pub fn new(addr: IpAddr, prefix: u8) -> Result<Self, CidrError> {
        if prefix > max_prefix(addr) {
            return Err(CidrError {
                input: format!("{addr}/{prefix}"),
                reason: Reason::PrefixTooLong {
                    max: max_prefix(addr),
                },
            });
        }
        Ok(Self::masked(addr, prefix))
    }

    /// The host route of `addr`: `/32` for IPv4, `/128` for IPv6 (after [`canonical_ip`]).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate_key::client_ip::Cidr;
    ///
    /// let host = Cidr::host("::ffff:192.0.2.1".parse()?);
    /// assert_eq!(host.to_string(), "192.0.2.1/32");
    /// # Ok::<(), std::net::AddrParseError>(())
    /// ```
    #[must_use]
    pub fn host(addr: IpAddr) -> Self {
        let addr = canonical_ip(addr);
        Self {
            net: IpNet::from(addr),
        }
    }

    /// Builds the network with `prefix` clamped to the address family's length, canonicalising
    /// an IPv4-mapped network into IPv4. Callers that took `prefix` from outside validate first.
    pub(crate) fn masked(addr: IpAddr, prefix: u8) -> Self {
        // The mapped range is ::ffff:0:0/96; a network inside it is an IPv4 network.
        if let IpAddr::V6(v6) = addr
            && prefix >= 96
            && let Some(v4) = v6.to_ipv4_mapped()
        {
            return Self::masked(IpAddr::V4(v4), prefix - 96);
        }
        let prefix = prefix.min(max_prefix(addr));
        let net = IpNet::new(addr, prefix).unwrap_or_else(|_| IpNet::from(addr));
        Self { net: net.trunc() }
    }

    /// The network address (host bits cleared).
    #[must_use]
    pub fn addr(&self) -> IpAddr {
        self.net.network()
    }

    /// The prefix length: how many leading bits of [`addr`](Cidr::addr) name the network.
    #[must_use]
    pub fn prefix(&self) -> u8 {
        self.net.prefix_len()
    }

    /// Whether `ip` (after [`canonical_ip`]) lies inside this network.
    ///
    /// An IPv4 address is never inside an IPv6 network and the other way round.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.net.contains(&canonical_ip(ip))
    }
}

fn max_prefix(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

impl From<IpAddr> for Cidr {
    /// The host route of the address; see [`Cidr::host`].
    fn from(addr: IpAddr) -> Self {
        Self::host(addr)
    }
}

impl fmt::Display for Cidr {
    /// `addr/prefix`, always with the prefix (`192.0.2.1/32`), so the text parses back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net.network(), self.net.prefix_len())
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    /// Parses `addr/prefix` or a bare address (a host route). The prefix is 1 to 3 ASCII digits;
    /// no whitespace is accepted anywhere, and no IPv6 zone (`fe80::1%eth0`).
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let error = |reason| CidrError {
            input: input.to_owned(),
            reason,
        };
        let (addr_text, prefix_text) = match input.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (input, None),
        };
        let addr: IpAddr = addr_text.parse().map_err(|_| error(Reason::Address))?;
        let Some(prefix_text) = prefix_text else {
            return Ok(Self::host(addr));
        };
        let all_digits = prefix_text.bytes().all(|b| b.is_ascii_digit());
        if prefix_text.is_empty() || prefix_text.len() > 3 || !all_digits {
            return Err(error(Reason::Prefix));
        }
        let prefix: u8 = prefix_text.parse().map_err(|_| error(Reason::Prefix))?;
        let max = max_prefix(addr);
        if prefix > max {
            return Err(error(Reason::PrefixTooLong { max }));
        }
        Ok(Self::masked(addr, prefix))
    }
}

/// Why a network could not be built: [`Cidr::from_str`](std::str::FromStr::from_str) or
/// [`Cidr::new`] was given something that is not an IP network.
///
/// The message names the offending input, so a bad entry in a list of trusted proxies is easy to
/// find.
///
/// # Example
///
/// ```
/// use tollgate_key::client_ip::Cidr;
///
/// let err = "10.0.0.0/33".parse::<Cidr>().unwrap_err();
/// assert!(err.is_invalid_prefix());
/// assert_eq!(err.input(), "10.0.0.0/33");
/// assert!(err.to_string().contains("10.0.0.0/33"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CidrError {
    input: String,
    reason: Reason,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    Address,
    Prefix,
    PrefixTooLong { max: u8 },
}

impl CidrError {
    /// The text that was rejected (for [`Cidr::new`], the address and prefix as `addr/prefix`).
    #[must_use]
    pub fn input(&self) -> &str {
        &self.input
    }

    /// The part before the `/` is not an IP address.
    #[must_use]
    pub fn is_invalid_address(&self) -> bool {
        matches!(self.reason, Reason::Address)
    }

    /// The part after the `/` is not a number, or is longer than the address.
    #[must_use]
    pub fn is_invalid_prefix(&self) -> bool {
        matches!(self.reason, Reason::Prefix | Reason::PrefixTooLong { .. })
    }
}

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let input = &self.input;
        match self.reason {
            Reason::Address => write!(f, "invalid network {input:?}: not an IP address"),
            Reason::Prefix => write!(
                f,
                "invalid network {input:?}: prefix length is not a number"
            ),
            Reason::PrefixTooLong { max } => {
                write!(f, "invalid network {input:?}: prefix length is over {max}")
            }
        }
    }
}

impl std::error::Error for CidrError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        text.parse().unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn parses_and_displays() {
        assert_eq!(cidr("10.0.0.0/8").to_string(), "10.0.0.0/8");
        assert_eq!(cidr("2001:db8::/32").to_string(), "2001:db8::/32");
        assert_eq!(cidr("0.0.0.0/0").to_string(), "0.0.0.0/0");
        assert_eq!(cidr("::/0").to_string(), "::/0");
    }

    #[test]
    fn bare_address_is_a_host_route() {
        assert_eq!(cidr("192.0.2.1"), Cidr::new(ip("192.0.2.1"), 32).unwrap());
        assert_eq!(cidr("2001:db8::1").prefix(), 128);
        assert_eq!(Cidr::from(ip("192.0.2.1")).to_string(), "192.0.2.1/32");
    }

    #[test]
    fn host_bits_are_cleared() {
        assert_eq!(cidr("10.1.2.3/8").to_string(), "10.0.0.0/8");
        assert_eq!(
            cidr("2001:db8:1:2:3:4:5:6/48").to_string(),
            "2001:db8:1::/48"
        );
        assert_eq!(cidr("10.1.2.3/0").to_string(), "0.0.0.0/0");
    }

    #[test]
    fn contains_respects_the_prefix() {
        let net = cidr("10.0.0.0/8");
        assert!(net.contains(ip("10.0.0.0")));
        assert!(net.contains(ip("10.255.255.255")));
        assert!(!net.contains(ip("11.0.0.0")));
        assert!(!net.contains(ip("9.255.255.255")));

        let v6 = cidr("2001:db8::/32");
        assert!(v6.contains(ip("2001:db8:ffff::1")));
        assert!(!v6.contains(ip("2001:db9::1")));

        assert!(cidr("0.0.0.0/0").contains(ip("203.0.113.9")));
        assert!(cidr("192.0.2.1").contains(ip("192.0.2.1")));
        assert!(!cidr("192.0.2.1").contains(ip("192.0.2.2")));
    }

    #[test]
    fn families_never_mix() {
        assert!(!cidr("::/0").contains(ip("10.0.0.1")));
        assert!(!cidr("0.0.0.0/0").contains(ip("2001:db8::1")));
        // A mapped address is IPv4, so it is not inside an IPv6 network either.
        assert!(!cidr("::/0").contains(ip("::ffff:10.0.0.1")));
    }

    #[test]
    fn mapped_addresses_count_as_ipv4() {
        assert!(cidr("10.0.0.0/8").contains(ip("::ffff:10.1.2.3")));
        assert!(!cidr("10.0.0.0/8").contains(ip("::ffff:11.1.2.3")));
        assert_eq!(cidr("::ffff:10.0.0.0/104"), cidr("10.0.0.0/8"));
        assert_eq!(cidr("::ffff:10.0.0.1"), cidr("10.0.0.1/32"));
        // Wider than the mapped range: stays an IPv6 network.
        assert_eq!(cidr("::ffff:10.0.0.0/80").to_string(), "::/80");
    }

    #[test]
    fn new_rejects_long_prefixes() {
        assert!(Cidr::new(ip("10.0.0.0"), 32).is_ok());
        let err = Cidr::new(ip("10.0.0.0"), 33).unwrap_err();
        assert!(err.is_invalid_prefix());
        assert_eq!(err.input(), "10.0.0.0/33");
        assert!(Cidr::new(ip("::"), 128).is_ok());
        assert!(Cidr::new(ip("::"), 129).unwrap_err().is_invalid_prefix());
    }

    #[test]
    fn errors_name_the_input() {
        let cases = [
            ("", true),
            ("garbage", true),
            ("10.0.0/8", true),
            ("10.0.0.256/8", true),
            ("fe80::1%eth0/64", true),
            (" 10.0.0.0/8", true),
            ("/8", true),
            ("10.0.0.0/", false),
            ("10.0.0.0/33", false),
            ("10.0.0.0/255", false),
            ("10.0.0.0/256", false),
            ("10.0.0.0/0008", false),
            ("10.0.0.0/+8", false),
            ("10.0.0.0/-1", false),
            ("10.0.0.0/8/8", false),
            ("10.0.0.0/8 ", false),
            ("2001:db8::/129", false),
        ];
        for (input, bad_address) in cases {
            let err = input.parse::<Cidr>().unwrap_err();
            assert_eq!(err.input(), input);
            assert_eq!(err.is_invalid_address(), bad_address, "{input:?}");
            assert_eq!(err.is_invalid_prefix(), !bad_address, "{input:?}");
            assert!(err.to_string().contains(&format!("{input:?}")), "{err}");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "10.0.0.0/8",
            "192.0.2.1/32",
            "2001:db8::/32",
            "::1/128",
            "::/0",
        ] {
            assert_eq!(cidr(text).to_string().parse::<Cidr>().unwrap(), cidr(text));
        }
    }
}
