//! What the Redis store's tests share: one runtime, one server and one cluster per test binary,
//! and stores with prefixes of their own so tests never see each other's keys.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, OnceLock};

use tokio::runtime::Runtime;
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_redis_harness::{RedisCluster, RedisServer};
use tollgate_testing::ManualClock;

static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime for the redis tests")
});

/// Runs `future` to completion on the tests' shared runtime (whose tasks keep connections
/// alive between tests).
pub fn block_on<F: Future>(future: F) -> F::Output {
    RUNTIME.block_on(future)
}

/// Runs `connect` on the shared runtime from a thread of its own, so it can be called from
/// inside another `block_on` (the conformance suite builds stores inside its futures).
fn connect_outside<T: Send + 'static>(connect: impl Future<Output = T> + Send + 'static) -> T {
    std::thread::spawn(move || RUNTIME.block_on(connect))
        .join()
        .expect("the connecting thread does not panic")
}

/// This binary's standalone server.
pub fn server() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(|| RedisServer::start().expect("start redis-server"))
}

/// This binary's cluster (three masters with a replica each).
pub fn cluster() -> &'static RedisCluster {
    RedisCluster::shared().expect("start a redis cluster")
}

/// A connection to this binary's server, made once.
pub fn standalone_connection() -> RedisConnection {
    static CONNECTION: OnceLock<RedisConnection> = OnceLock::new();
    CONNECTION
        .get_or_init(|| {
            let url = server().url();
            connect_outside(async move { RedisConnection::connect(&url).await })
                .expect("connect to redis-server")
        })
        .clone()
}

/// A connection to this binary's cluster, made once.
pub fn cluster_connection() -> RedisConnection {
    static CONNECTION: OnceLock<RedisConnection> = OnceLock::new();
    CONNECTION
        .get_or_init(|| {
            let nodes = cluster().urls();
            connect_outside(async move { RedisConnection::connect_cluster(&nodes).await })
                .expect("connect to the redis cluster")
        })
        .clone()
}

/// A prefix no other store of this binary uses.
pub fn unique_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("test{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A store with a prefix of its own on `connection`, taking "now" from `clock` (or, without
/// one, from the server's `TIME`).
fn store_on(connection: RedisConnection, clock: Option<ManualClock>) -> RedisStore {
    let builder = RedisStore::builder().prefix(unique_prefix());
    let builder = match clock {
        Some(clock) => builder.test_clock(clock),
        None => builder,
    };
    builder.build(connection).expect("a valid prefix")
}

/// A store on the standalone server that takes "now" from `clock`.
pub fn standalone_store(clock: ManualClock) -> RedisStore {
    store_on(standalone_connection(), Some(clock))
}

/// A store on the cluster that takes "now" from `clock`.
pub fn cluster_store(clock: ManualClock) -> RedisStore {
    store_on(cluster_connection(), Some(clock))
}

/// A store on the standalone server on the server's own clock.
pub fn server_time_store() -> RedisStore {
    store_on(standalone_connection(), None)
}

/// A plain redis-rs connection to this binary's server, for what redis-cli's arguments cannot
/// carry (values with any bytes) and for scripts of a test's own.
pub async fn direct_connection() -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(server().url()).expect("a valid url");
    client
        .get_multiplexed_async_connection()
        .await
        .expect("connect to redis-server")
}

/// `SET name value` on this binary's server, whatever bytes `value` holds.
pub async fn set_bytes(name: &str, value: &[u8]) {
    let mut connection = direct_connection().await;
    let () = redis::cmd("SET")
        .arg(name)
        .arg(value)
        .query_async(&mut connection)
        .await
        .expect("SET answers");
}

/// `GET name` on this binary's server, as bytes.
pub async fn get_bytes(name: &str) -> Option<Vec<u8>> {
    let mut connection = direct_connection().await;
    redis::cmd("GET")
        .arg(name)
        .query_async(&mut connection)
        .await
        .expect("GET answers")
}

/// `n` as the packed values' varint: 7 bits a byte, least significant first, the high bit set
/// on every byte but the last.
pub fn varint(mut n: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    while n >= 128 {
        bytes.push((n % 128) as u8 | 0x80);
        n /= 128;
    }
    bytes.push(n as u8);
    bytes
}
