//! Which addresses count as one caller: IPv4 by address (or by block), IPv6 by /64.

use std::fmt;
use std::net::IpAddr;

use crate::client_ip::{BlockKey, Cidr, canonical_ip};

/// Groups client addresses into the blocks a rate limit counts.
///
/// One IPv4 address is usually one caller (or one NAT full of them); `/24` is the usual "IP block"
/// when a whole subnet should share a limit. IPv6 is different: one home connection or one cloud
/// VM is handed a whole `/64` (often a `/56` or `/48`), and picks fresh addresses inside it at
/// will, so counting single IPv6 addresses counts nothing. The defaults are `/32` for IPv4 and
/// `/64` for IPv6.
///
/// IPv4-mapped IPv6 addresses are grouped as IPv4 (see [`canonical_ip`]).
///
/// # Example
///
/// ```
/// use tollgate_key::client_ip::IpGrouping;
///
/// let grouping = IpGrouping::new(24, 64)?;
/// let a = grouping.key("192.0.2.7".parse()?);
/// let b = grouping.key("::ffff:192.0.2.9".parse()?);
/// assert_eq!(a, b);
/// assert_eq!(grouping.block("2001:db8:1:2:3:4:5:6".parse()?).to_string(), "2001:db8:1:2::/64");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpGrouping {
    ipv4_prefix: u8,
    ipv6_prefix: u8,
}

impl IpGrouping {
    /// The default IPv4 prefix: each address is its own block.
    pub const DEFAULT_IPV4_PREFIX: u8 = 32;

    /// The default IPv6 prefix: one `/64`, the smallest network a site is normally given.
    pub const DEFAULT_IPV6_PREFIX: u8 = 64;

    /// Groups IPv4 addresses by `ipv4_prefix` bits and IPv6 addresses by `ipv6_prefix` bits.
    ///
    /// # Errors
    ///
    /// A [`GroupingError`] unless `1 <= ipv4_prefix <= 32` and `1 <= ipv6_prefix <= 128`. A `/0`
    /// block is the whole internet: a limit meant for everyone at once is a global key, not an
    /// address grouping.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate_key::client_ip::IpGrouping;
    ///
    /// assert!(IpGrouping::new(24, 56).is_ok());
    /// let err = IpGrouping::new(33, 64).unwrap_err();
    /// assert_eq!(err.to_string(), "IPv4 grouping prefix /33 is outside 1..=32");
    /// ```
    pub fn new(ipv4_prefix: u8, ipv6_prefix: u8) -> Result<Self, GroupingError> {
        if !(1..=32).contains(&ipv4_prefix) {
            return Err(GroupingError {
                ipv6: false,
                prefix: ipv4_prefix,
            });
        }
        if !(1..=128).contains(&ipv6_prefix) {
            return Err(GroupingError {
                ipv6: true,
                prefix: ipv6_prefix,
            });
        }
        Ok(Self {
            ipv4_prefix,
            ipv6_prefix,
        })
    }

    /// The same grouping with IPv4 addresses grouped by `prefix` bits.
    ///
    /// # Errors
    ///
    /// A [`GroupingError`] unless `1 <= prefix <= 32`.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate_key::client_ip::IpGrouping;
    ///
    /// let grouping = IpGrouping::default().with_ipv4_prefix(24)?;
    /// assert_eq!((grouping.ipv4_prefix(), grouping.ipv6_prefix()), (24, 64));
    /// # Ok::<(), tollgate_key::client_ip::GroupingError>(())
    /// ```
    pub fn with_ipv4_prefix(self, prefix: u8) -> Result<Self, GroupingError> {
        Self::new(prefix, self.ipv6_prefix)
    }

    /// The same grouping with IPv6 addresses grouped by `prefix` bits.
    ///
    /// # Errors
    ///
    /// A [`GroupingError`] unless `1 <= prefix <= 128`.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate_key::client_ip::IpGrouping;
    ///
    /// let grouping = IpGrouping::default().with_ipv6_prefix(56)?;
    /// assert_eq!(grouping.ipv6_prefix(), 56);
    /// assert!(IpGrouping::default().with_ipv6_prefix(129).is_err());
    /// # Ok::<(), tollgate_key::client_ip::GroupingError>(())
    /// ```
    pub fn with_ipv6_prefix(self, prefix: u8) -> Result<Self, GroupingError> {
        Self::new(self.ipv4_prefix, prefix)
    }

    /// How many leading bits of an IPv4 address name its block.
    #[must_use]
    pub fn ipv4_prefix(&self) -> u8 {
        self.ipv4_prefix
    }

    /// How many leading bits of an IPv6 address name its block.
    #[must_use]
    pub fn ipv6_prefix(&self) -> u8 {
        self.ipv6_prefix
    }

