//! The `X-Forwarded-For` list: addresses separated by commas, each proxy appending the address
//! it received the request from.

use std::net::{IpAddr, Ipv6Addr};

use crate::client_ip::node;
use crate::client_ip::walk::Entry;

/// The entries of one `X-Forwarded-For` field line, left to right.
///
/// Each entry may be `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`, `[2001:db8::1]` or
/// `[2001:db8::1]:443`, with optional spaces or tabs around it. Anything else, including an empty
/// entry, is [`Entry::Unparseable`].
pub(crate) fn entries(line: &[u8]) -> impl Iterator<Item = Entry> + '_ {
    line.split(|&b| b == b',').map(entry)
}

fn entry(raw: &[u8]) -> Entry {
    match parse(raw) {
        Some(ip) => Entry::Addr(ip),
        None => Entry::Unparseable,
    }
}

/// One entry's address: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`, `[2001:db8::1]` or
/// `[2001:db8::1]:443`, with optional spaces or tabs around it.
pub(crate) fn parse(raw: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(raw).ok()?.trim_matches([' ', '\t']);
    // Unbracketed IPv6 is common here (and unambiguous: no port can follow it).
    if let Ok(v6) = text.parse::<Ipv6Addr>() {
        return Some(IpAddr::V6(v6));
    }
    let node = node::parse(text)?;
    match node.port {
        Some(port) if !node::is_port(port) => None,
        _ => Some(node.ip),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &[u8]) -> Vec<Option<String>> {
        crate::client_ip::walk::describe(entries(line))
    }

    fn one(text: &str) -> Option<String> {
        let mut all = read(text.as_bytes());
        assert_eq!(all.len(), 1, "{text:?}");
        all.pop().flatten()
    }

    #[test]
    fn accepted_forms() {
        assert_eq!(one("1.2.3.4").as_deref(), Some("1.2.3.4"));
        assert_eq!(one("1.2.3.4:5678").as_deref(), Some("1.2.3.4"));
        assert_eq!(one("2001:db8::1").as_deref(), Some("2001:db8::1"));
        assert_eq!(one("[2001:db8::1]").as_deref(), Some("2001:db8::1"));
        assert_eq!(one("[2001:db8::1]:443").as_deref(), Some("2001:db8::1"));
        assert_eq!(one(" \t1.2.3.4 ").as_deref(), Some("1.2.3.4"));
        assert_eq!(one("::ffff:1.2.3.4").as_deref(), Some("::ffff:1.2.3.4"));
    }

    #[test]
    fn list_order_and_whitespace() {
        let got = read(b"203.0.113.5,  198.51.100.1 ,2001:db8::1");
        let want = ["203.0.113.5", "198.51.100.1", "2001:db8::1"];
        assert_eq!(got, want.map(|s| Some(s.to_owned())));
    }

    #[test]
    fn rejected_forms() {
        for text in [
            "",
            " ",
            "unknown",
            "_hidden",
            "garbage",
            "1.2.3.4:",
            "1.2.3.4:99999",
            "1.2.3.4:http",
            "fe80::1%eth0",
            "[fe80::1%eth0]:80",
            "2001:db8::1:80:90:1:2:3",
            "1.2.3.4 5.6.7.8",
            "\"1.2.3.4\"",
            "for=1.2.3.4",
        ] {
            assert_eq!(one(text), None, "{text:?}");
        }
    }

    #[test]
    fn empty_entries_are_kept_as_unparseable() {
        assert_eq!(read(b"1.2.3.4,,5.6.7.8").len(), 3);
        assert_eq!(read(b"1.2.3.4,")[1], None);
    }

    #[test]
    fn non_utf8_spoils_only_its_entry() {
        let got = read(b"1.2.3.4\xff, 5.6.7.8");
        assert_eq!(got, [None, Some("5.6.7.8".to_owned())]);
    }
}
