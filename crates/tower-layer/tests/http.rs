//! `RateLimitLayer` over real HTTP: an axum server on a loopback port, a reqwest client, and the
//! peer address taken from axum's `ConnectInfo`. Every request comes from 127.0.0.1, so the
//! trusted-proxy tests trust (or do not trust) 127.0.0.0/8 to stand on either side of the proxy.

mod common;

use common::server::{Reply, TestServer};

use std::collections::HashSet;
use std::net::SocketAddr;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::StatusCode;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use tokio::task::JoinSet;
use tollgate_core::{MemoryStore, Quota, Rate};
use tollgate_tower::client_ip::{Cidr, ProxyHeader, TrustedProxies};
use tollgate_tower::key::ClientIp;
use tollgate_tower::{RateLimitLayer, Rule};

/// Requests each caller may make in these tests; nothing refills during a test.
const QUOTA: u64 = 3;

/// The policy name every test's rule uses.
const POLICY: &str = "per-client";

/// A client address a trusted proxy can report.
const CLIENT: &str = "198.51.100.7";

// ---------------------------------------------------------------------------------------------
// The server, the client and their requests
// ---------------------------------------------------------------------------------------------

/// The test server, with this file's request helpers.
type Server = TestServer;

impl TestServer {
    /// `GET path` with `headers`, over this server's own client.
    async fn get(&self, path: &str, headers: &[Header]) -> Reply {
        send(&self.client, &self.url(path), headers).await
    }

    /// The status of each request, sent one after another: one element of `requests` is the
    /// header list of one request.
    async fn statuses(&self, path: &str, requests: &[Vec<Header>]) -> Vec<StatusCode> {
        let mut statuses = Vec::with_capacity(requests.len());
        for headers in requests {
            statuses.push(self.get(path, headers).await.status);
        }
        statuses
    }
}