    /// The block `ip` belongs to, after [`canonical_ip`].
    #[must_use]
    pub fn block(&self, ip: IpAddr) -> Cidr {
        let ip = canonical_ip(ip);
        let prefix = match ip {
            IpAddr::V4(_) => self.ipv4_prefix,
            IpAddr::V6(_) => self.ipv6_prefix,
        };
        Cidr::masked(ip, prefix)
    }

    /// The compact, allocation-free key of the block `ip` belongs to; see [`BlockKey`].
    #[must_use]
    pub fn key(&self, ip: IpAddr) -> BlockKey {
        BlockKey::from(self.block(ip))
    }
}

impl Default for IpGrouping {
    /// `/32` for IPv4, `/64` for IPv6.
    fn default() -> Self {
        Self {
            ipv4_prefix: Self::DEFAULT_IPV4_PREFIX,
            ipv6_prefix: Self::DEFAULT_IPV6_PREFIX,
        }
    }
}

/// An [`IpGrouping`] prefix length outside its family's range.
///
/// # Example
///
/// ```
/// use tollgate_key::client_ip::IpGrouping;
///
/// let err = IpGrouping::new(24, 0).unwrap_err();
/// assert!(err.is_ipv6());
/// assert_eq!(err.prefix(), 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupingError {
    ipv6: bool,
    prefix: u8,
}

impl GroupingError {
    /// The rejected prefix length.
    #[must_use]
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The rejected prefix was for IPv4 addresses.
    #[must_use]
    pub fn is_ipv4(&self) -> bool {
        !self.ipv6
    }

    /// The rejected prefix was for IPv6 addresses.
    #[must_use]
    pub fn is_ipv6(&self) -> bool {
        self.ipv6
    }
}

impl fmt::Display for GroupingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (family, max) = if self.ipv6 {
            ("IPv6", 128)
        } else {
            ("IPv4", 32)
        };
        write!(
            f,
            "{family} grouping prefix /{} is outside 1..={max}",
            self.prefix
        )
    }
}

impl std::error::Error for GroupingError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn defaults_are_address_and_slash_64() {
        let grouping = IpGrouping::default();
        assert_eq!(grouping.block(ip("192.0.2.7")).to_string(), "192.0.2.7/32");
        assert_ne!(grouping.key(ip("192.0.2.7")), grouping.key(ip("192.0.2.9")));
        assert_eq!(
            grouping.block(ip("2001:db8:1:2:aaaa::1")).to_string(),
            "2001:db8:1:2::/64"
        );
        assert_eq!(
            grouping.key(ip("2001:db8:1:2:aaaa::1")),
            grouping.key(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"))
        );
        assert_ne!(
            grouping.key(ip("2001:db8:1:2::1")),
            grouping.key(ip("2001:db8:1:3::1"))
        );
    }

    #[test]
    fn slash_24_groups_a_block() {
        let grouping = IpGrouping::new(24, 64).unwrap();
        assert_eq!(grouping.block(ip("192.0.2.7")).to_string(), "192.0.2.0/24");
        let a = grouping.key(ip("192.0.2.7"));
        assert_eq!(a.as_bytes(), grouping.key(ip("192.0.2.9")).as_bytes());
        assert_ne!(a, grouping.key(ip("192.0.3.7")));
    }

    #[test]
    fn mapped_addresses_group_as_ipv4() {
        let grouping = IpGrouping::new(24, 64).unwrap();
        assert_eq!(
            grouping.block(ip("::ffff:192.0.2.7")).to_string(),
            "192.0.2.0/24"
        );
        assert_eq!(
            grouping.key(ip("::ffff:192.0.2.7")),
            grouping.key(ip("192.0.2.200"))
        );
    }

    #[test]
    fn prefix_ranges_are_validated() {
        assert!(IpGrouping::new(1, 1).is_ok());
        assert!(IpGrouping::new(32, 128).is_ok());
        let err = IpGrouping::new(0, 64).unwrap_err();
        assert!(err.is_ipv4() && err.prefix() == 0);
        let err = IpGrouping::new(33, 64).unwrap_err();
        assert!(err.is_ipv4() && err.prefix() == 33);
        let err = IpGrouping::new(24, 129).unwrap_err();
        assert!(err.is_ipv6() && err.prefix() == 129);
        assert!(IpGrouping::default().with_ipv4_prefix(255).is_err());
        assert_eq!(
            IpGrouping::default().with_ipv6_prefix(48).unwrap(),
            IpGrouping::new(32, 48).unwrap()
        );
        assert_eq!(
            err.to_string(),
            "IPv6 grouping prefix /129 is outside 1..=128"
        );
    }
}
