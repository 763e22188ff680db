//! The `X-Real-IP` header: one address, set (never appended) by the proxy in front.

use std::net::IpAddr;

use http::HeaderValue;

use crate::client_ip::x_forwarded_for;

/// The one address the header lines hold, in any of the forms an `X-Forwarded-For` entry may
/// take; `None` when there is not exactly one line holding exactly one address (a list, garbage,
/// a repeated header: a proxy that sets the header replaces it, so two values mean someone else
/// wrote one).
pub(crate) fn client<'a>(mut lines: impl Iterator<Item = &'a HeaderValue>) -> Option<IpAddr> {
    let line = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    x_forwarded_for::parse(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(lines: &[&[u8]]) -> Option<String> {
        let values: Vec<HeaderValue> = lines
            .iter()
            .map(|line| HeaderValue::from_bytes(line).expect("a header value"))
            .collect();
        client(values.iter()).map(|ip| ip.to_string())
    }

    #[test]
    fn one_address_in_any_entry_form() {
        assert_eq!(read(&[b"203.0.113.9"]).as_deref(), Some("203.0.113.9"));
        assert_eq!(
            read(&[b" 203.0.113.9:4711 "]).as_deref(),
            Some("203.0.113.9")
        );
        assert_eq!(
            read(&[b"[2001:db8::1]:443"]).as_deref(),
            Some("2001:db8::1")
        );
        assert_eq!(read(&[b"2001:db8::1"]).as_deref(), Some("2001:db8::1"));
    }

    #[test]
    fn anything_but_one_address_is_not_believed() {
        assert_eq!(read(&[]), None);
        assert_eq!(read(&[b"203.0.113.9", b"198.51.100.4"]), None);
        assert_eq!(read(&[b"203.0.113.9, 198.51.100.4"]), None);
        assert_eq!(read(&[b"unknown"]), None);
        assert_eq!(read(&[b""]), None);
        assert_eq!(read(&[b"203.0.113.9\xff"]), None);
    }
}
