//! Asking Envoy's admin interface: one HTTP/1.1 `GET` over a std socket, with deadlines.
//!
//! The harness needs no HTTP client crate: the admin answers a few plain-text pages (`/ready`,
//! `/listeners`, `/stats`), each read to the end of a `Connection: close` answer.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::HarnessError;

/// How long one admin request may take to connect, and then to answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// An admin page: the answer's status and body.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) status: u16,
    pub(crate) body: String,
}

/// `GET path` on the admin at `admin`.
pub(crate) fn get(admin: SocketAddr, path: &str) -> Result<Page, HarnessError> {
    let failed = |error: std::io::Error| {
        let message = format!("GET http://{admin}{path} failed: {error}");
        if matches!(
            error.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        ) {
            HarnessError::timeout(message)
        } else {
            HarnessError::admin(message)
        }
    };
    let mut stream = TcpStream::connect_timeout(&admin, CONNECT_TIMEOUT).map_err(failed)?;
    stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(failed)?;
    stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(failed)?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(failed)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(failed)?;
    parse(&answer).ok_or_else(|| {
        HarnessError::admin(format!(
            "GET http://{admin}{path}: not an HTTP answer: {:?}",
            String::from_utf8_lossy(&answer)
        ))
    })
}

/// An HTTP/1.1 answer read to its end: status line, headers, a body whole or chunked.
fn parse(answer: &[u8]) -> Option<Page> {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let chunked = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding")
                && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_owned()
    };
    Some(Page { status, body })
}

/// A chunked body's data: `SIZE\r\nDATA\r\n` until a chunk of size 0.
fn dechunk(mut rest: &str) -> Option<String> {
    let mut body = String::new();
    loop {
        let (size_line, after) = rest.split_once("\r\n")?;
        let size_hex = size_line.split(';').next()?.trim();
        let size = usize::from_str_radix(size_hex, 16).ok()?;
        if size == 0 {
            return Some(body);
        }
        body.push_str(after.get(..size)?);
        rest = after.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// `/stats` as name → value: every counter and gauge (`name: 12`); histograms (`name: P0(...)`,
/// `No recorded values`) are left out.
pub(crate) fn parse_stats(body: &str) -> BTreeMap<String, u64> {
    body.lines()
        .filter_map(|line| {
            let (name, value) = line.rsplit_once(": ")?;
            Some((name.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

/// The address `/listeners` gives for the listener `name` (lines `name::127.0.0.1:PORT`).
pub(crate) fn listener_address(body: &str, name: &str) -> Option<SocketAddr> {
    body.lines().find_map(|line| {
        let (listener, address) = line.split_once("::")?;
        (listener == name).then(|| address.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_answer_is_put_back_together() {
        let answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n\
                       5\r\nLIVE\n\r\n3\r\nabc\r\n0\r\n\r\n";
        let page = parse(answer).unwrap();
        assert_eq!(page.status, 200);
        assert_eq!(page.body, "LIVE\nabc");
    }

    #[test]
    fn a_whole_answer_is_read_as_is() {
        let page = parse(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 17\r\n\r\nPRE_INITIALIZING\n",
        )
        .unwrap();
        assert_eq!(page.status, 503);
        assert_eq!(page.body, "PRE_INITIALIZING\n");
    }

    #[test]
    fn stats_keep_counters_and_gauges() {
        let stats = parse_stats(
            "cluster.upstream.ratelimit.error: 1\n\
             server.live: 1\n\
             cluster.upstream.upstream_cx_length_ms: No recorded values\n\
             http.ingress.downstream_rq_time: P0(nan,1) P25(nan,1.025)\n",
        );
        assert_eq!(stats.len(), 2);
        assert_eq!(stats["cluster.upstream.ratelimit.error"], 1);
    }

    #[test]
    fn a_listener_is_found_by_name() {
        let body = "admin::127.0.0.1:1\ningress::127.0.0.1:35071\n";
        assert_eq!(
            listener_address(body, "ingress"),
            Some("127.0.0.1:35071".parse().unwrap())
        );
        assert_eq!(listener_address(body, "egress"), None);
    }
}
