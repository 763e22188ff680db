//! Building a [`FallbackStore`]: the timeout, the circuit breaker and the local store.

use std::sync::Arc;
use std::time::Duration;

use super::FallbackStore;
use super::alarm::Alarm;
use super::nodes::Breakers;
use tollgate_core::{Clock, MemoryStore, MemoryStoreBuilder, Store, SystemClock};

/// How long a [`FallbackStore`] waits for its primary by default: 5 ms.
///
/// A Redis server in the same data centre answers a rate-limit script in well under a
/// millisecond, a few at a slow percentile. Five milliseconds lets those through and still
/// bounds what a struggling store adds to every request to a few milliseconds, which is the most
/// a limiter in front of real work should cost; slower answers are treated as the store being
/// down. Raise it for a store further away.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(5);

/// How many failures in a row open a [`FallbackStore`]'s circuit breaker by default: 5.
///
/// One slow answer or a dropped connection (a failover, a pause) should not move the whole
/// gateway to local counting; five in a row, with no success between, means the store is down.
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 5;

/// How long a [`FallbackStore`]'s open circuit breaker waits before probing by default: 1 s.
///
/// Short enough that counting returns to the shared store about a second after it recovers;
/// long enough that a store that is down sees only one probe a second from each gateway.
pub const DEFAULT_COOL_DOWN: Duration = Duration::from_secs(1);

/// Builds a [`FallbackStore`].
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::MemoryStore;
/// use tollgate_wrappers::FallbackStore;
///
/// # let primary = MemoryStore::new();
/// let store = FallbackStore::builder(primary)
///     .timeout(Duration::from_millis(20)) // a store in another zone
///     .failure_threshold(3)
///     .cool_down(Duration::from_millis(500))
///     .local_max_keys(100_000)
///     .build();
/// assert_eq!(store.timeout(), Duration::from_millis(20));
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct FallbackStoreBuilder<P, C = SystemClock> {
    primary: P,
    local: MemoryStoreBuilder<C>,
    timeout: Duration,
    failure_threshold: u32,
    cool_down: Duration,
    /// The `store` label metrics are recorded under, when they are on.
    metrics: Option<&'static str>,
}

impl<P: Store> FallbackStore<P, SystemClock> {
    /// Starts building a store around `primary`.
    pub fn builder(primary: P) -> FallbackStoreBuilder<P, SystemClock> {
        FallbackStoreBuilder {
            primary,
            local: MemoryStore::builder(),
            timeout: DEFAULT_TIMEOUT,
            failure_threshold: DEFAULT_FAILURE_THRESHOLD,
            cool_down: DEFAULT_COOL_DOWN,
            metrics: None,
        }
    }
}

impl<P, C> FallbackStoreBuilder<P, C> {
    /// How long each call waits for the primary (default [`DEFAULT_TIMEOUT`]); a call that
    /// takes longer fails with a [`StoreError`](tollgate_core::StoreError) that
    /// [`is_timeout`](tollgate_core::StoreError::is_timeout). Zero fails every answer that is not ready
    /// at once.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many failures in a row open the circuit breaker (default
    /// [`DEFAULT_FAILURE_THRESHOLD`]; at least 1). Any success starts the count again.
    pub fn failure_threshold(mut self, failures: u32) -> Self {
        self.failure_threshold = failures.max(1);
        self
    }

    /// How long the open breaker keeps calls from the primary before letting one probe through
    /// (default [`DEFAULT_COOL_DOWN`]), measured on the store's clock.
    pub fn cool_down(mut self, cool_down: Duration) -> Self {
        self.cool_down = cool_down;
        self
    }

    /// The most keys the local store holds (default
    /// [`DEFAULT_MAX_KEYS`](tollgate_core::DEFAULT_MAX_KEYS)); see [`MemoryStore`] for what happens at
    /// the bound.
    pub fn local_max_keys(mut self, max_keys: usize) -> Self {
        self.local = self.local.max_keys(max_keys);
        self
    }

    /// The clock the local store counts by and the breaker times its cool-down by (tests use
    /// `tollgate_testing::ManualClock`). The primary keeps its own clock; the timeout runs on Tokio's.
    pub fn clock<D: Clock>(self, clock: D) -> FallbackStoreBuilder<P, D> {
        FallbackStoreBuilder {
            primary: self.primary,
            local: self.local.clock(clock),
            timeout: self.timeout,
            failure_threshold: self.failure_threshold,
            cool_down: self.cool_down,
            metrics: self.metrics,
        }
    }

    /// Records metrics through the `metrics` facade (feature `metrics`), labelled
    /// `store = <store>` where they concern the primary: `tollgate_store_seconds`,
    /// `tollgate_store_errors_total`, `tollgate_breaker_open`, `tollgate_fallback_active` and
    /// `tollgate_fallback_decisions_total` (see [`tollgate_core::metrics`]). Install the recorder first.
    #[cfg(feature = "metrics")]
    pub fn metrics(mut self, store: &'static str) -> Self {
        self.metrics = Some(store);
        self
    }

    /// Builds the store.
    pub fn build(self) -> FallbackStore<P, C>
    where
        P: Store,
        C: Clock,
    {
        FallbackStore {
            primary: self.primary,
            local: self.local.build(),
            timeout: self.timeout,
            cool_down: self.cool_down,
            breakers: Arc::new(Breakers::new(self.failure_threshold, self.cool_down)),
            counters: Arc::default(),
            announcer: Arc::default(),
            alarm: Arc::new(Alarm::new(self.metrics)),
            #[cfg(feature = "metrics")]
            metrics: self
                .metrics
                .map(|store| Arc::new(super::store_metrics::StoreMetrics::new(store))),
        }
    }
}
