//! The `Forwarded` header (RFC 7239): elements separated by commas, each a list of `name=value`
//! pairs separated by semicolons, where the `for` pair names the hop the proxy heard from.
//!
//! ```text
//! Forwarded: for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"
//! ```

use std::net::IpAddr;

use crate::client_ip::node;
use crate::client_ip::walk::Entry;

/// The longest `for` value that can be a node: `[` + the longest IPv6 text (45 bytes) + `]:` +
/// a port, with room to spare. Longer values are not addresses, and the cap keeps unescaping on
/// the stack.
const MAX_NODE_LEN: usize = 64;

/// The elements of one `Forwarded` field line, left to right, each read as its `for` address.
///
/// Parameter names are case-insensitive; values are tokens or quoted strings (with `\` escapes,
/// and commas or semicolons inside the quotes). An element is [`Entry::Unparseable`] when it has
/// no `for` pair, more than one, or a `for` value that is not an IPv4 address or a bracketed IPv6
/// address with an optional port (`unknown`, an obfuscated `_identifier`, a zone...).
///
/// Where the line breaks the grammar (an unterminated quote, a stray character), the elements
/// read so far stand, the broken one is [`Entry::Unparseable`], and nothing after it is read:
/// which later commas separate elements can no longer be known.
pub(crate) fn entries(line: &[u8]) -> Elements<'_> {
    Elements { rest: Some(line) }
}

/// The iterator returned by [`entries`].
pub(crate) struct Elements<'a> {
    /// What is left after the last element's comma; `None` once the line is done.
    rest: Option<&'a [u8]>,
}

impl Iterator for Elements<'_> {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        let line = self.rest.take()?;
        let mut cursor = Cursor {
            bytes: line,
            pos: 0,
        };
        match cursor.element() {
            Ok(entry) => {
                if cursor.eat(b',') {
                    self.rest = Some(cursor.rest());
                }
                Some(entry)
            }
            Err(Malformed) => Some(Entry::Unparseable),
        }
    }
}

/// The line breaks the `Forwarded` grammar at this point.
struct Malformed;

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn rest(&self) -> &'a [u8] {
        self.bytes.get(self.pos..).unwrap_or_default()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        if found {
            self.pos += 1;
        }
        found
    }

    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// One element up to (not including) its comma or the end of the line.
    fn element(&mut self) -> Result<Entry, Malformed> {
        let mut for_value: Option<Value<'a>> = None;
        let mut for_count = 0_usize;
        loop {
            self.skip_ows();
            match self.peek() {
                None | Some(b',') => break,
                Some(b';') => {
                    self.pos += 1;
                    continue;
                }
                Some(_) => {}
            }
            let name = self.token()?;
            if !self.eat(b'=') {
                return Err(Malformed);
            }
            let value = self.value()?;
            if name.eq_ignore_ascii_case(b"for") {
                for_count += 1;
                for_value = Some(value);
            }
            self.skip_ows();
            match self.peek() {
                None | Some(b',') => break,
                Some(b';') => self.pos += 1,
                Some(_) => return Err(Malformed),
            }
        }
        // RFC 7239: a parameter must not occur twice in one element; which one is meant is
        // anyone's guess, so neither is believed.
        let ip = match (for_count, for_value) {
            (1, Some(value)) => value.node_ip(),
            _ => None,
        };
        Ok(ip.map_or(Entry::Unparseable, Entry::Addr))
    }

    fn token(&mut self) -> Result<&'a [u8], Malformed> {
        let start = self.pos;
        while self.peek().is_some_and(is_tchar) {
            self.pos += 1;
        }
        match self.bytes.get(start..self.pos) {
            Some(token) if !token.is_empty() => Ok(token),
            _ => Err(Malformed),
        }
    }

    fn value(&mut self) -> Result<Value<'a>, Malformed> {
        if !self.eat(b'"') {
            return self.token().map(Value::Token);
        }
        let start = self.pos;
        loop {
            match self.peek() {
                // Unterminated: the quote swallowed the rest of the line.
                None => return Err(Malformed),
                Some(b'"') => break,
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(b) if is_quotable(b) => self.pos += 1,
                        _ => return Err(Malformed),
                    }
                }
                Some(b) if is_qdtext(b) => self.pos += 1,
                Some(_) => return Err(Malformed),
            }
        }
        let inside = self.bytes.get(start..self.pos).ok_or(Malformed)?;
        self.pos += 1; // the closing quote
        Ok(Value::Quoted(inside))
    }
}

