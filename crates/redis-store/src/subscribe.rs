//! A pub/sub subscription with a deadline: what the reset follower (and tollgate-published's rule
//! follower) dial.

use std::time::Duration;

/// A subscription to `channel` on the server at `url` (on a cluster, any node hears every
/// `PUBLISH`), given up with a `TimedOut` error after `timeout`.
///
/// ```no_run
/// # async fn run() -> redis::RedisResult<()> {
/// use std::time::Duration;
///
/// let messages = tollgate_redis::subscribe("redis://127.0.0.1:6379/", "news", Duration::from_secs(1)).await?;
/// # drop(messages); Ok(()) }
/// ```
pub async fn subscribe(
    url: &str,
    channel: &str,
    timeout: Duration,
) -> redis::RedisResult<redis::aio::PubSubStream> {
    let client = redis::Client::open(url)?;
    let connect = async {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        Ok::<_, redis::RedisError>(pubsub.into_on_message())
    };
    tokio::time::timeout(timeout, connect).await.map_err(|_| {
        redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "subscribing timed out",
        ))
    })?
}
