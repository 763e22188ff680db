//! Building a [`RedisStore`]: prefix, connection, and (in tests) where "now" comes from.

use std::sync::Arc;

#[cfg(feature = "testing")]
use tollgate_core::Clock;

use crate::layout::{KeyLayout, is_valid_prefix};
use crate::store::{Inner, TimeSource};
use crate::{ConnectError, ConnectionSettings, RedisConnection, RedisStore};

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "tg";

/// Builds a [`RedisStore`]; start with [`RedisStore::builder`].
///
/// ```no_run
/// # async fn run() -> Result<(), tollgate_redis::ConnectError> {
/// use std::time::Duration;
/// use tollgate_redis::{ConnectionSettings, RedisStore};
///
/// let store = RedisStore::builder()
///     .prefix("chirp:limits")
///     .settings(ConnectionSettings {
///         connect_timeout: Duration::from_millis(500),
///         response_timeout: Duration::from_millis(50),
///     })
///     .connect("redis://127.0.0.1:6379/")
///     .await?;
/// # let _ = store; Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisStoreBuilder {
    prefix: String,
    settings: ConnectionSettings,
    time: TimeSource,
}

impl Default for RedisStoreBuilder {
    fn default() -> Self {
        RedisStoreBuilder {
            prefix: DEFAULT_PREFIX.to_owned(),
            settings: ConnectionSettings::default(),
            time: TimeSource::Server,
        }
    }
}

impl RedisStoreBuilder {
    /// The prefix of every stored key (default `tg`): 1 to 64 bytes of `A-Z a-z 0-9 _ - . :`.
    /// Stores with different prefixes never see each other's counts.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Connection and answer deadlines for [`connect`](Self::connect) and
    /// [`connect_cluster`](Self::connect_cluster).
    pub fn settings(mut self, settings: ConnectionSettings) -> Self {
        self.settings = settings;
        self
    }

    /// **Tests only**: pass this clock's "now" to the script instead of reading Redis `TIME`,
    /// so a manual clock can move time (a minute idle, a window boundary) without sleeping.
    /// Keys then live an hour longer than they need to, so a slow test never loses state.
    /// Never use this in production: gateways' clocks disagree, the server's does not.
    #[cfg(feature = "testing")]
    pub fn test_clock(mut self, clock: impl Clock) -> Self {
        self.time = TimeSource::Client(Arc::new(clock));
        self
    }

    /// Connects to one Redis server and builds the store.
    pub async fn connect(self, url: &str) -> Result<RedisStore, ConnectError> {
        self.check_prefix()?;
        let connection = RedisConnection::connect_with(url, self.settings).await?;
        self.build(connection)
    }

    /// Connects to a Redis Cluster through any of its nodes and builds the store.
    pub async fn connect_cluster(
        self,
        nodes: &[impl AsRef<str>],
    ) -> Result<RedisStore, ConnectError> {
        self.check_prefix()?;
        let connection = RedisConnection::connect_cluster_with(nodes, self.settings).await?;
        self.build(connection)
    }

    /// Builds the store on an existing connection (shared with other stores).
    pub fn build(self, connection: RedisConnection) -> Result<RedisStore, ConnectError> {
        self.check_prefix()?;
        Ok(RedisStore {
            inner: Arc::new(Inner {
                connection,
                layout: KeyLayout::new(self.prefix),
                time: self.time,
                server_clock: crate::server_clock::ServerClock::new(),
            }),
        })
    }

    fn check_prefix(&self) -> Result<(), ConnectError> {
        if is_valid_prefix(&self.prefix) {
            Ok(())
        } else {
            Err(ConnectError::InvalidPrefix(self.prefix.clone()))
        }
    }
}
