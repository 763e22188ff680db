//! One multiplexed, self-reconnecting connection to Redis or Redis Cluster, shared by every
//! check.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{ErrorKind, FromRedisValue, RedisResult, ServerErrorKind};

use crate::ConnectError;
use crate::connecting::Connecting;
use crate::error::is_temporarily_refused;
use crate::replica_ack::{ReplicaAckStats, ReplicaAcks};
use crate::script::ScriptCall;
use crate::slot_map::SlotMap;

/// The first pause before sending a refused call again; it doubles, up to [`MAX_RETRY_PAUSE`].
const RETRY_PAUSE: Duration = Duration::from_millis(10);

/// The longest pause between two sends of a refused call.
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// How many times one call loads the script after `NOSCRIPT` (each node it lands on may lack
/// it: a freshly promoted replica, a node a slot just moved to).
const SCRIPT_LOADS: u32 = 3;

/// How long to wait for a connection and for an answer. The store-failure wrapper
/// (`tollgate_wrappers::FallbackStore`) applies its own, tighter per-call deadline on top; these
/// bound what a store without it waits.
///
/// ```
/// use std::time::Duration;
/// use tollgate_redis::ConnectionSettings;
///
/// let settings = ConnectionSettings {
///     response_timeout: Duration::from_millis(50),
///     ..ConnectionSettings::default()
/// };
/// assert_eq!(settings.connect_timeout, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// Deadline for opening a connection. Default 1 s.
    pub connect_timeout: Duration,
    /// Deadline for one answer. Default 1 s.
    pub response_timeout: Duration,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings {
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
        }
    }
}

/// A connection to one Redis server (redis-rs's `ConnectionManager`: multiplexed, reconnects
/// by itself after a failure) or to a Redis Cluster (redis-rs's async cluster client: follows
/// `MOVED`/`ASK` and failovers). Cloning is cheap and clones share the connection, so several
/// stores (different prefixes, say) can use one.
///
/// **Connecting never waits for Redis to be up.** The first attempt is made at once; if it
/// fails (nothing listening, a wrong password), the failure is logged at `error` on target
/// `tollgate::store` and attempts go on in a background task — pauses doubling from 100 ms to
/// 5 s, a failure logged at most once a minute — until one succeeds. Until then every call fails
/// with an unavailable [`StoreError`](tollgate_core::StoreError), which each rule's failure plan
/// handles (wrap the store in `FallbackStore`), so a gateway starts during an outage. Only a
/// malformed URL is an error. Connecting needs a tokio runtime.
///
/// ```no_run
/// # async fn run() -> Result<(), tollgate_redis::ConnectError> {
/// use tollgate_redis::RedisConnection;
///
/// let standalone = RedisConnection::connect("redis://127.0.0.1:6379/").await?;
/// let cluster = RedisConnection::connect_cluster(&[
///     "redis://10.0.0.1:6379/",
///     "redis://10.0.0.2:6379/",
/// ])
/// .await?;
/// assert!(cluster.is_cluster() && !standalone.is_cluster());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisConnection {
    backend: Backend,
    /// A second connection, made on the first call that waits for a replica: `WAIT` holds up
    /// every command behind it on its connection, so the other rules' checks never queue
    /// behind one.
    acknowledging: Arc<tokio::sync::OnceCell<Backend>>,
    /// What came of the waits for a replica, and which masters are not waited on for now.
    replica_acks: Arc<ReplicaAcks>,
    /// Its deadlines; the response timeout is also how long a call refused without running (a
    /// failover, a moved slot) is sent again.
    settings: ConnectionSettings,
    /// A cluster's slot map (which master serves each slot), read in the background.
    slots: Option<Arc<SlotMap>>,
    /// The URLs it was made from (a cluster's seed nodes): what a pub/sub subscriber dials.
    urls: Arc<[String]>,
}

#[derive(Clone)]
enum Backend {
    Standalone(Connecting<ConnectionManager>),
    Cluster(Connecting<ClusterConnection>),
}

impl Backend {
    /// A connection to one server (see [`RedisConnection::connect_with`]).
    async fn standalone(url: &str, settings: ConnectionSettings) -> Result<Self, ConnectError> {
        let client = redis::Client::open(url)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.response_timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let what = format!("redis at {}", client.get_connection_info().addr());
        let manager = Connecting::start(what, move || {
            ConnectionManager::new_with_config(client.clone(), config.clone())
        })
        .await;
        Ok(Backend::Standalone(manager))
    }