/// A parameter value as written: a token, or the text between a quoted string's quotes with its
/// escapes still in place.
#[derive(Clone, Copy)]
enum Value<'a> {
    Token(&'a [u8]),
    Quoted(&'a [u8]),
}

impl Value<'_> {
    /// The address of a `for` value, if it is a node with a real address.
    fn node_ip(self) -> Option<IpAddr> {
        let mut buf = [0_u8; MAX_NODE_LEN];
        let text = match self {
            Self::Token(token) => token,
            Self::Quoted(escaped) => unescape(escaped, &mut buf)?,
        };
        let node = node::parse(std::str::from_utf8(text).ok()?)?;
        match node.port {
            Some(port) if !(node::is_port(port) || is_obfport(port)) => None,
            _ => Some(node.ip),
        }
    }
}

/// Copies `escaped` into `buf` with each `\x` turned into `x`; `None` if it does not fit.
fn unescape<'b>(escaped: &[u8], buf: &'b mut [u8; MAX_NODE_LEN]) -> Option<&'b [u8]> {
    let mut len = 0;
    let mut bytes = escaped.iter();
    while let Some(&b) = bytes.next() {
        let b = if b == b'\\' { *bytes.next()? } else { b };
        *buf.get_mut(len)? = b;
        len += 1;
    }
    buf.get(..len)
}

/// RFC 7230 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// RFC 7230 `qdtext`, less the `"` and `\` the caller handles: tab, visible ASCII, obs-text.
fn is_qdtext(b: u8) -> bool {
    b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80
}

/// What may follow a `\` in a quoted string: tab, space, visible ASCII, obs-text.
fn is_quotable(b: u8) -> bool {
    is_qdtext(b) || b == b'"' || b == b'\\'
}

