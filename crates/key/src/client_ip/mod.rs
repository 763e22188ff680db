//! The real client address of an HTTP request, found safely behind proxies.
//!
//! A rate limit keyed on "the caller's IP" is only as good as the address it is given. Behind a
//! load balancer every request arrives from the balancer, so the TCP peer address is useless; the
//! client's address is in a header the proxies append to. But that header arrives from the
//! client too, and a client that can choose its own address has no rate limit at all. This
//! module reads the header only where it can be believed:
//!
//! * **Only trusted peers are believed.** A [`TrustedProxies`] lists the networks your proxies
//!   run in as [`Cidr`]s. If the TCP peer is not in one of them, the request came straight from
//!   the client and every forwarding header is the client's own invention: the peer *is* the
//!   client.
//! * **Right to left.** Each proxy *appends* the address it received the request from. The
//!   left end of the list is whatever the client sent, so it proves nothing; the right end was
//!   written by the proxy that connected to you. Walking from the right, past your own trusted
//!   proxies, the first other address is the one your outermost proxy saw: the client. Anything
//!   left of it may be forged and is never read (`X-Forwarded-For: 1.1.1.1, <real client>` still
//!   gives the real client).
//! * **One header.** A deployment's proxies append to `Forwarded` (RFC 7239) or
//!   `X-Forwarded-For`, or set `X-Real-IP`, and pass the others through untouched. Reading more
//!   than one would let the client fill in one the proxies ignore, so exactly one
//!   [`ProxyHeader`] is configured. All lines of a list header are read as one list, in order;
//!   `X-Real-IP` must hold exactly one address.
//! * **When in doubt, the peer.** An entry that is not an address (`unknown`, an obfuscated
//!   `_identifier`, an IPv6 zone, garbage, broken quoting) met before the client, a header over
//!   its byte budget, or a chain of trusted proxies longer than the entry budget yields the peer
//!   address. Such requests are counted together under the proxy's address instead of under an
//!   address someone may have made up. Work per request is bounded and allocation-free.
//! * **One address, one spelling.** A dual-stack listener reports IPv4 peers as IPv4-mapped IPv6
//!   (`::ffff:192.0.2.7`); [`canonical_ip`] turns them back into IPv4 everywhere, so they match
//!   IPv4 proxy ranges and share the IPv4 caller's bucket.
//! * **IPv6 by /64.** A single IPv6 subscriber holds at least a /64 and can rotate through its
//!   2^64 addresses at will. [`IpGrouping`] counts IPv6 callers by /64 (IPv4 by address) unless
//!   told otherwise, and encodes the block as a small [`BlockKey`].
//!
//! # Example
//!
//! ```
//! use std::net::IpAddr;
//! use http::HeaderMap;
//! use tollgate_key::client_ip::{IpGrouping, ProxyHeader, TrustedProxies};
//!
//! // The load balancers live in 10.0.0.0/8 and append to `Forwarded`.
//! let proxies = TrustedProxies::new(ProxyHeader::Forwarded).trust("10.0.0.0/8".parse()?);
//! let grouping = IpGrouping::default(); // IPv4 /32, IPv6 /64
//!
//! let mut headers = HeaderMap::new();
//! headers.append("forwarded", r#"for="[2001:db8:1:2::99]:51234";proto=https"#.parse()?);
//! headers.append("forwarded", "for=10.0.0.7".parse()?);
//! // A forged X-Forwarded-For is not even looked at.
//! headers.append("x-forwarded-for", "192.0.2.1".parse()?);
//!
//! // The request reached us from a load balancer, over a dual-stack socket.
//! let peer: IpAddr = "::ffff:10.0.0.3".parse()?;
//! let client = proxies.client_ip(peer, &headers);
//! assert_eq!(client, "2001:db8:1:2::99".parse::<IpAddr>()?);
//!
//! // Count the whole /64, not the one address.
//! assert_eq!(grouping.block(client).to_string(), "2001:db8:1:2::/64");
//! let key = grouping.key(client);
//! assert_eq!(key, grouping.key("2001:db8:1:2:ffff::1".parse()?));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod block_key;
mod canonical;
mod cidr;
mod forwarded;
mod grouping;
mod node;
mod proxy_header;
mod trusted_proxies;
mod walk;
mod x_forwarded_for;
mod x_real_ip;

pub use block_key::BlockKey;
pub use canonical::canonical_ip;
pub use cidr::{Cidr, CidrError};
pub use grouping::{GroupingError, IpGrouping};
pub use proxy_header::ProxyHeader;
pub use trusted_proxies::TrustedProxies;
