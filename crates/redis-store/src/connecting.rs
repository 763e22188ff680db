//! Connecting in the background: a store can be built while Redis is down, so a gateway starts
//! during an outage and its rules' failure plans apply until Redis is back.

use std::future::Future;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use redis::RedisError;
use tokio::time::Instant;

/// The first pause between connection attempts; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// The longest pause between connection attempts.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// How often a failing connection is logged at most.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// A connection that exists once an attempt succeeds. Clones share it.
pub(crate) struct Connecting<T> {
    established: Arc<OnceLock<T>>,
}

impl<T> Clone for Connecting<T> {
    fn clone(&self) -> Self {
        Connecting {
            established: Arc::clone(&self.established),
        }
    }
}

impl<T: Send + Sync + 'static> Connecting<T> {
    /// Tries `connect` once now; if that fails, logs the failure at `error` and keeps trying
    /// in a background task (pauses doubling from 100 ms to 5 s, a failure logged at most once
    /// a minute) until an attempt succeeds. `what` names the target in the log.
    pub(crate) async fn start<F, Fut>(what: String, connect: F) -> Self
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, RedisError>> + Send,
    {
        let established = Arc::new(OnceLock::new());
        match connect().await {
            Ok(connection) => {
                let _ = established.set(connection);
            }
            Err(error) => {
                log_failure(&what, &error);
                let target = Arc::downgrade(&established);
                tokio::spawn(async move { retry(what, connect, target).await });
            }
        }
        Connecting { established }
    }

    /// The connection, once established.
    pub(crate) fn get(&self) -> Option<&T> {
        self.established.get()
    }
}

/// Tries again until an attempt succeeds or every clone of the connection is gone (then the
/// task ends: a store dropped while its Redis is unreachable leaves nothing running).
async fn retry<T, F, Fut>(what: String, connect: F, target: Weak<OnceLock<T>>)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, RedisError>>,
{
    let mut pause = FIRST_PAUSE;
    let mut logged = Instant::now();
    loop {
        tokio::time::sleep(pause).await;
        if target.strong_count() == 0 {
            return;
        }
        match connect().await {
            Ok(connection) => {
                if let Some(target) = target.upgrade() {
                    let _ = target.set(connection);
                }
                tracing::info!(target: "tollgate::store", "connected to {what}");
                return;
            }
            Err(error) => {
                if logged.elapsed() >= LOG_EVERY {
                    log_failure(&what, &error);
                    logged = Instant::now();
                }
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
}

fn log_failure(what: &str, error: &RedisError) {
    tracing::error!(
        target: "tollgate::store",
        error = %error,
        "cannot connect to {what}; retrying in the background, every call fails as the rules \
         plan for a store failure until then"
    );
}
