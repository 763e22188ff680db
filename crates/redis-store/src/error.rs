//! Redis errors as store errors: the rule's failure policy decides what they mean.

use redis::{ErrorKind, RedisError, ServerErrorKind};
use tollgate_core::{StoreError, StoreErrorKind, Timestamp};

/// A redis-rs error as a [`StoreError`]: timeouts as timeouts (and a script that started
/// after its caller's deadline, `TOLLGATE_LATE`, charging nothing), anything that means "cannot
/// reach or use the server now" (connection errors, a cluster in failover, a server loading,
/// busy or out of memory, a node still without the script after it was loaded) as unavailable, anything else (a script error, a wrong type) as a
/// protocol error. A script whose "now" was past the supported range (`TOLLGATE_TIME`, having
/// touched nothing) is [`time_out_of_range`](StoreError::time_out_of_range), as every store
/// answers it.
pub(crate) fn store_error(error: &RedisError) -> StoreError {
    if error.code() == Some("TOLLGATE_TIME") {
        // "now" leads the message: a whole number of µs, which may pass u64 (read as its end).
        let now = error
            .detail()
            .and_then(|detail| detail.split_whitespace().next())
            .map_or(u64::MAX, |now| now.parse().unwrap_or(u64::MAX));
        return StoreError::time_out_of_range(Timestamp::from_micros(now));
    }
    let kind = if error.is_timeout() || error.code() == Some("TOLLGATE_LATE") {
        StoreErrorKind::Timeout
    } else if error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_cluster_error()
        || error.is_unrecoverable_error()
        || is_temporarily_refused(error)
        || error.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
    {
        StoreErrorKind::Unavailable
    } else {
        StoreErrorKind::Protocol
    };
    StoreError::new(kind, format!("redis: {error}"))
}

/// Whether the server refused the command **without running it**, for a reason that passes
/// (a moved slot, a failover, loading, another script running, memory full; `ASK` and
/// `NOSCRIPT` are handled where scripts are sent). Only such calls
/// may be sent again: a script whose answer was lost may have run, and running it twice would
/// charge (or refund) twice.
pub(crate) fn is_temporarily_refused(error: &RedisError) -> bool {
    match error.kind() {
        ErrorKind::Server(
            ServerErrorKind::Moved
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly
            | ServerErrorKind::BusyLoading,
        ) => true,
        _ => matches!(error.code(), Some("BUSY" | "OOM")),
    }
}

/// Why a [`RedisStore`](crate::RedisStore) could not be built.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use tollgate_redis::RedisStore;
///
/// // The prefix is checked before any connection is tried.
/// let error = RedisStore::builder()
///     .prefix("chirp{limits}")
///     .connect("redis://127.0.0.1:1/")
///     .await
///     .expect_err("braces would inject a hash tag");
/// assert!(error.is_invalid_prefix());
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The prefix is not 1 to 64 bytes of `A-Z a-z 0-9 _ - . :`.
    #[error("invalid key prefix {0:?}: use 1 to 64 bytes of A-Z a-z 0-9 _ - . :")]
    InvalidPrefix(String),
    /// The URL is malformed. (A server that cannot be reached is not an error: the store
    /// connects in the background.)
    #[error("invalid redis address: {0}")]
    Redis(#[from] redis::RedisError),
}

impl ConnectError {
    /// The prefix was refused.
    pub fn is_invalid_prefix(&self) -> bool {
        matches!(self, ConnectError::InvalidPrefix(_))
    }

    /// The URL was malformed.
    pub fn is_redis(&self) -> bool {
        matches!(self, ConnectError::Redis(_))
    }
}
