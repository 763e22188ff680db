//! The quota service behind a real Envoy 1.40: its `rate_limit_quota` filter, asking our
//! service over a gRPC cluster, enforces the leases it is assigned, in front of an axum
//! upstream.
//!
//! The filter puts each request in a bucket `{user: <x-user header>}`; the rule counts each
//! user 5 an hour. Envoy denies a bucket until its first assignment arrives
//! (`no_assignment_behavior: DENY_ALL`), so what passes is what the service leased: the test
//! waits for the first 200 (asking again until it comes, a bounded number of times), then
//! counts.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::upstream::{Upstream, client, get_as, get_with_headers};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tollgate_core::MemoryStore;
use tollgate_envoy::{QuotaService, RateLimitService};
use tollgate_envoy_harness::{Envoy, EnvoyConfig};

/// The quota filter: domain `edge`, every request in the bucket of its `x-user` header,
/// denied until the bucket's first assignment.
const QUOTA_FILTER: &str = r#"
name: envoy.filters.http.rate_limit_quota
typed_config:
  "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig
  rlqs_server:
    envoy_grpc:
      cluster_name: quota_service
  domain: edge
  bucket_matchers:
    on_no_match:
      action:
        name: per_user
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings
          bucket_id_builder:
            bucket_id_builder:
              user:
                custom_value:
                  name: user
                  typed_config:
                    "@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput
                    header_name: x-user
          # Envoy 1.40 reports every 5 s whatever this says.
          reporting_interval: 1s
          no_assignment_behavior:
            fallback_rate_limit:
              blanket_rule: DENY_ALL
"#;

/// Each user 5 an hour: nothing comes back while the test runs.
const RULES: &str = r#"
[[rule]]
id = "per-user"
envoy = { domain = "edge", descriptor = [{ key = "user" }] }
algorithm = "token_bucket"
capacity = 5
refill = { amount = 5, per = "1h" }
"#;

/// How many requests may find a bucket still waiting for its first assignment.
const WAITING_AT_MOST: usize = 5_000;

/// Envoy in front of a new upstream, its quota filter asking `quotas`.
async fn envoy_asking(quotas: &QuotaService) -> (Envoy, Upstream) {
    let upstream = Upstream::start().await;
    let config = EnvoyConfig::new(upstream.address())
        .grpc_cluster("quota_service", serve(quotas).await)
        .http_filter(QUOTA_FILTER);
    let envoy = Envoy::start(&config).unwrap_or_else(|error| panic!("{error}"));
    (envoy, upstream)
}

/// The rate limit service with [`RULES`] on memory, and its quota service with leases of up
/// to a whole limit (the first assignment is a user's 5), set up by `configure`.
fn quota_service(configure: impl FnOnce(QuotaService) -> QuotaService) -> QuotaService {
    let limits = RateLimitService::new(MemoryStore::new());
    limits
        .set_rules(&common::rules(RULES))
        .unwrap_or_else(|errors| panic!("{errors}"));
    configure(limits.quota_service().with_leases_per_limit(1))
}

/// `quotas` served on 127.0.0.1:0.
async fn serve(quotas: &QuotaService) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let address = listener.local_addr().expect("its address");
    let server = tonic::transport::Server::builder().add_service(quotas.server());
    tokio::spawn(server.serve_with_incoming(TcpListenerStream::new(listener)));
    address
}

/// Asks as `user` until the first 200, and answers how many 429s came before it (the bucket
/// waiting for its first assignment).
async fn until_assigned(client: &reqwest::Client, url: &str, user: &str, envoy: &Envoy) -> usize {
    for waited in 0..WAITING_AT_MOST {
        match get_as(client, url, user).await {
            200 => return waited,
            429 => continue,
            other => panic!("{other} through Envoy; its log:\n{}", envoy.log()),
        }
    }
    panic!(
        "no assignment reached Envoy within {WAITING_AT_MOST} requests; its log:\n{}",
        envoy.log()
    );
}

/// Waits until `done` holds, checking every few milliseconds; panics naming `what` after a
/// generous while (Envoy reports every 5 s).
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..6_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{what}: not within 30 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_enforces_the_leases_and_answers_429_past_the_quota() {
    let quotas = quota_service(|quotas| quotas);
    let (envoy, upstream) = envoy_asking(&quotas).await;
    let (client, url) = (client(), format!("{}/feed", envoy.url()));

    until_assigned(&client, &url, "alice", &envoy).await;
    let mut statuses = vec![200];
    for _ in 0..9 {
        statuses.push(get_as(&client, &url, "alice").await);
    }

    assert_eq!(
        statuses,
        [200, 200, 200, 200, 200, 429, 429, 429, 429, 429],
        "Envoy's log:\n{}",
        envoy.log()
    );
    assert_eq!(upstream.served(), 5);
    assert_eq!(quotas.actions_sent(), 1, "one token bucket, alice's");
    // Envoy's own refusal: 429 and the filter's static deny settings, none of the fields the
    // rate limit service's answers carry.
    let (status, headers) = get_with_headers(&client, &url, "alice").await;
    assert_eq!(status, 429);
    for field in ["retry-after", "ratelimit", "ratelimit-policy"] {
        assert!(!headers.contains_key(field), "{field} in {headers:?}");
    }

    // Envoy's next report says alice spent her lease: the store has nothing more for her, and
    // the service says so (DENY_ALL). She is still refused; bob has his own 5.
    wait_for("the service answers alice's spent lease", || {
        quotas.actions_sent() >= 2
    })
    .await;
    assert_eq!(get_as(&client, &url, "alice").await, 429);
    until_assigned(&client, &url, "bob", &envoy).await;
    let mut bob = vec![200];
    for _ in 0..5 {
        bob.push(get_as(&client, &url, "bob").await);
    }
    assert_eq!(bob, [200, 200, 200, 200, 200, 429]);
    assert_eq!(upstream.served(), 10);
}

/// Envoy 1.40 reports every 5 s: an assignment living 1 s lapses between reports, and the
/// bucket falls back on `no_assignment_behavior` (here DENY_ALL) with its tokens unspent, until
/// the next report renews it. Hence the default time to live of 15 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assignment_that_lapses_between_reports_falls_back_on_envoys_own_behaviour() {
    // A lease far larger than any number of requests a second: a 429 is the lapse.
    let rules = RULES.replace("5", "1000000");
    let limits = RateLimitService::new(MemoryStore::new());
    limits
        .set_rules(&common::rules(&rules))
        .unwrap_or_else(|errors| panic!("{errors}"));
    let quotas = limits
        .quota_service()
        .with_leases_per_limit(1)
        .with_assignment_ttl(Duration::from_secs(1));
    let (envoy, upstream) = envoy_asking(&quotas).await;
    let (client, url) = (client(), format!("{}/feed", envoy.url()));

    until_assigned(&client, &url, "alice", &envoy).await;
    let mut refused = false;
    for _ in 0..100_000 {
        if get_as(&client, &url, "alice").await == 429 {
            refused = true;
            break;
        }
    }

    assert!(
        refused,
        "the assignment never lapsed; Envoy's log:\n{}",
        envoy.log()
    );
    let served = upstream.served();
    assert!(
        served < 1_000_000,
        "refused with tokens left: {served} of a million spent"
    );
    // The next report finds the assignment past its time and leases again.
    let mut renewed = false;
    for _ in 0..6_000 {
        if get_as(&client, &url, "alice").await == 200 {
            renewed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        renewed,
        "no renewal within 30 s; Envoy's log:\n{}",
        envoy.log()
    );
}