    /// A connection to a cluster through any of `nodes` (see
    /// [`RedisConnection::connect_cluster_with`]).
    async fn cluster(nodes: &[&str], settings: ConnectionSettings) -> Result<Self, ConnectError> {
        let what = format!("the redis cluster at {}", nodes.join(", "));
        // No retries inside the client: it would also resend a script whose connection dropped
        // after the script ran (charging twice). `invoke` retries only what never ran.
        let client = ClusterClientBuilder::new(nodes.to_vec())
            .connection_timeout(settings.connect_timeout)
            .response_timeout(settings.response_timeout)
            .retries(0)
            .build()?;
        let connection = Connecting::start(what, move || {
            let client = client.clone();
            async move { client.get_async_connection().await }
        })
        .await;
        Ok(Backend::Cluster(connection))
    }

    /// Runs one command (on a cluster, routed by its key).
    async fn query<T: FromRedisValue>(&self, command: &redis::Cmd) -> RedisResult<T> {
        match self {
            Backend::Standalone(manager) => {
                let manager = manager.get().ok_or_else(not_connected)?;
                command.query_async(&mut manager.clone()).await
            }
            Backend::Cluster(cluster) => {
                let cluster = cluster.get().ok_or_else(not_connected)?;
                command.query_async(&mut cluster.clone()).await
            }
        }
    }

    /// `WAIT 1 <ms>` on the connection that ran the last script for `slot` (on a cluster, the
    /// master serving it): how many replicas hold what it wrote.
    async fn wait_for_replica(&self, slot: u16, wait: Duration) -> RedisResult<i64> {
        let millis = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut command = redis::cmd("WAIT");
        command.arg(1).arg(millis);
        match self {
            Backend::Standalone(_) => self.query(&command).await,
            Backend::Cluster(cluster) => {
                let cluster = cluster.get().ok_or_else(not_connected)?;
                // Not the client's own routing for `WAIT` (every master, the least count): the
                // master the script ran on, by the same slot.
                let route = Route::new(slot, SlotAddr::Master);
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                let answer = cluster.clone().route_command(command, routing).await?;
                i64::from_redis_value(answer).map_err(Into::into)
            }
        }
    }

    fn is_connected(&self) -> bool {
        match self {
            Backend::Standalone(manager) => manager.get().is_some(),
            Backend::Cluster(cluster) => cluster.get().is_some(),
        }
    }
}

