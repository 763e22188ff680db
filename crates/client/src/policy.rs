//! What a client retries and how patiently: the statuses, the cap on a server's wait, the
//! attempts, which requests are safe to repeat, the body it will buffer, the jitter and backoff,
//! the retry budget and the shared cool-downs.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use tower::retry::budget::TpsBudget;

use crate::{Backoff, CoolDowns, Jitter};

/// What to do with a request to a host that is cooling down (it said "wait" a moment ago).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WhenCooling {
    /// Wait until the host's time (plus jitter), then send (the default).
    #[default]
    Wait,
    /// Fail at once with [`CoolingDown`](crate::CoolingDown), without sending.
    FailFast,
}

/// How a [`RetryAfterLayer`](crate::RetryAfterLayer) or
/// [`RetryAfterMiddleware`](crate::RetryAfterMiddleware) retries. Cloning shares the budget and
/// the cool-down table, so every clone of a client counts together.
///
/// Defaults: retry `429` and `503`; wait what the server says (`Retry-After`, else the
/// `RateLimit` field's `t=`) plus up to 10 % (at most 1 s) of jitter, or, with no hint,
/// exponential backoff from 100 ms to 10 s with full jitter; give up at once when the server's
/// wait is above 60 s; at most 3 retries; only idempotent methods (`GET`, `HEAD`, `OPTIONS`,
/// `PUT`, `DELETE`, `TRACE`) or requests with an `Idempotency-Key`; bodies up to 64 KiB
/// buffered to be sent again (larger or streaming ones are sent once); a budget of 20 % of
/// requests plus 10 retries a second over 10 s; cool-downs for at most 4,096 hosts and routes.
///
/// ```
/// use std::time::Duration;
/// use tollgate_client::{RetryPolicy, WhenCooling};
///
/// let policy = RetryPolicy::default()
///     .max_wait(Duration::from_secs(30))
///     .max_retries(5)
///     .when_cooling(WhenCooling::FailFast);
/// assert_eq!(policy.wait_cap(), Duration::from_secs(30));
/// ```
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub(crate) statuses: Vec<StatusCode>,
    pub(crate) max_wait: Duration,
    pub(crate) max_retries: u32,
    pub(crate) jitter: Jitter,
    pub(crate) backoff: Backoff,
    pub(crate) idempotent_only: bool,
    pub(crate) max_body: usize,
    pub(crate) when_cooling: WhenCooling,
    pub(crate) budget: Arc<TpsBudget>,
    pub(crate) cool_downs: CoolDowns,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            statuses: vec![
                StatusCode::TOO_MANY_REQUESTS,
                StatusCode::SERVICE_UNAVAILABLE,
            ],
            max_wait: Duration::from_secs(60),
            max_retries: 3,
            jitter: Jitter::default(),
            backoff: Backoff::default(),
            idempotent_only: true,
            max_body: 64 * 1024,
            when_cooling: WhenCooling::Wait,
            budget: Arc::new(TpsBudget::new(Duration::from_secs(10), 10, 0.2)),
            cool_downs: CoolDowns::default(),
        }
    }
}

impl RetryPolicy {
    /// The statuses that are retried (default `429` and `503`).
    #[must_use]
    pub fn statuses(mut self, statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        self.statuses = statuses.into_iter().collect();
        self
    }

    /// The longest server wait honoured (default 60 s): a response asking for longer is
    /// returned at once, as it is.
    #[must_use]
    pub fn max_wait(mut self, cap: Duration) -> Self {
        self.max_wait = cap;
        self
    }

    /// How many times one request is sent again at most (default 3).
    #[must_use]
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// The jitter added to a server's wait (default 10 %, at most 1 s; [`Jitter::NONE`] for
    /// none).
    #[must_use]
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// The backoff when the server gives no wait (default 100 ms doubling to 10 s).
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Whether only requests safe to repeat are retried (default true): idempotent methods, or
    /// any request carrying an `Idempotency-Key` header. False retries every method.
    #[must_use]
    pub fn idempotent_only(mut self, only: bool) -> Self {
        self.idempotent_only = only;
        self
    }

    /// The largest body buffered to be sent again (default 64 KiB); a larger body, or one whose
    /// size is not known up front (streaming), is sent once and never retried — by the tower
    /// layer and the reqwest middleware alike.
    #[must_use]
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// What a request to a cooling host does (default: waits).
    #[must_use]
    pub fn when_cooling(mut self, when: WhenCooling) -> Self {
        self.when_cooling = when;
        self
    }

    /// The retry budget: retries stay at or below `retry_percent` × requests + `min_per_sec` ×
    /// `ttl`, counted over the last `ttl` (tower's `TpsBudget`; default 10 s, 10 a second,
    /// 20 %). A retry the budget refuses returns the response as it is. `ttl` is kept within 1
    /// to 60 s and `retry_percent` within 0 to 1,000 % (`0.2` is 20 %), the ranges tower takes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_client::RetryPolicy;
    /// // No retries at all beyond one per ten requests, and none to start with.
    /// let strict = RetryPolicy::default().budget(Duration::from_secs(10), 0, 0.1);
    /// // Out of tower's range: clamped, not a panic.
    /// let clamped = RetryPolicy::default().budget(Duration::ZERO, u32::MAX, f32::NAN);
    /// # let _ = (strict, clamped);
    /// ```
    #[must_use]
    pub fn budget(mut self, ttl: Duration, min_per_sec: u32, retry_percent: f32) -> Self {
        let ttl = ttl.clamp(Duration::from_secs(1), Duration::from_secs(60));
        let min_per_sec = min_per_sec.min(i32::MAX as u32 - 1);
        let retry_percent = if retry_percent.is_finite() {
            retry_percent.clamp(0.0, 1_000.0)
        } else {
            0.0
        };
        self.budget = Arc::new(TpsBudget::new(ttl, min_per_sec, retry_percent));
        self
    }

    /// The cool-down table (default: its own, 4,096 entries): give several clients one table
    /// to make them wait together.
    #[must_use]
    pub fn cool_downs(mut self, table: CoolDowns) -> Self {
        self.cool_downs = table;
        self
    }

    /// The longest server wait honoured.
    pub fn wait_cap(&self) -> Duration {
        self.max_wait
    }

    /// The shared cool-down table.
    pub fn cool_down_table(&self) -> &CoolDowns {
        &self.cool_downs
    }

    /// Whether `status` is retried.
    pub(crate) fn retries(&self, status: StatusCode) -> bool {
        self.statuses.contains(&status)
    }

    /// Whether a request with `method` (and an `Idempotency-Key` or not) may be sent again.
    pub(crate) fn may_repeat(&self, method: &Method, has_idempotency_key: bool) -> bool {
        !self.idempotent_only || method.is_idempotent() || has_idempotency_key
    }
}