/// RFC 7239 `obfport`: `_` then letters, digits, `.`, `_` or `-`.
fn is_obfport(port: &str) -> bool {
    port.strip_prefix('_').is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &[u8]) -> Vec<Option<String>> {
        crate::client_ip::walk::describe(entries(line))
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_owned())
    }

    #[test]
    fn rfc_7239_examples() {
        assert_eq!(read(br#"for="_gazonk""#), [None]);
        assert_eq!(
            read(br#"For="[2001:db8:cafe::17]:4711""#),
            [some("2001:db8:cafe::17")]
        );
        assert_eq!(
            read(b"for=192.0.2.60;proto=http;by=203.0.113.43"),
            [some("192.0.2.60")]
        );
        assert_eq!(
            read(b"for=192.0.2.43, for=198.51.100.17"),
            [some("192.0.2.43"), some("198.51.100.17")]
        );
        assert_eq!(
            read(br#"for=192.0.2.43, for="[2001:db8:cafe::17]", for=unknown"#),
            [some("192.0.2.43"), some("2001:db8:cafe::17"), None]
        );
    }

    #[test]
    fn node_forms() {
        assert_eq!(read(br#"for="192.0.2.1:8080""#), [some("192.0.2.1")]);
        assert_eq!(read(br#"for="192.0.2.1:_abc-1""#), [some("192.0.2.1")]);
        assert_eq!(read(br#"for="[2001:db8::1]""#), [some("2001:db8::1")]);
        assert_eq!(
            read(br#"for="[::ffff:192.0.2.1]""#),
            [some("::ffff:192.0.2.1")]
        );
        // Not nodes: bare IPv6, zones, bad ports, obfuscated and unknown identifiers.
        for value in [
            r#""2001:db8::1""#,
            r#""[fe80::1%eth0]""#,
            r#""[fe80::1%25eth0]:80""#,
            r#""192.0.2.1:99999""#,
            r#""192.0.2.1:_""#,
            r#""192.0.2.1:""#,
            "_hidden",
            "unknown",
            r#""""#,
            r#""[1.2.3.4]""#,
        ] {
            let line = format!("for={value}");
            assert_eq!(read(line.as_bytes()), [None], "{line}");
        }
    }

    #[test]
    fn names_are_case_insensitive_and_other_pairs_ignored() {
        assert_eq!(
            read(b"proto=https;FOR=192.0.2.1;By=10.0.0.1"),
            [some("192.0.2.1")]
        );
        assert_eq!(read(b"fOr=192.0.2.1"), [some("192.0.2.1")]);
        assert_eq!(read(b"fore=192.0.2.1"), [None]);
    }

    #[test]
    fn quoted_strings_hide_separators_and_unescape() {
        let line = br#"by="a,b;c=d";for="192.0.2.1", for=198.51.100.2"#;
        assert_eq!(read(line), [some("192.0.2.1"), some("198.51.100.2")]);
        assert_eq!(read(br#"for="\192.0.2\.1""#), [some("192.0.2.1")]);
        assert_eq!(read(br#"host="a\"b,c";for=192.0.2.1"#), [some("192.0.2.1")]);
    }

    #[test]
    fn element_without_for_is_unparseable() {
        assert_eq!(
            read(b"proto=https, for=192.0.2.1"),
            [None, some("192.0.2.1")]
        );
        assert_eq!(read(b""), [None]);
        assert_eq!(read(b"for=192.0.2.1,"), [some("192.0.2.1"), None]);
        assert_eq!(read(b" , for=192.0.2.1"), [None, some("192.0.2.1")]);
    }

    #[test]
    fn duplicate_for_is_unparseable() {
        assert_eq!(read(b"for=192.0.2.1;for=198.51.100.2"), [None]);
    }

    #[test]
    fn whitespace_and_empty_pairs_are_tolerated() {
        assert_eq!(
            read(b"  for=192.0.2.1 ; proto=http ;; ,\tfor=10.0.0.1  "),
            [some("192.0.2.1"), some("10.0.0.1")]
        );
    }

    #[test]
    fn grammar_breaks_end_the_line() {
        // Unterminated quote: it swallows what a proxy appended after it.
        assert_eq!(read(br#"for="192.0.2.1, for=198.51.100.2"#), [None]);
        assert_eq!(
            read(br#"for=10.0.0.1, for="192.0.2.1, for=198.51.100.2"#),
            [some("10.0.0.1"), None]
        );
        for line in [
            &b"for=192.0.2.1:80, for=10.0.0.1"[..],
            b"for=[2001:db8::1], for=10.0.0.1",
            b"for 192.0.2.1, for=10.0.0.1",
            b"for=, for=10.0.0.1",
            b"=192.0.2.1, for=10.0.0.1",
            b"for=192.0.2.1 proto=http, for=10.0.0.1",
            b"for=\"192.0.2.1\"x, for=10.0.0.1",
            b"for=\"192.0.2.1\\",
            b"for=\"a\x01b\", for=10.0.0.1",
            b"for=\xff, for=10.0.0.1",
        ] {
            assert_eq!(read(line), [None], "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn non_utf8_inside_quotes_is_unparseable() {
        assert_eq!(
            read(b"for=\"\xff\xfe\", for=10.0.0.1"),
            [None, some("10.0.0.1")]
        );
    }

    #[test]
    fn long_values_are_not_nodes() {
        let line = format!("for=\"{}\", for=10.0.0.1", "1".repeat(10_000));
        assert_eq!(read(line.as_bytes()), [None, some("10.0.0.1")]);
    }
}