impl RedisConnection {
    /// Connects to one server with default [`ConnectionSettings`].
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Self::connect_with(url, ConnectionSettings::default()).await
    }

    /// Connects to one server. A malformed URL is an error; a server that cannot be reached
    /// (or refuses the credentials) is not: the connection is retried in the background (see
    /// the type's docs) and every call fails with an unavailable store error until it is up.
    pub async fn connect_with(
        url: &str,
        settings: ConnectionSettings,
    ) -> Result<Self, ConnectError> {
        let backend = Backend::standalone(url, settings).await?;
        Ok(Self::over(
            backend,
            settings,
            None,
            Arc::from([url.to_owned()]),
        ))
    }

    /// Connects to a Redis Cluster through any of its nodes, with default settings.
    pub async fn connect_cluster(nodes: &[impl AsRef<str>]) -> Result<Self, ConnectError> {
        Self::connect_cluster_with(nodes, ConnectionSettings::default()).await
    }

    /// Connects to a Redis Cluster through any of its nodes. Malformed URLs are an error; a
    /// cluster that cannot be reached is not: the connection is retried in the background, as
    /// for [`connect_with`](Self::connect_with).
    pub async fn connect_cluster_with(
        nodes: &[impl AsRef<str>],
        settings: ConnectionSettings,
    ) -> Result<Self, ConnectError> {
        let nodes: Vec<&str> = nodes.iter().map(AsRef::as_ref).collect();
        let urls: Arc<[String]> = nodes.iter().map(|url| (*url).to_owned()).collect();
        let backend = Backend::cluster(&nodes, settings).await?;
        let slots = Arc::new(SlotMap::default());
        if let Backend::Cluster(connection) = &backend {
            crate::slot_map::follow(connection.clone(), Arc::downgrade(&slots));
        }
        Ok(Self::over(backend, settings, Some(slots), urls))
    }

    fn over(
        backend: Backend,
        settings: ConnectionSettings,
        slots: Option<Arc<SlotMap>>,
        urls: Arc<[String]>,
    ) -> Self {
        RedisConnection {
            backend,
            acknowledging: Arc::default(),
            replica_acks: Arc::default(),
            settings,
            slots,
            urls,
        }
    }

    /// Whether this is a cluster connection (batches are split by hash slot).
    pub fn is_cluster(&self) -> bool {
        matches!(self.backend, Backend::Cluster(_))
    }

    /// The address (`host:port`) of the cluster master serving `slot`, as the slot map read
    /// last said (every second); `None` on one server, or before the map is read.
    pub fn node_serving(&self, slot: u16) -> Option<Arc<str>> {
        self.slots.as_ref()?.node_of(slot)
    }

    /// Runs one script execution: `EVALSHA`, loading the script on `NOSCRIPT` (up to
    /// [`SCRIPT_LOADS`] times, never counted as a redirection). A call the server refused
    /// without running it is sent again: after `MOVED` or a failover in progress
    /// (`CLUSTERDOWN`, `TRYAGAIN`, `MASTERDOWN`, `READONLY`, `LOADING`) to the slot's owner,
    /// paced 10 ms doubling to 200 ms, until the response timeout has passed; after `ASK` (a
    /// slot being migrated) to the node named, with `ASKING`. A call whose answer was lost is
    /// never sent again: the script may have run.
    pub(crate) async fn invoke<T: FromRedisValue>(&self, call: &ScriptCall) -> RedisResult<T> {
        invoke_on(&self.backend, call, self.settings.response_timeout).await
    }

    /// Runs one script execution as [`invoke`](Self::invoke) does, then waits at most `wait`
    /// for a replica of the master that ran it (the one serving `slot`) to hold what it wrote:
    /// `WAIT 1 <ms>`, on a connection kept for such calls. The wait is cut to end before
    /// `deadline` (when the caller stops waiting: 2 ms and a tenth of the time left before it,
    /// for the answer to travel back), and skipped when less than a millisecond is left.
    /// One `WAIT` at a time per master: checks whose scripts answered while one was on its way
    /// share the next (see `replica_ack.rs`). Whether a replica acknowledged is recorded in
    /// [`replica_acks`](Self::replica_acks), never an error: the script's answer stands. A
    /// master whose replica just missed an acknowledgement is not waited on for a second
    /// (checked again once the script has run, so checks queued behind the wait that missed do
    /// not wait in turn).
    pub(crate) async fn invoke_acknowledged<T: FromRedisValue>(
        &self,
        call: &ScriptCall,
        slot: u16,
        wait: Duration,
        deadline: std::time::Instant,
    ) -> RedisResult<T> {
        let node = self.node_serving(slot);
        if !self.replica_acks.waits_on(node.as_deref()) {
            let answer = self.invoke(call).await?;
            self.replica_acks.skipped();
            return Ok(answer);
        }
        let backend = self
            .acknowledging
            .get_or_try_init(|| self.another_backend())
            .await
            .map_err(|error| redis::RedisError::from(std::io::Error::other(error.to_string())))?;
        let answer = invoke_on(backend, call, self.settings.response_timeout).await?;
        let mine = self.replica_acks.script_answered();
        // Room for the answer to travel back: 2 ms and a tenth of what is left.
        let wait_left = |wait: Duration| {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let left = left.saturating_sub(Duration::from_millis(2) + left / 10);
            Duration::from_millis(u64::try_from(wait.min(left).as_millis()).unwrap_or(0))
        };
        // One `WAIT` at a time on this master, and one that went after this script answered
        // covers it.
        let gate = self.replica_acks.gate(node.as_deref());
        let Ok(mut covered) = tokio::time::timeout(wait_left(wait), gate.lock()).await else {
            self.replica_acks.skipped();
            return Ok(answer);
        };
        if *covered >= mine {
            self.replica_acks.covered();
            return Ok(answer);
        }
        let wait = wait_left(wait);
        if wait.is_zero() || !self.replica_acks.waits_on(node.as_deref()) {
            self.replica_acks.skipped();
            return Ok(answer);
        }
        let covering = self.replica_acks.answered_so_far();
        // Redis ends a `WAIT` on its own clock tick (`hz` 10: up to 100 ms late): stop waiting
        // at the wait itself, and let the server end it when it does.
        let replicas = tokio::time::timeout(wait, backend.wait_for_replica(slot, wait)).await;
        let acknowledged = matches!(replicas, Ok(Ok(replicas)) if replicas >= 1);
        if acknowledged {
            *covered = covering;
        }
        drop(covered);
        self.replica_acks
            .record(node.as_deref(), acknowledged, wait);
        Ok(answer)
    }

    /// A connection like this one (the one kept for calls that wait for a replica).
    async fn another_backend(&self) -> Result<Backend, ConnectError> {
        let urls: Vec<&str> = self.urls.iter().map(String::as_str).collect();
        match self.backend {
            Backend::Standalone(_) => Backend::standalone(urls[0], self.settings).await,
            Backend::Cluster(_) => Backend::cluster(&urls, self.settings).await,
        }
    }

    /// What came of the checks that asked a replica to hold their count
    /// ([`FleetModes::with_replica_ack`](tollgate_core::FleetModes::with_replica_ack)).
    pub fn replica_acks(&self) -> ReplicaAckStats {
        self.replica_acks.stats()
    }

    /// How long a call waits for its answer.
    pub(crate) fn response_timeout(&self) -> Duration {
        self.settings.response_timeout
    }

    /// The URLs it was made from: the server's, or the cluster's seed nodes.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Runs one command (on a cluster, routed by its key).
    pub async fn query<T: FromRedisValue>(&self, command: &redis::Cmd) -> RedisResult<T> {
        self.backend.query(command).await
    }

    /// Whether the connection has been established (it may still drop and come back later;
    /// redis-rs reconnects by itself once it exists).
    pub fn is_connected(&self) -> bool {
        self.backend.is_connected()
    }
}

