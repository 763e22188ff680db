//! Redis errors as store errors: the rule's failure policy decides what they mean.

use tollgate_core::{StoreError, StoreErrorKind};

/// A redis-rs error as a [`StoreError`]: timeouts as timeouts, anything that means "cannot
/// reach or use the server" as unavailable, anything else (a script error, a wrong type) as a
/// protocol error.
pub(crate) fn store_error(error: &redis::RedisError) -> StoreError {
    let kind = if error.is_timeout() {
        StoreErrorKind::Timeout
    } else if error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_cluster_error()
        || error.is_unrecoverable_error()
    {
        StoreErrorKind::Unavailable
    } else {
        StoreErrorKind::Protocol
    };
    StoreError::new(kind, format!("redis: {error}"))
}

/// Why a [`RedisStore`](crate::RedisStore) could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The prefix is not 1 to 64 bytes of `A-Z a-z 0-9 _ - . :`.
    #[error("invalid key prefix {0:?}: use 1 to 64 bytes of A-Z a-z 0-9 _ - . :")]
    InvalidPrefix(String),
    /// The URL is malformed, or the server could not be reached.
    #[error("cannot connect to redis: {0}")]
    Redis(#[from] redis::RedisError),
}
