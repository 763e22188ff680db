//! The rule that picks the client out of a forwarding chain: walk right to left, past trusted
//! proxies, and stop at the first entry that is not one.

use std::net::IpAddr;

use crate::client_ip::{Cidr, canonical_ip};

/// One entry of a forwarding chain, as a header parser read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// The entry names this address.
    Addr(IpAddr),
    /// The entry is there but names no address anyone can count: garbage, `unknown`, an
    /// obfuscated identifier, a zone, invalid bytes, nothing at all.
    Unparseable,
}

/// Decides the right-to-left walk while the entries arrive left to right.
///
/// The header parsers read left to right (a `Forwarded` quoted string can only be delimited that
/// way), and collecting the entries to reverse them would allocate per request. The walk's
/// answer depends only on the rightmost *stop* (an untrusted address or an unparseable entry),
/// its distance from the right end, and the leftmost entry, so those three are all this keeps.
pub(crate) struct Walk<'a> {
    proxies: &'a [Cidr],
    len: usize,
    leftmost: Option<IpAddr>,
    /// The rightmost entry that ends the walk, and its index from the left.
    stop: Option<(usize, Entry)>,
}

impl<'a> Walk<'a> {
    pub(crate) fn new(proxies: &'a [Cidr]) -> Self {
        Self {
            proxies,
            len: 0,
            leftmost: None,
            stop: None,
        }
    }

    /// Takes the next entry to the right.
    pub(crate) fn push(&mut self, entry: Entry) {
        let entry = match entry {
            Entry::Addr(ip) => Entry::Addr(canonical_ip(ip)),
            Entry::Unparseable => Entry::Unparseable,
        };
        if self.len == 0
            && let Entry::Addr(ip) = entry
        {
            self.leftmost = Some(ip);
        }
        let trusted = match entry {
            Entry::Addr(ip) => self.proxies.iter().any(|proxy| proxy.contains(ip)),
            Entry::Unparseable => false,
        };
        if !trusted {
            self.stop = Some((self.len, entry));
        }
        self.len = self.len.saturating_add(1);
    }

    /// The client address, looking at no more than `max_entries` entries from the right;
    /// `peer` (the trusted proxy that sent the request) when the chain cannot say.
    pub(crate) fn finish(self, peer: IpAddr, max_entries: usize) -> IpAddr {
        match self.stop {
            // Everything right of the stop is a trusted proxy; the stop is the client if the
            // walk reaches it within its budget and it is an address.
            Some((index, entry)) => match entry {
                Entry::Addr(client) if self.len.saturating_sub(index) <= max_entries => client,
                _ => peer,
            },
            // Every entry is a trusted proxy: the request started inside the trusted network,
            // and the leftmost hop is where it started.
            None if self.len <= max_entries => self.leftmost.unwrap_or(peer),
            None => peer,
        }
    }
}

/// Each entry as its address in text, or `None` when unparseable (for the parsers' tests).
#[cfg(test)]
pub(crate) fn describe(entries: impl Iterator<Item = Entry>) -> Vec<Option<String>> {
    entries
        .map(|entry| match entry {
            Entry::Addr(ip) => Some(ip.to_string()),
            Entry::Unparseable => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: &str = "10.0.0.1";

    fn walk(entries: &[&str], max_entries: usize) -> String {
        let proxies: Vec<Cidr> = ["10.0.0.0/8", "2001:db8:ffff::/48"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect();
        let mut walk = Walk::new(&proxies);
        for entry in entries {
            walk.push(match entry.parse() {
                Ok(ip) => Entry::Addr(ip),
                Err(_) => Entry::Unparseable,
            });
        }
        walk.finish(PEER.parse().unwrap(), max_entries).to_string()
    }

    #[test]
    fn empty_chain_is_the_peer() {
        assert_eq!(walk(&[], 32), PEER);
    }

    #[test]
    fn first_untrusted_from_the_right() {
        let chain = ["198.51.100.1", "203.0.113.5", "10.1.1.1", "10.2.2.2"];
        assert_eq!(walk(&chain, 32), "203.0.113.5");
        assert_eq!(walk(&["203.0.113.5"], 32), "203.0.113.5");
    }

    #[test]
    fn unparseable_before_a_client_is_the_peer() {
        assert_eq!(walk(&["203.0.113.5", "garbage", "10.1.1.1"], 32), PEER);
        assert_eq!(walk(&["garbage"], 32), PEER);
        // Garbage left of the client is never reached.
        assert_eq!(
            walk(&["garbage", "203.0.113.5", "10.1.1.1"], 32),
            "203.0.113.5"
        );
    }

    #[test]
    fn all_trusted_is_the_leftmost() {
        assert_eq!(walk(&["10.9.9.9", "10.1.1.1", "10.2.2.2"], 32), "10.9.9.9");
    }

    #[test]
    fn entry_limit() {
        let chain = ["203.0.113.5", "10.1.1.1", "10.2.2.2"];
        assert_eq!(walk(&chain, 3), "203.0.113.5");
        assert_eq!(walk(&chain, 2), PEER);
        assert_eq!(walk(&chain, 0), PEER);
        assert_eq!(walk(&["10.9.9.9", "10.1.1.1"], 2), "10.9.9.9");
        assert_eq!(walk(&["10.9.9.9", "10.1.1.1"], 1), PEER);
    }

    #[test]
    fn entries_are_canonicalised() {
        // A mapped proxy is trusted, and a mapped client comes back as IPv4.
        assert_eq!(
            walk(&["::ffff:203.0.113.5", "::ffff:10.1.1.1"], 32),
            "203.0.113.5"
        );
        assert_eq!(
            walk(&["2001:db8::5", "2001:db8:ffff::1"], 32),
            "2001:db8::5"
        );
    }
}
