//! Who may say where a request came from: the proxies in front of this service, and the one
//! header they write.

use std::net::IpAddr;

use http::HeaderMap;

use crate::client_ip::walk::Walk;
use crate::client_ip::{Cidr, ProxyHeader, canonical_ip, forwarded, x_forwarded_for, x_real_ip};

/// Finds a request's client address behind a known set of proxies.
///
/// Configured with the one [`ProxyHeader`] the proxies append to and the networks they run in.
/// [`client_ip`](TrustedProxies::client_ip) believes the header only when the TCP peer is one of
/// those proxies, and then walks the header from the right, past further trusted proxies, to the
/// first address that is not one. The [module docs](crate::client_ip) explain why each rule is
/// there.
///
/// The work per request is bounded: at most
/// [`max_header_bytes`](TrustedProxies::max_header_bytes) of header are parsed (a larger header is
/// ignored), and at most [`max_entries`](TrustedProxies::max_entries) entries are walked. Nothing
/// is allocated.
///
/// # Example
///
/// ```
/// use http::HeaderMap;
/// use tollgate_key::client_ip::{ProxyHeader, TrustedProxies};
///
/// let proxies = TrustedProxies::new(ProxyHeader::XForwardedFor)
///     .trust("10.0.0.0/8".parse()?)
///     .trust("2001:db8:ffff::/48".parse()?);
///
/// let mut headers = HeaderMap::new();
/// // The client prepended a fake entry; the load balancer (10.0.0.2) appended the real peer it
/// // saw; the ingress (10.0.0.1) appended the load balancer.
/// headers.insert("x-forwarded-for", "1.1.1.1, 203.0.113.9, 10.0.0.2".parse()?);
///
/// let client = proxies.client_ip("10.0.0.1".parse()?, &headers);
/// assert_eq!(client, "203.0.113.9".parse::<std::net::IpAddr>()?);
///
/// // The same header from a peer that is not a proxy is the client's own invention.
/// let direct = proxies.client_ip("198.51.100.4".parse()?, &headers);
/// assert_eq!(direct, "198.51.100.4".parse::<std::net::IpAddr>()?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedProxies {
    header: ProxyHeader,
    proxies: Vec<Cidr>,
    max_entries: usize,
    max_header_bytes: usize,
}

impl TrustedProxies {
    /// The default for [`with_max_entries`](TrustedProxies::with_max_entries): 32 entries.
    pub const DEFAULT_MAX_ENTRIES: usize = 32;

    /// The default for [`with_max_header_bytes`](TrustedProxies::with_max_header_bytes): 8 KiB.
    pub const DEFAULT_MAX_HEADER_BYTES: usize = 8 * 1024;

    /// Reads `header`, trusting no proxy yet: until [`trust`](TrustedProxies::trust) is called,
    /// every peer is its own client.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate_key::client_ip::{ProxyHeader, TrustedProxies};
    ///
    /// let proxies = TrustedProxies::new(ProxyHeader::Forwarded);
    /// assert!(proxies.proxies().is_empty());
    /// assert_eq!(proxies.max_entries(), TrustedProxies::DEFAULT_MAX_ENTRIES);
    /// ```
    #[must_use]
    pub fn new(header: ProxyHeader) -> Self {
        Self {
            header,
            proxies: Vec::new(),
            max_entries: Self::DEFAULT_MAX_ENTRIES,
            max_header_bytes: Self::DEFAULT_MAX_HEADER_BYTES,
        }
    }

