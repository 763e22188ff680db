//! # tollgate-redis-harness
//!
//! Test support for tollgate (not published): real `redis-server` processes and real Redis
//! Clusters, started on free loopback ports in temp dirs, for the tests of the Redis store and
//! the cross-crate tests. Mocks cannot show how Lua scripts, `TIME`, hash slots, `MOVED`
//! redirections or a failover really behave; these can, and they take milliseconds (a server)
//! or a few seconds (a cluster) to start.
//!
//! * [`RedisServer`] — one server: [`start`](RedisServer::start) waits until it answers `PING`;
//!   [`kill`](RedisServer::kill), [`pause`](RedisServer::pause) /
//!   [`resume`](RedisServer::resume) and [`restart`](RedisServer::restart) (same port) inject
//!   the failures a store must survive;
//! * [`RedisCluster`] — six nodes, three masters and three replicas, created with
//!   `redis-cli --cluster create` and ready when every node says `cluster_state:ok`;
//!   [`shared`](RedisCluster::shared) starts one per test binary,
//!   [`kill_master`](RedisCluster::kill_master) and
//!   [`wait_until_ok`](RedisCluster::wait_until_ok) drive a failover;
//! * [`redis_cli`] — a `redis-cli` command with a deadline (the harness needs no Redis client
//!   crate: readiness and inspection go through `redis-cli`).
//!
//! ```no_run
//! use tollgate_redis_harness::{RedisCluster, RedisServer};
//!
//! // One server per test: it is cheap, and no test sees another's keys.
//! let server = RedisServer::start()?;
//! let url = server.url(); // "redis://127.0.0.1:PORT/", for redis::Client::open
//! server.pause()?; // the store under test should now time out, not hang
//! server.resume()?;
//!
//! // One cluster per test binary: it takes seconds to start.
//! let cluster = RedisCluster::shared()?;
//! let nodes = cluster.urls(); // for redis::cluster::ClusterClient::new
//! assert_eq!(cluster.masters()?.len(), 3);
//! # let _ = (url, nodes);
//! # Ok::<(), tollgate_redis_harness::HarnessError>(())
//! ```
//!
//! ## Requirements
//!
//! `redis-server` and `redis-cli` (Redis 7) on `PATH`, and `sh`. When they are missing the
//! harness fails — it never skips a test silently — with an error that says how to install
//! them: `apt-get install redis-server redis-tools`, or run `scripts/test`, which does.
//!
//! ## Failures explain themselves
//!
//! A server that does not start in time, exits during start-up, or a cluster that cannot be
//! created or does not become healthy, gives a [`HarnessError`] whose message ends with the tail
//! of the server logs (every node's, for a cluster), so a CI log shows why.
//!
//! ## Nothing is left running
//!
//! Dropping a [`RedisServer`] or [`RedisCluster`] kills its processes (`SIGKILL`, by the process
//! id the harness spawned — never by name) and removes its temp dirs. `Drop` does not run when a
//! test process is killed or aborts, nor ever for a static such as
//! [`RedisCluster::shared`]; for those, every server has a watchdog: a small `sh` process that
//! blocks reading a pipe held only by the test process. The kernel closes the pipe when the
//! test process exits, however it exits, and the watchdog then kills its server and removes the
//! temp dir. (This is why [`RedisCluster::shared`] can be a plain `OnceLock` static, started
//! once per test binary, instead of an `Arc` dropped by the last test holding it — which would
//! start a new cluster, seconds each time, whenever tests happen not to overlap.)
//!
//! With one process per test (cargo-nextest), `shared` starts one cluster per test process.

mod cli;
mod cluster;
mod error;
mod port;
mod process;
mod server;

pub use cli::{DEFAULT_CLI_TIMEOUT, redis_cli};
pub use cluster::RedisCluster;
pub use error::HarnessError;
pub use server::RedisServer;
