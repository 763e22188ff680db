//! What the rate limit service's tests share: the service on a real tonic server on
//! 127.0.0.1:0, a real tonic client, requests built from (key, value) pairs, and the stores
//! the cases run on — memory, Redis and Redis Cluster (real servers), each on a manual clock so
//! no window rolls over under a test.

#![allow(dead_code, unreachable_pub)]

pub mod binary;
pub mod quota;
pub mod upstream;

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tollgate_config::{Extractors, RuleFile};
use tollgate_core::{MemoryStore, Store, Timestamp};
use tollgate_envoy::RateLimitService;
use tollgate_envoy::envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use tollgate_envoy::envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_redis_harness::{RedisCluster, RedisServer};
use tollgate_testing::ManualClock;
use tollgate_wrappers::FallbackStore;
use tonic::transport::Channel;

/// Where the cases' clocks start.
pub const START: Timestamp = Timestamp::from_secs(1_700_000_020); // 40 s into a minute

/// A store a case runs on.
#[derive(Clone, Copy, Debug)]
pub enum Backend {
    Memory,
    Redis,
    Cluster,
}

/// The rate limit service on a real server, and a client of it.
pub struct Served {
    pub client: RateLimitServiceClient<Channel>,
    pub service: RateLimitService,
    pub clock: ManualClock,
    pub address: SocketAddr,
}

impl Served {
    /// Asks `ShouldRateLimit`.
    pub async fn ask(
        &mut self,
        request: RateLimitRequest,
    ) -> Result<RateLimitResponse, tonic::Status> {
        self.client
            .should_rate_limit(request)
            .await
            .map(tonic::Response::into_inner)
    }
}

/// A rule file from `text`, or a panic with its mistakes.
pub fn rules(text: &str) -> RuleFile {
    RuleFile::parse("rules.toml", text, &Extractors::new())
        .unwrap_or_else(|errors| panic!("{errors}"))
}

/// A request in `domain` of `descriptors`, each a list of (key, value) entries.
pub fn request(domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: descriptors
            .iter()
            .map(|entries| descriptor(entries))
            .collect(),
        hits_addend: 0,
    }
}

/// One descriptor of (key, value) entries.
pub fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(key, value)| Entry {
                key: (*key).to_owned(),
                value: (*value).to_owned(),
            })
            .collect(),
        ..RateLimitDescriptor::default()
    }
}

/// `service` served on 127.0.0.1:0, with a client.
pub async fn serve(service: RateLimitService, clock: ManualClock) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let address = listener.local_addr().expect("its address");
    let server = tonic::transport::Server::builder().add_service(service.server());
    tokio::spawn(server.serve_with_incoming(TcpListenerStream::new(listener)));
    let client = RateLimitServiceClient::connect(format!("http://{address}"))
        .await
        .expect("connect to the rate limit service");
    Served {
        client,
        service,
        clock,
        address,
    }
}

/// The service with `rules` on `backend`, served.
pub async fn served(backend: Backend, rules: &RuleFile) -> Served {
    let (service, clock) = service_on(backend).await;
    service
        .set_rules(rules)
        .unwrap_or_else(|errors| panic!("{errors}"));
    serve(service, clock).await
}

/// The service, with no rules yet, on `backend` on a manual clock at [`START`].
pub async fn service_on(backend: Backend) -> (RateLimitService, ManualClock) {
    let clock = ManualClock::new(START);
    let service = match backend {
        Backend::Memory => {
            RateLimitService::new(MemoryStore::builder().clock(clock.clone()).build())
        }
        Backend::Redis => {
            RateLimitService::new(fallback(redis_store(&clock, standalone().await), &clock))
        }
        Backend::Cluster => {
            RateLimitService::new(fallback(redis_store(&clock, cluster().await), &clock))
        }
    };
    (service, clock)
}

/// `store` behind a `FallbackStore` as the binary builds it, timing out after 200 ms.
pub fn fallback<S: Store>(store: S, clock: &ManualClock) -> FallbackStore<S, ManualClock> {
    FallbackStore::builder(store)
        .timeout(Duration::from_millis(200))
        .clock(clock.clone())
        .build()
}

/// A Redis store with a prefix of its own (tests never see each other's keys), on `clock`.
pub fn redis_store(clock: &ManualClock, connection: RedisConnection) -> RedisStore {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = format!(
        "envoy-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    RedisStore::builder()
        .prefix(prefix)
        .test_clock(clock.clone())
        .build(connection)
        .expect("a redis store")
}

/// This test binary's redis-server, started once.
pub fn server() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        RedisServer::start().expect("start redis-server (install it: apt-get install redis-server)")
    })
}

/// A connection to this binary's redis-server.
pub async fn standalone() -> RedisConnection {
    RedisConnection::connect(&server().url())
        .await
        .expect("connect to redis-server")
}

/// A connection to this binary's Redis Cluster.
pub async fn cluster() -> RedisConnection {
    let cluster = RedisCluster::shared().expect("start a redis cluster (install redis-server)");
    RedisConnection::connect_cluster(&cluster.urls())
        .await
        .expect("connect to the cluster")
}
