//! A network as a few bytes: what a rate-limit key stores for "this caller's address block".

use std::fmt;
use std::net::IpAddr;

use crate::client_ip::Cidr;

const IPV4_TAG: u8 = 4;
const IPV6_TAG: u8 = 6;

/// A [`Cidr`] encoded as bytes for a rate-limit key, without allocating: a family tag (`4` or
/// `6`), the prefix length, then the masked address (4 or 16 bytes).
///
/// Two addresses in the same block give identical bytes; an IPv4 block and an IPv6 block never
/// do (the tag and the length differ), and neither do two blocks of different prefix lengths.
/// Usually obtained from [`IpGrouping::key`](crate::client_ip::IpGrouping::key).
///
/// # Example
///
/// ```
/// use tollgate_key::client_ip::{BlockKey, Cidr};
///
/// let key = BlockKey::from("192.0.2.0/24".parse::<Cidr>()?);
/// assert_eq!(key.as_bytes(), [4, 24, 192, 0, 2, 0]);
/// assert_eq!(BlockKey::from("2001:db8::/32".parse::<Cidr>()?).as_bytes().len(), 18);
/// # Ok::<(), tollgate_key::client_ip::CidrError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockKey {
    bytes: [u8; BlockKey::MAX_LEN],
    len: u8,
}

impl BlockKey {
    /// The longest encoding, an IPv6 block's: tag, prefix and 16 address bytes.
    pub const MAX_LEN: usize = 18;

    /// The encoded block: 6 bytes for IPv4, 18 for IPv6.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes
            .get(..usize::from(self.len))
            .unwrap_or(&self.bytes)
    }
}

impl From<Cidr> for BlockKey {
    fn from(block: Cidr) -> Self {
        let mut bytes = [0_u8; Self::MAX_LEN];
        let (tag, address): (u8, &[u8]) = match block.addr() {
            IpAddr::V4(v4) => (IPV4_TAG, &v4.octets()),
            IpAddr::V6(v6) => (IPV6_TAG, &v6.octets()),
        };
        bytes[0] = tag;
        bytes[1] = block.prefix();
        bytes[2..2 + address.len()].copy_from_slice(address);
        // At most 2 + 16 = 18, which fits in a u8.
        let len = (2 + address.len()) as u8;
        Self { bytes, len }
    }
}

impl fmt::Debug for BlockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BlockKey").field(&self.as_bytes()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> BlockKey {
        BlockKey::from(text.parse::<Cidr>().unwrap())
    }

    #[test]
    fn layout() {
        assert_eq!(key("10.1.2.3/32").as_bytes(), [4, 32, 10, 1, 2, 3]);
        let mut v6 = vec![6, 64, 0x20, 0x01, 0x0d, 0xb8];
        v6.extend([0; 12]);
        assert_eq!(key("2001:db8::/64").as_bytes(), v6);
    }

    #[test]
    fn families_and_prefixes_never_collide() {
        // 0.0.0.0/0 and ::/0 share every byte but the tag.
        assert_ne!(key("0.0.0.0/0"), key("::/0"));
        assert_ne!(key("0.0.0.0/0").as_bytes(), key("::/0").as_bytes());
        assert_ne!(key("10.0.0.0/8"), key("10.0.0.0/9"));
        assert_ne!(key("::a00:0/104"), key("10.0.0.0/8"));
    }

    #[test]
    fn debug_shows_only_the_used_bytes() {
        assert_eq!(
            format!("{:?}", key("10.0.0.0/8")),
            "BlockKey([4, 8, 10, 0, 0, 0])"
        );
    }
}