    /// Also trusts the proxies in `network`.
    ///
    /// Trust only addresses of machines you run (or your CDN's published ranges): a trusted peer
    /// decides the client address of every request it sends.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate_key::client_ip::{ProxyHeader, TrustedProxies};
    ///
    /// let proxies = TrustedProxies::new(ProxyHeader::Forwarded).trust("10.0.0.0/8".parse()?);
    /// assert!(proxies.is_trusted("10.1.2.3".parse()?));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn trust(mut self, network: Cidr) -> Self {
        self.proxies.push(network);
        self
    }

    /// Also trusts every network in `networks`; see [`trust`](TrustedProxies::trust).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate_key::client_ip::{Cidr, ProxyHeader, TrustedProxies};
    ///
    /// let networks = ["10.0.0.0/8", "fd00::/8"]
    ///     .iter()
    ///     .map(|text| text.parse::<Cidr>())
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let proxies = TrustedProxies::new(ProxyHeader::XForwardedFor).trust_all(networks);
    /// assert_eq!(proxies.proxies().len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn trust_all(mut self, networks: impl IntoIterator<Item = Cidr>) -> Self {
        self.proxies.extend(networks);
        self
    }

    /// Walks at most `max_entries` header entries from the right (default
    /// [`DEFAULT_MAX_ENTRIES`](TrustedProxies::DEFAULT_MAX_ENTRIES)). A chain whose last
    /// `max_entries` entries are all trusted proxies yields the peer, as if there were no header.
    /// Zero means the header is never believed.
    #[must_use]
    pub fn with_max_entries(mut self, max_entries: usize) -> Self {
        self.max_entries = max_entries;
        self
    }

    /// Ignores the header (the peer is the client) when its lines together, joined by `", "`, are
    /// longer than `max_header_bytes` (default
    /// [`DEFAULT_MAX_HEADER_BYTES`](TrustedProxies::DEFAULT_MAX_HEADER_BYTES)).
    #[must_use]
    pub fn with_max_header_bytes(mut self, max_header_bytes: usize) -> Self {
        self.max_header_bytes = max_header_bytes;
        self
    }

    /// The header this configuration reads.
    #[must_use]
    pub fn header(&self) -> ProxyHeader {
        self.header
    }

    /// The trusted proxy networks, in the order they were added.
    #[must_use]
    pub fn proxies(&self) -> &[Cidr] {
        &self.proxies
    }

    /// How many entries from the right are walked at most.
    #[must_use]
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// How many header bytes are parsed at most.
    #[must_use]
    pub fn max_header_bytes(&self) -> usize {
        self.max_header_bytes
    }

    /// Whether `ip` (after [`canonical_ip`]) is inside a trusted proxy network.
    #[must_use]
    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        self.proxies.iter().any(|network| network.contains(ip))
    }

    /// The client address of a request that arrived from `peer` with `headers`, after
    /// [`canonical_ip`].
    ///
    /// * `peer` is not a trusted proxy: `peer`. Its headers say whatever the client wants.
    /// * Otherwise every line of the configured header, in order, forms one list. Walking it from
    ///   the right, trusted proxies are skipped and the first other address is the client.
    /// * Every entry is a trusted proxy: the leftmost entry.
    /// * With [`ProxyHeader::XRealIp`] there is no walk: the header's one address is the client;
    ///   `peer` when it is sent more than once or does not hold exactly one address.
    /// * `peer` when the header is absent or over the byte budget, when the walk meets an entry
    ///   that is not an address before it finds the client, or when it uses up its entry budget
    ///   still inside trusted proxies.
    ///
    /// Never panics, whatever the headers hold.
    #[must_use]
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = canonical_ip(peer);
        if !self.is_trusted(peer) {
            return peer;
        }
        let lines = headers.get_all(self.header.header_name());
        if !self.within_budget(lines.iter().map(|line| line.len())) {
            return peer;
        }
        if self.header == ProxyHeader::XRealIp {
            if self.max_entries == 0 {
                return peer;
            }
            return x_real_ip::client(lines.iter()).map_or(peer, canonical_ip);
        }
        let mut walk = Walk::new(&self.proxies);
        for line in lines {
            let line = line.as_bytes();
            match self.header {
                ProxyHeader::Forwarded => forwarded::entries(line).for_each(|e| walk.push(e)),
                // (`X-Real-IP` was answered above; it is read as the one-entry list it is.)
                ProxyHeader::XForwardedFor | ProxyHeader::XRealIp => {
                    x_forwarded_for::entries(line).for_each(|e| walk.push(e));
                }
            }
        }
        walk.finish(peer, self.max_entries)
    }

    /// Whether lines of these lengths, joined by `", "`, fit in the byte budget. Stops counting
    /// as soon as they do not, so a flood of lines costs no more than a long one.
    fn within_budget(&self, line_lengths: impl Iterator<Item = usize>) -> bool {
        let mut total = 0_usize;
        for (index, len) in line_lengths.enumerate() {
            let separator = if index == 0 { 0 } else { 2 };
            total = total.saturating_add(len).saturating_add(separator);
            if total > self.max_header_bytes {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    const PROXY: &str = "10.0.0.1";
    const CLIENT: &str = "203.0.113.9";
    const STRANGER: &str = "198.51.100.4";

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn proxies(header: ProxyHeader) -> TrustedProxies {
        TrustedProxies::new(header)
            .trust("10.0.0.0/8".parse().unwrap())
            .trust("2001:db8:ffff::/48".parse().unwrap())
    }

    fn xff() -> TrustedProxies {
        proxies(ProxyHeader::XForwardedFor)
    }

    fn fwd() -> TrustedProxies {
        proxies(ProxyHeader::Forwarded)
    }

    fn headers(lines: &[(&str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in lines {
            let name: http::HeaderName = name.parse().unwrap();
            map.append(name, HeaderValue::from_bytes(value).unwrap());
        }
        map
    }

    fn xff_lines(lines: &[&str]) -> HeaderMap {
        let lines: Vec<_> = lines
            .iter()
            .map(|l| ("x-forwarded-for", l.as_bytes()))
            .collect();
        headers(&lines)
    }

    fn fwd_lines(lines: &[&str]) -> HeaderMap {
        let lines: Vec<_> = lines.iter().map(|l| ("forwarded", l.as_bytes())).collect();
        headers(&lines)
    }

    #[test]
    fn untrusted_peer_is_the_client_whatever_the_headers_say() {
        let forged = xff_lines(&["1.2.3.4"]);
        assert_eq!(xff().client_ip(ip(STRANGER), &forged), ip(STRANGER));
        let forged = fwd_lines(&["for=1.2.3.4"]);
        assert_eq!(fwd().client_ip(ip(STRANGER), &forged), ip(STRANGER));
        // Even a forged entry naming a trusted proxy changes nothing.
        let forged = xff_lines(&["10.9.9.9"]);
        assert_eq!(xff().client_ip(ip(STRANGER), &forged), ip(STRANGER));
    }

    #[test]
    fn x_real_ip_is_believed_only_from_a_trusted_peer_and_only_as_one_address() {
        let real = |lines: &[&str]| {
            let lines: Vec<_> = lines.iter().map(|l| ("x-real-ip", l.as_bytes())).collect();
            headers(&lines)
        };
        let nginx = proxies(ProxyHeader::XRealIp);
        assert_eq!(nginx.client_ip(ip(PROXY), &real(&[CLIENT])), ip(CLIENT));
        assert_eq!(
            nginx.client_ip(ip(STRANGER), &real(&[CLIENT])),
            ip(STRANGER)
        );
        // A list, a second line, or garbage: the peer counts.
        let list = real(&["6.6.6.6, 203.0.113.9"]);
        assert_eq!(nginx.client_ip(ip(PROXY), &list), ip(PROXY));
        let twice = real(&["6.6.6.6", CLIENT]);
        assert_eq!(nginx.client_ip(ip(PROXY), &twice), ip(PROXY));
        assert_eq!(nginx.client_ip(ip(PROXY), &real(&["unknown"])), ip(PROXY));
        // Only the configured header is read.
        assert_eq!(nginx.client_ip(ip(PROXY), &xff_lines(&[CLIENT])), ip(PROXY));
        assert_eq!(xff().client_ip(ip(PROXY), &real(&[CLIENT])), ip(PROXY));
        // Mapped IPv4 comes back as IPv4.
        let mapped = real(&["::ffff:203.0.113.9"]);
        assert_eq!(nginx.client_ip(ip(PROXY), &mapped), ip(CLIENT));
        // No entry budget: never believed.
        let off = nginx.with_max_entries(0);
        assert_eq!(off.client_ip(ip(PROXY), &real(&[CLIENT])), ip(PROXY));
    }

    #[test]
    fn no_trusted_proxies_means_the_peer() {
        let forged = xff_lines(&[CLIENT]);
        let none = TrustedProxies::new(ProxyHeader::XForwardedFor);
        assert_eq!(none.client_ip(ip(PROXY), &forged), ip(PROXY));
    }

    #[test]
    fn trusted_chain_yields_the_client() {
        let chain = xff_lines(&["203.0.113.9, 10.0.0.3, 10.0.0.2"]);
        assert_eq!(xff().client_ip(ip(PROXY), &chain), ip(CLIENT));
        let chain = fwd_lines(&[r#"for=203.0.113.9;proto=https, for=10.0.0.3, For="10.0.0.2:80""#]);
        assert_eq!(fwd().client_ip(ip(PROXY), &chain), ip(CLIENT));
        let chain = fwd_lines(&[r#"for="[2001:db8::9]:1234", for="[2001:db8:ffff::2]""#]);
        assert_eq!(
            fwd().client_ip(ip("2001:db8:ffff::1"), &chain),
            ip("2001:db8::9")
        );
    }

    #[test]
    fn client_prepended_entries_are_not_chosen() {
        let chain = xff_lines(&["6.6.6.6, 7.7.7.7, 203.0.113.9, 10.0.0.2"]);
        assert_eq!(xff().client_ip(ip(PROXY), &chain), ip(CLIENT));
        let chain = fwd_lines(&["for=6.6.6.6, for=203.0.113.9, for=10.0.0.2"]);
        assert_eq!(fwd().client_ip(ip(PROXY), &chain), ip(CLIENT));
        // A client can write a trusted address, but only to the left of its own.
        let chain = xff_lines(&["10.5.5.5, 203.0.113.9, 10.0.0.2"]);
        assert_eq!(xff().client_ip(ip(PROXY), &chain), ip(CLIENT));
    }

    #[test]
    fn all_lines_form_one_list() {
        // The client's own line first, then the line the proxy added.
        let chain = xff_lines(&["6.6.6.6", "203.0.113.9, 10.0.0.2"]);
        assert_eq!(xff().client_ip(ip(PROXY), &chain), ip(CLIENT));
        let chain = xff_lines(&["6.6.6.6, 203.0.113.9", "10.0.0.2", "10.0.0.3"]);
        assert_eq!(xff().client_ip(ip(PROXY), &chain), ip(CLIENT));
        let chain = fwd_lines(&["for=6.6.6.6", "for=203.0.113.9", "for=10.0.0.2"]);
        assert_eq!(fwd().client_ip(ip(PROXY), &chain), ip(CLIENT));
    }

    #[test]
    fn client_garbage_left_of_the_client_is_never_reached() {
        let chain = xff_lines(&["garbage, unknown, _x, 203.0.113.9, 10.0.0.2"]);
        assert_eq!(xff().client_ip(ip(PROXY), &chain), ip(CLIENT));
        // A broken client line does not spoil the proxy's own line.
        let chain = fwd_lines(&[r#"for="unterminated"#, "for=203.0.113.9"]);
        assert_eq!(fwd().client_ip(ip(PROXY), &chain), ip(CLIENT));
    }

    #[test]
    fn all_trusted_yields_the_leftmost() {
        let chain = xff_lines(&["10.7.7.7, 10.0.0.3, 10.0.0.2"]);
        assert_eq!(xff().client_ip(ip(PROXY), &chain), ip("10.7.7.7"));
    }

    #[test]
    fn absent_header_is_the_peer() {
        assert_eq!(xff().client_ip(ip(PROXY), &HeaderMap::new()), ip(PROXY));
        assert_eq!(fwd().client_ip(ip(PROXY), &HeaderMap::new()), ip(PROXY));
    }

    #[test]
    fn only_the_configured_header_is_read() {
        let both = headers(&[
            ("x-forwarded-for", b"1.1.1.1"),
            ("forwarded", b"for=2.2.2.2"),
        ]);
        assert_eq!(xff().client_ip(ip(PROXY), &both), ip("1.1.1.1"));
        assert_eq!(fwd().client_ip(ip(PROXY), &both), ip("2.2.2.2"));

        let only_forwarded = fwd_lines(&["for=2.2.2.2"]);
        assert_eq!(xff().client_ip(ip(PROXY), &only_forwarded), ip(PROXY));
        let only_xff = xff_lines(&["1.1.1.1"]);
        assert_eq!(fwd().client_ip(ip(PROXY), &only_xff), ip(PROXY));
    }

    #[test]
    fn unparseable_before_the_client_is_the_peer() {
        for value in [
            "garbage",
            "unknown",
            "_hidden",
            "fe80::1%eth0",
            "[fe80::1%eth0]:80",
            "",
            " , ",
            "203.0.113.9, ",
            "203.0.113.9,,10.0.0.2",
            "203.0.113.9:99999",
            "203.0.113.9 10.0.0.2",
        ] {
            let chain = xff_lines(&[value]);
            assert_eq!(xff().client_ip(ip(PROXY), &chain), ip(PROXY), "{value:?}");
        }
        for value in [
            "for=unknown",
            "for=_hidden",
            r#"for="[fe80::1%eth0]""#,
            "proto=https",
            "",
            r#"for="203.0.113.9"#,
            r#"for="203.0.113.9, for=10.0.0.2"#,
            "for=203.0.113.9;for=203.0.113.8",
            "for=203.0.113.9:80",
            r#"for="2001:db8::1""#,
            "for=203.0.113.9, for=10.0.0.2, ",
        ] {
            let chain = fwd_lines(&[value]);
            assert_eq!(fwd().client_ip(ip(PROXY), &chain), ip(PROXY), "{value:?}");
        }
    }

    #[test]
    fn ports_and_brackets_are_accepted() {
        for (value, want) in [
            ("203.0.113.9:5678", CLIENT),
            ("2001:db8::9", "2001:db8::9"),
            ("[2001:db8::9]", "2001:db8::9"),
            ("[2001:db8::9]:443", "2001:db8::9"),
        ] {
            let chain = xff_lines(&[&format!("{value}, 10.0.0.2")]);
            assert_eq!(xff().client_ip(ip(PROXY), &chain), ip(want), "{value:?}");
        }
    }

    #[test]
    fn non_utf8_bytes_never_panic() {
        let garbage: &[u8] = b"\xff\xfe\x80, \xc3\x28";
        for proxies in [xff(), fwd()] {
            let name = proxies.header().header_name();
            let map = headers(&[(name.as_str(), garbage)]);
            assert_eq!(proxies.client_ip(ip(PROXY), &map), ip(PROXY));
        }
        let map = xff_lines(&["203.0.113.9"]);
        let mut map = map;
        map.append("x-forwarded-for", HeaderValue::from_bytes(b"\xff").unwrap());
        assert_eq!(xff().client_ip(ip(PROXY), &map), ip(PROXY));
    }

    #[test]
    fn random_bytes_never_panic() {
        // Bytes that matter to the parsers, plus some that must be rejected.
        const ALPHABET: &[u8] = b"[]:,;=\"\\ \tforFOR1029.3_%abcdef\x80\xff";
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            // xorshift64: deterministic, so a failure reproduces.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..5_000 {
            let len = (next() % 48) as usize;
            let line: Vec<u8> = (0..len)
                .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                .collect();
            for proxies in [xff(), fwd()] {
                let name = proxies.header().header_name();
                let map = headers(&[(name.as_str(), &line)]);
                // Whatever it finds behind a trusted peer, it must not panic finding it...
                let _ = proxies.client_ip(ip(PROXY), &map);
                // ...and an untrusted peer's headers change nothing.
                assert_eq!(proxies.client_ip(ip(STRANGER), &map), ip(STRANGER));
            }
        }
    }

    #[test]
    fn ten_thousand_entries_fall_back_to_the_peer() {
        let many = vec!["10.0.0.2"; 10_000].join(",");
        let map = xff_lines(&[&many]);
        assert_eq!(xff().client_ip(ip(PROXY), &map), ip(PROXY));
        let generous = xff().with_max_header_bytes(usize::MAX);
        assert_eq!(generous.client_ip(ip(PROXY), &map), ip(PROXY));

        let many = vec!["for=10.0.0.2"; 10_000].join(",");
        let map = fwd_lines(&[&many]);
        assert_eq!(
            fwd()
                .with_max_header_bytes(usize::MAX)
                .client_ip(ip(PROXY), &map),
            ip(PROXY)
        );

        let many_lines: Vec<&str> = vec!["10.0.0.2"; 10_000];
        let map = xff_lines(&many_lines);
        assert_eq!(xff().client_ip(ip(PROXY), &map), ip(PROXY));
    }

    #[test]
    fn a_megabyte_header_is_ignored() {
        let huge = format!("{}{CLIENT}, 10.0.0.2", "9".repeat(1 << 20));
        assert_eq!(xff().client_ip(ip(PROXY), &xff_lines(&[&huge])), ip(PROXY));
        let huge = format!("for=\"{}\", for={CLIENT}", "\\\"".repeat(1 << 19));
        assert_eq!(fwd().client_ip(ip(PROXY), &fwd_lines(&[&huge])), ip(PROXY));
        // Within a generous budget the walk still finds the client without reaching the junk.
        let generous = xff().with_max_header_bytes(2 << 20);
        let huge = format!("{},{CLIENT}, 10.0.0.2", "9".repeat(1 << 20));
        assert_eq!(
            generous.client_ip(ip(PROXY), &xff_lines(&[&huge])),
            ip(CLIENT)
        );
    }

    #[test]
    fn byte_budget_counts_every_line_and_separator() {
        let line = "203.0.113.9, 10.0.0.2"; // 21 bytes
        let exact = xff().with_max_header_bytes(line.len());
        assert_eq!(exact.client_ip(ip(PROXY), &xff_lines(&[line])), ip(CLIENT));
        let short = xff().with_max_header_bytes(line.len() - 1);
        assert_eq!(short.client_ip(ip(PROXY), &xff_lines(&[line])), ip(PROXY));

        // "203.0.113.9" + ", " + "10.0.0.2" is the same 21 bytes.
        let split = xff_lines(&["203.0.113.9", "10.0.0.2"]);
        assert_eq!(exact.client_ip(ip(PROXY), &split), ip(CLIENT));
        assert_eq!(short.client_ip(ip(PROXY), &split), ip(PROXY));
    }

    #[test]
    fn entry_budget() {
        let chain = xff_lines(&["203.0.113.9, 10.0.0.4, 10.0.0.3, 10.0.0.2"]);
        assert_eq!(
            xff().with_max_entries(4).client_ip(ip(PROXY), &chain),
            ip(CLIENT)
        );
        assert_eq!(
            xff().with_max_entries(3).client_ip(ip(PROXY), &chain),
            ip(PROXY)
        );
        assert_eq!(
            xff().with_max_entries(0).client_ip(ip(PROXY), &chain),
            ip(PROXY)
        );
        // 33 trusted hops after the client: past the default.
        let hops = vec!["10.0.0.2"; 33].join(", ");
        let chain = xff_lines(&[&format!("{CLIENT}, {hops}")]);
        assert_eq!(xff().client_ip(ip(PROXY), &chain), ip(PROXY));
        let hops = vec!["10.0.0.2"; 31].join(", ");
        let chain = xff_lines(&[&format!("{CLIENT}, {hops}")]);
        assert_eq!(xff().client_ip(ip(PROXY), &chain), ip(CLIENT));
    }

    #[test]
    fn ipv4_mapped_peers_and_entries_count_as_ipv4() {
        let chain = xff_lines(&["::ffff:203.0.113.9, ::ffff:10.0.0.2"]);
        assert_eq!(xff().client_ip(ip("::ffff:10.0.0.1"), &chain), ip(CLIENT));
        // An untrusted mapped peer comes back as plain IPv4.
        assert_eq!(
            xff().client_ip(ip("::ffff:198.51.100.4"), &chain),
            ip(STRANGER)
        );
        assert!(xff().is_trusted(ip("::ffff:10.0.0.1")));
        let chain = fwd_lines(&[r#"for="[::ffff:203.0.113.9]""#]);
        assert_eq!(fwd().client_ip(ip("::ffff:10.0.0.1"), &chain), ip(CLIENT));
    }
}