/// One request header: name and value.
type Header = (&'static str, String);

async fn send(client: &reqwest::Client, url: &str, headers: &[Header]) -> Reply {
    let mut request = client.get(url);
    for (name, value) in headers {
        request = request.header(*name, value.as_str());
    }
    Reply::send(request).await
}

fn x_forwarded_for(value: &str) -> Vec<Header> {
    vec![("x-forwarded-for", value.to_owned())]
}

fn forwarded(value: &str) -> Vec<Header> {
    vec![("forwarded", value.to_owned())]
}

fn no_headers() -> Vec<Header> {
    Vec::new()
}

/// What `count` requests from one caller get: the quota passes, the rest is refused.
fn quota_then_refused(count: usize) -> Vec<StatusCode> {
    (0..count)
        .map(|index| {
            if (index as u64) < QUOTA {
                StatusCode::OK
            } else {
                StatusCode::TOO_MANY_REQUESTS
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The applications under test
// ---------------------------------------------------------------------------------------------

/// The handler: says hello and who it heard from (so a test can tell connections apart).
async fn hello(ConnectInfo(peer): ConnectInfo<SocketAddr>) -> String {
    format!("hello {peer}")
}

/// `limit` requests per caller as `key` names it, with no refill a test could see.
fn layer(key: ClientIp, limit: u64) -> RateLimitLayer<MemoryStore> {
    let quota = Quota::token_bucket(limit, Rate::per_hour(1)).expect("a valid quota");
    let rule = Rule::new(POLICY, quota, key).expect("a valid policy name");
    RateLimitLayer::new(MemoryStore::new()).rule(rule)
}

/// `/` and `/healthz`, both behind `layer`.
fn hello_app(layer: RateLimitLayer<MemoryStore>) -> Router {
    Router::new()
        .route("/", get(hello))
        .route("/healthz", get(hello))
        .layer(layer)
}

/// A server limiting `QUOTA` requests per caller as `key` names it.
async fn serve_limited(key: ClientIp) -> Server {
    Server::start(hello_app(layer(key, QUOTA))).await
}

fn cidr(text: &str) -> Cidr {
    text.parse().expect("a valid CIDR")
}

/// Proxies live in 10.0.0.0/8 only: the loopback peer is a client, and its forwarding headers
/// are its own invention.
fn loopback_untrusted() -> ClientIp {
    ClientIp::behind(TrustedProxies::new(ProxyHeader::XForwardedFor).trust(cidr("10.0.0.0/8")))
}

/// The loopback peer is a trusted proxy writing `header`, with more proxies in 10.0.0.0/8.
fn loopback_trusted(header: ProxyHeader) -> ClientIp {
    ClientIp::behind(
        TrustedProxies::new(header)
            .trust(cidr("127.0.0.0/8"))
            .trust(cidr("10.0.0.0/8")),
    )
}

// ---------------------------------------------------------------------------------------------
// Reading the rate-limit fields
// ---------------------------------------------------------------------------------------------

/// One member of a `RateLimit` or `RateLimit-Policy` sf-list: a policy name and its integer
/// parameters, in order.
type Member = common::SfMember;

/// The members of `field`, which must be an RFC 8941 list of strings with integer parameters.
fn sf_members(reply: &Reply, field: &str) -> Vec<Member> {
    let value = reply
        .headers
        .get(field)
        .unwrap_or_else(|| panic!("no `{field}` field in {:?}", reply.headers));
    common::sf_members(field, value)
}

/// The single policy of `field`, which must be ours.
fn our_policy(reply: &Reply, field: &str) -> Member {
    let mut members = sf_members(reply, field);
    assert_eq!(members.len(), 1, "one policy in `{field}`: {members:?}");
    let member = members.remove(0);
    assert_eq!(member.name, POLICY);
    member
}

fn has_rate_limit_fields(reply: &Reply) -> bool {
    reply.headers.contains_key("ratelimit") || reply.headers.contains_key("ratelimit-policy")
}

/// `Retry-After` as delay-seconds.
fn retry_after_secs(reply: &Reply) -> u64 {
    let value = reply.headers.get(RETRY_AFTER).expect("a Retry-After field");
    let text = value.to_str().expect("an ASCII Retry-After");
    text.parse()
        .unwrap_or_else(|_| panic!("Retry-After {text:?} is not whole seconds"))
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn allowed_responses_carry_ratelimit_fields_and_the_refusal_is_a_problem_429() {
    let server = serve_limited(ClientIp::peer()).await;
    // A token bucket of QUOTA that gains one token an hour refills completely in QUOTA hours.
    let window = i64::try_from(QUOTA * 3600).unwrap();

    for used in 1..=QUOTA {
        let reply = server.get("/", &no_headers()).await;
        assert_eq!(reply.status, StatusCode::OK, "request {used}");
        assert!(reply.body.starts_with("hello "), "{}", reply.body);
        let policy = our_policy(&reply, "ratelimit-policy");
        assert_eq!(policy.param("q"), i64::try_from(QUOTA).unwrap());
        assert_eq!(policy.param("w"), window);
        let standing = our_policy(&reply, "ratelimit");
        assert_eq!(standing.param("r"), i64::try_from(QUOTA - used).unwrap());
        assert!((1..=window).contains(&standing.param("t")), "{standing:?}");
    }

    let refused = server.get("/", &no_headers()).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    let retry_after = retry_after_secs(&refused);
    assert!(
        (1..=3600).contains(&retry_after),
        "Retry-After: {retry_after}"
    );
    assert_eq!(our_policy(&refused, "ratelimit").param("r"), 0);
    assert_eq!(
        refused.headers.get(CONTENT_TYPE).expect("a Content-Type"),
        "application/problem+json"
    );
    let problem: serde_json::Value =
        serde_json::from_str(&refused.body).expect("a JSON problem body");
    assert_eq!(problem["type"], "urn:tollgate:problem:rate-limited");
    assert_eq!(problem["status"], 429);
    assert_eq!(problem["policy"], POLICY);
    assert_eq!(problem["retry_after"], retry_after);
    assert!(problem["title"].is_string() && problem["detail"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_clones_across_connections_share_exactly_one_quota() {
    const CLIENTS: usize = 4;
    const REQUESTS_PER_CLIENT: usize = 5;
    const LIMIT: u64 = 6;
    let server = Server::start(hello_app(layer(ClientIp::peer(), LIMIT))).await;
    let url = server.url("/");
    let clients: Vec<reqwest::Client> = (0..CLIENTS).map(|_| common::server::client()).collect();

    // One request per client first: the handler names each one's peer port, which proves the
    // clients really arrived over separate connections.
    let mut peers = HashSet::new();
    for client in &clients {
        let reply = send(client, &url, &no_headers()).await;
        assert_eq!(reply.status, StatusCode::OK);
        peers.insert(reply.body);
    }
    assert_eq!(peers.len(), CLIENTS, "one connection per client: {peers:?}");

    // The rest all at once, over every client's connections.
    let mut requests = JoinSet::new();
    for client in &clients {
        for _ in 1..REQUESTS_PER_CLIENT {
            let (client, url) = (client.clone(), url.clone());
            requests.spawn(async move { send(&client, &url, &no_headers()).await.status });
        }
    }
    let statuses = requests.join_all().await;
    let refused = statuses
        .iter()
        .filter(|status| **status == StatusCode::TOO_MANY_REQUESTS)
        .count();
    let allowed = CLIENTS + statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert_eq!(
        allowed + refused,
        CLIENTS * REQUESTS_PER_CLIENT,
        "{statuses:?}"
    );
    assert_eq!(allowed, usize::try_from(LIMIT).unwrap(), "{statuses:?}");
}

#[tokio::test]
async fn forged_x_forwarded_for_from_an_untrusted_peer_is_ignored() {
    let server = serve_limited(loopback_untrusted()).await;

    // Each request claims another client; all of them are the peer, 127.0.0.1.
    let forged: Vec<_> = (1..=QUOTA + 1)
        .map(|n| x_forwarded_for(&format!("203.0.113.{n}")))
        .collect();
    assert_eq!(
        server.statuses("/", &forged).await,
        quota_then_refused(forged.len())
    );
    // Even an address in the trusted proxy range changes nothing, nor does saying nothing.
    let more = [
        x_forwarded_for(&format!("{CLIENT}, 10.1.2.3")),
        no_headers(),
    ];
    assert_eq!(
        server.statuses("/", &more).await,
        [StatusCode::TOO_MANY_REQUESTS; 2]
    );
}

#[tokio::test]
async fn trusted_proxy_chain_counts_the_client_it_reports() {
    let server = serve_limited(loopback_trusted(ProxyHeader::XForwardedFor)).await;

    let chain = x_forwarded_for(&format!("{CLIENT}, 10.1.2.3"));
    let requests = vec![chain; QUOTA as usize + 1];
    assert_eq!(
        server.statuses("/", &requests).await,
        quota_then_refused(requests.len())
    );
    // Another client behind the same proxies, and the proxy itself, each have their own count.
    let others = [x_forwarded_for("198.51.100.8, 10.1.2.3"), no_headers()];
    assert_eq!(server.statuses("/", &others).await, [StatusCode::OK; 2]);
}

#[tokio::test]
async fn entries_a_client_prepends_left_of_the_real_client_are_not_used() {
    let server = serve_limited(loopback_trusted(ProxyHeader::XForwardedFor)).await;

    // The client sends a different fake each time; the proxy (127.0.0.1) appends what it saw,
    // to the client's line or as a field line of its own (the lines read as one list).
    let prepended: Vec<_> = (1..=QUOTA + 1)
        .map(|n| {
            let fake = format!("1.1.1.{n}");
            if n % 2 == 0 {
                x_forwarded_for(&format!("{fake}, {CLIENT}"))
            } else {
                [x_forwarded_for(&fake), x_forwarded_for(CLIENT)].concat()
            }
        })
        .collect();
    assert_eq!(
        server.statuses("/", &prepended).await,
        quota_then_refused(prepended.len())
    );
    // It was counted as CLIENT, and the fake address has no count at all.
    let after = [x_forwarded_for(CLIENT), x_forwarded_for("1.1.1.1")];
    assert_eq!(
        server.statuses("/", &after).await,
        [StatusCode::TOO_MANY_REQUESTS, StatusCode::OK]
    );
}

/// With `configured` read from the trusted loopback proxy, a header of the other kind (`ignored`
/// builds one naming a different client per request) is never read: every such request counts
/// as the peer. `honoured` names CLIENT in the configured header and has its own count.
async fn only_the_configured_header_is_read(
    configured: ProxyHeader,
    ignored: impl Fn(u64) -> Vec<Header>,
    honoured: Vec<Header>,
) {
    let server = serve_limited(loopback_trusted(configured)).await;

    let other_header: Vec<_> = (1..=QUOTA + 1).map(ignored).collect();
    assert_eq!(
        server.statuses("/", &other_header).await,
        quota_then_refused(other_header.len()),
        "{configured:?}"
    );
    let after = [honoured, no_headers()];
    assert_eq!(
        server.statuses("/", &after).await,
        [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS],
        "{configured:?}: the configured header names CLIENT; the peer is used up"
    );
}

#[tokio::test]
async fn x_forwarded_for_configuration_ignores_a_client_supplied_forwarded_header() {
    only_the_configured_header_is_read(
        ProxyHeader::XForwardedFor,
        |n| forwarded(&format!("for=203.0.113.{n}")),
        x_forwarded_for(CLIENT),
    )
    .await;
}

#[tokio::test]
async fn forwarded_configuration_ignores_x_forwarded_for() {
    only_the_configured_header_is_read(
        ProxyHeader::Forwarded,
        |n| x_forwarded_for(&format!("203.0.113.{n}")),
        forwarded(&format!("for={CLIENT}")),
    )
    .await;
}

#[tokio::test]
async fn forwarded_ipv6_clients_are_counted_by_their_slash_64() {
    let server = serve_limited(loopback_trusted(ProxyHeader::Forwarded)).await;

    // Two addresses (and ports) in 2001:db8:cafe::/64 take turns; they share one count.
    let same_64 = [
        forwarded(r#"for="[2001:db8:cafe::17]:4711""#),
        forwarded(r#"for="[2001:db8:cafe:0:ffff:1:2:3]:5000""#),
    ];
    let requests: Vec<_> = same_64
        .iter()
        .cycle()
        .take(QUOTA as usize + 1)
        .cloned()
        .collect();
    assert_eq!(
        server.statuses("/", &requests).await,
        quota_then_refused(requests.len())
    );
    // The next /64 and the proxy itself each have their own count.
    let others = [
        forwarded(r#"for="[2001:db8:cafe:1::17]:4711""#),
        no_headers(),
    ];
    assert_eq!(server.statuses("/", &others).await, [StatusCode::OK; 2]);
}

#[tokio::test]
async fn malformed_forwarding_values_are_answered_normally_and_count_as_the_peer() {
    let many_xff = vec![CLIENT; 10_000].join(", ");
    let many_forwarded = vec![format!("for={CLIENT}"); 10_000].join(", ");
    let cases: Vec<(ProxyHeader, Vec<Header>)> = vec![
        (ProxyHeader::XForwardedFor, x_forwarded_for("garbage")),
        (ProxyHeader::XForwardedFor, x_forwarded_for(" , ;;[]\"")),
        (ProxyHeader::XForwardedFor, x_forwarded_for(&many_xff)),
        (ProxyHeader::XForwardedFor, x_forwarded_for("fe80::1%eth0")),
        (
            ProxyHeader::XForwardedFor,
            x_forwarded_for("[fe80::1%eth0]:80"),
        ),
        (
            ProxyHeader::XForwardedFor,
            x_forwarded_for("198.51.100.7:99999"),
        ),
        (
            ProxyHeader::XForwardedFor,
            x_forwarded_for("198.51.100.7:http"),
        ),
        (ProxyHeader::XForwardedFor, x_forwarded_for("_hidden")),
        (ProxyHeader::XForwardedFor, x_forwarded_for("unknown")),
        (ProxyHeader::XForwardedFor, x_forwarded_for("")),
        (ProxyHeader::Forwarded, forwarded("garbage")),
        (ProxyHeader::Forwarded, forwarded(r#"for="198.51.100.7"#)),
        (ProxyHeader::Forwarded, forwarded(&many_forwarded)),
        (
            ProxyHeader::Forwarded,
            forwarded(r#"for="[fe80::1%eth0]:4711""#),
        ),
        (ProxyHeader::Forwarded, forwarded("for=198.51.100.7:80")),
        (
            ProxyHeader::Forwarded,
            forwarded(r#"for="198.51.100.7:99999""#),
        ),
        (ProxyHeader::Forwarded, forwarded("for=_hidden")),
        (ProxyHeader::Forwarded, forwarded("for=unknown")),
        (ProxyHeader::Forwarded, forwarded("proto=https")),
    ];
    for (configured, malformed) in cases {
        // A fresh server per case, so each starts with the peer's whole quota.
        let server = serve_limited(loopback_trusted(configured)).await;
        let mut requests = vec![malformed.clone(); QUOTA as usize];
        requests.push(no_headers());
        requests.push(malformed.clone());
        let mut expected = quota_then_refused(requests.len() - 1);
        expected.push(StatusCode::TOO_MANY_REQUESTS);
        let (name, value) = &malformed[0];
        assert_eq!(
            server.statuses("/", &requests).await,
            expected,
            "{configured:?}, {name}: {value:.60}"
        );
    }
}

#[tokio::test]
async fn route_layer_limits_only_the_routes_it_wraps() {
    let app = Router::new()
        .route("/limited", get(hello))
        .route_layer(layer(ClientIp::peer(), QUOTA))
        .route("/free", get(hello));
    let server = Server::start(app).await;
    let requests = vec![no_headers(); QUOTA as usize + 2];

    assert_eq!(
        server.statuses("/limited", &requests).await,
        quota_then_refused(requests.len())
    );
    for _ in &requests {
        let reply = server.get("/free", &no_headers()).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert!(!has_rate_limit_fields(&reply), "{:?}", reply.headers);
    }
    assert_eq!(
        server.get("/limited", &no_headers()).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn exempt_health_check_path_is_never_limited() {
    let server = Server::start(hello_app(
        layer(ClientIp::peer(), QUOTA)
            .exempt_path("/healthz")
            .expect("a valid pattern"),
    ))
    .await;
    let health_checks = 2 * QUOTA as usize;

    let check_health = || async {
        for _ in 0..health_checks {
            let reply = server.get("/healthz", &no_headers()).await;
            assert_eq!(reply.status, StatusCode::OK);
            assert!(!has_rate_limit_fields(&reply), "{:?}", reply.headers);
        }
    };
    // Health checks use none of the caller's quota, and pass once it is used up.
    check_health().await;
    let requests = vec![no_headers(); QUOTA as usize + 1];
    assert_eq!(
        server.statuses("/", &requests).await,
        quota_then_refused(requests.len())
    );
    check_health().await;
}
