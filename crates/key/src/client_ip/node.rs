//! The address text of one hop: an IPv4 address or a bracketed IPv6 address, with an optional
//! port, as both proxy headers write it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One hop's address with the port text that followed it, if any (not yet validated: the two
/// headers allow different port syntaxes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Node<'a> {
    pub(crate) ip: IpAddr,
    pub(crate) port: Option<&'a str>,
}

/// Reads `a.b.c.d`, `a.b.c.d:port`, `[v6]` or `[v6]:port`. A bare IPv6 address is not a node
/// (its last group would be indistinguishable from a port), nor is a bracketed IPv4 address or
/// an IPv6 address with a zone (`[fe80::1%eth0]`): a zone names an interface of the machine that
/// wrote it, not a host anyone can count.
pub(crate) fn parse(text: &str) -> Option<Node<'_>> {
    if let Some(bracketed) = text.strip_prefix('[') {
        let (inside, after) = bracketed.split_once(']')?;
        let ip = IpAddr::V6(inside.parse::<Ipv6Addr>().ok()?);
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?),
        };
        return Some(Node { ip, port });
    }
    let (host, port) = match text.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (text, None),
    };
    let ip = IpAddr::V4(host.parse::<Ipv4Addr>().ok()?);
    Some(Node { ip, port })
}

/// A decimal TCP/UDP port: 1 to 5 ASCII digits, at most 65535.
pub(crate) fn is_port(text: &str) -> bool {
    (1..=5).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_digit())
        && text.parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(text: &str) -> Option<(String, Option<&str>)> {
        parse(text).map(|n| (n.ip.to_string(), n.port))
    }

    #[test]
    fn reads_the_four_forms() {
        assert_eq!(node("192.0.2.1"), Some(("192.0.2.1".into(), None)));
        assert_eq!(node("192.0.2.1:80"), Some(("192.0.2.1".into(), Some("80"))));
        assert_eq!(node("[2001:db8::1]"), Some(("2001:db8::1".into(), None)));
        assert_eq!(
            node("[2001:db8::1]:443"),
            Some(("2001:db8::1".into(), Some("443")))
        );
    }

    #[test]
    fn rejects_everything_else() {
        for text in [
            "",
            "2001:db8::1",
            "[1.2.3.4]",
            "[2001:db8::1",
            "[2001:db8::1]443",
            "[2001:db8::1]]",
            "[fe80::1%eth0]",
            "[fe80::1%25eth0]",
            "fe80::1%eth0",
            "unknown",
            "_hidden",
            "1.2.3",
            "01.2.3.4",
            " 1.2.3.4",
            "[]",
            "[",
        ] {
            assert_eq!(node(text), None, "{text:?}");
        }
    }

    #[test]
    fn ports() {
        for good in ["0", "80", "65535", "00443"] {
            assert!(is_port(good), "{good}");
        }
        for bad in ["", "65536", "123456", "+80", "8 0", "_x", "-1"] {
            assert!(!is_port(bad), "{bad}");
        }
    }
}