/// [`RedisConnection::invoke`] on `backend`, sending refused calls again for `patience`.
async fn invoke_on<T: FromRedisValue>(
    backend: &Backend,
    call: &ScriptCall,
    patience: Duration,
) -> RedisResult<T> {
    let started = tokio::time::Instant::now();
    let mut pause = RETRY_PAUSE;
    let mut loads = 0;
    loop {
        // A resend waits only what is left of the patience: the whole call never waits much
        // past it (an answer that does not come in time may still run: it is never resent).
        let left = patience.saturating_sub(started.elapsed());
        let answer = match tokio::time::timeout(left, backend.query::<T>(&call.evalsha())).await {
            Ok(answer) => answer,
            Err(_) => return Err(timed_out()),
        };
        let Err(error) = answer else {
            return answer;
        };
        match error.kind() {
            // A node without the script: load it and send again. Not a redirection: it never
            // uses up the patience a failover gets.
            ErrorKind::Server(ServerErrorKind::NoScript) if loads < SCRIPT_LOADS => {
                loads += 1;
                backend.query::<redis::Value>(&ScriptCall::load()).await?;
            }
            ErrorKind::Server(ServerErrorKind::Ask) => return ask(backend, call, &error).await,
            _ if is_temporarily_refused(&error) => {
                // A failover or a moved slot: paced tries (the client learns the new slot map
                // meanwhile) until the response timeout; a `FallbackStore` around the store
                // cuts this at the rule's own, tighter deadline.
                if started.elapsed() + pause > patience {
                    return Err(error);
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_RETRY_PAUSE);
            }
            _ => return Err(error),
        }
    }
}

/// Sends `call` to the node an `ASK` redirection names, after `ASKING`, with the script's
/// source (that node may not have loaded it yet).
async fn ask<T: FromRedisValue>(
    backend: &Backend,
    call: &ScriptCall,
    redirection: &redis::RedisError,
) -> RedisResult<T> {
    let (Backend::Cluster(cluster), Some((address, _slot))) =
        (backend, redirection.redirect_node())
    else {
        return Err(redirection.clone());
    };
    let cluster = cluster.get().ok_or_else(not_connected)?;
    let (host, port) = address
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host.to_owned(), port.parse().ok()?)))
        .ok_or_else(|| redirection.clone())?;
    let mut pipeline = redis::pipe();
    pipeline.cmd("ASKING").add_command(call.eval());
    let route = SingleNodeRoutingInfo::ByAddress { host, port };
    let mut answers = cluster
        .clone()
        .route_pipeline(pipeline, 1, 1, route)
        .await?;
    let answer = answers.pop().ok_or_else(|| redirection.clone())?;
    T::from_redis_value(answer).map_err(Into::into)
}

/// The error of a call whose answer did not come within the response timeout.
fn timed_out() -> redis::RedisError {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "no answer within the response timeout",
    )
    .into()
}

/// The error of a call made before the first connection succeeded: an I/O error, so that it is
/// an unavailable store (the rule's failure plan applies).
fn not_connected() -> redis::RedisError {
    std::io::Error::new(
        std::io::ErrorKind::NotConnected,
        "not connected yet (connecting in the background)",
    )
    .into()
}

impl std::fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_cluster() {
            "cluster"
        } else {
            "standalone"
        };
        f.debug_struct("RedisConnection")
            .field("kind", &kind)
            .field("connected", &self.is_connected())
            .finish()
    }
}
