//! Whether the store answers: what `GET /v1/health` and the status page report.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tollgate_core::{Clock, Item, Key, MemoryStore, Quota, RuleId, Store};
use tollgate_wrappers::{FallbackStore, FleetStore};
use utoipa::ToSchema;

/// How long a probe waits for the store.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// What a store says of itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema)]
#[non_exhaustive]
pub struct StoreReport {
    /// Whether the store (the primary, behind a `FallbackStore`) answered a probe just now.
    pub reachable: bool,
    /// How long the probe took, in milliseconds.
    pub latency_ms: Option<f64>,
    /// Why it did not answer.
    pub error: Option<String>,
    /// Whether a `FallbackStore`'s circuit breaker is open (`None`: the store has none).
    pub breaker_open: Option<bool>,
    /// The rules a `FallbackStore` answers by their failure policies right now.
    pub falling_back: Vec<String>,
    /// The nodes of a `FallbackStore`'s primary whose circuit breaker is open right now (a
    /// Redis Cluster master, by address): only the keys they serve fall back.
    pub failing_nodes: Vec<String>,
    /// Synced rules a `FleetStore` counts exactly right now: the fleet syncing them is too
    /// large for their limit to keep sync's bound (`FleetStore::counted_exactly`).
    pub counted_exactly: Vec<String>,
}

/// A store that can say whether it is healthy: implemented for the stores tollgate ships
/// (`MemoryStore`, `FallbackStore`, `FleetStore`, `RedisStore` with feature `redis`, and `Arc`s
/// of them);
/// a store of your own implements it with [`probe`].
///
/// ```
/// use tollgate_admin::{StoreHealth, StoreReport, probe};
/// # use std::future::Future;
/// # use tollgate_core::{BatchDecision, Decision, Item, Key, Receipt, RefundError, RuleId, Store, StoreError};
/// # #[derive(Clone)] struct MyStore;
/// # impl Store for MyStore {
/// #   fn check(&self, _: &[Item<'_>]) -> impl Future<Output = Result<BatchDecision, StoreError>> + Send { std::future::ready(Err(StoreError::unavailable("x"))) }
/// #   fn peek(&self, _: &Item<'_>) -> impl Future<Output = Result<Decision, StoreError>> + Send { std::future::ready(Err(StoreError::unavailable("x"))) }
/// #   fn refund(&self, _: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send { std::future::ready(Ok(())) }
/// #   fn reset(&self, _: &RuleId, _: &Key) -> impl Future<Output = Result<(), StoreError>> + Send { std::future::ready(Ok(())) }
/// # }
///
/// impl StoreHealth for MyStore {
///     fn health(&self) -> impl Future<Output = StoreReport> + Send {
///         probe(self)
///     }
/// }
/// ```
pub trait StoreHealth: Send + Sync + 'static {
    /// Probes the store and reports.
    fn health(&self) -> impl Future<Output = StoreReport> + Send;
}

/// Probes `store` with one read (a `peek` of a key no rule uses), waiting at most a second.
pub async fn probe<S: Store>(store: &S) -> StoreReport {
    let (Ok(rule), Ok(quota)) = (
        RuleId::new("tollgate-admin-probe"),
        Quota::fixed_window(1, Duration::from_secs(1)),
    ) else {
        return StoreReport::default();
    };
    let key = Key::new("tollgate-admin-probe");
    let started = Instant::now();
    let answer =
        tokio::time::timeout(PROBE_TIMEOUT, store.peek(&Item::new(&rule, quota, &key))).await;
    let latency = started.elapsed().as_secs_f64() * 1_000.0;
    match answer {
        Ok(Ok(_)) => StoreReport {
            reachable: true,
            latency_ms: Some(latency),
            ..StoreReport::default()
        },
        Ok(Err(error)) => StoreReport {
            error: Some(error.to_string()),
            latency_ms: Some(latency),
            ..StoreReport::default()
        },
        Err(_) => StoreReport {
            error: Some(format!("no answer within {} ms", PROBE_TIMEOUT.as_millis())),
            ..StoreReport::default()
        },
    }
}

impl<C: Clock> StoreHealth for MemoryStore<C> {
    fn health(&self) -> impl Future<Output = StoreReport> + Send {
        std::future::ready(StoreReport {
            reachable: true,
            latency_ms: Some(0.0),
            ..StoreReport::default()
        })
    }
}

impl<P: Store + StoreHealth, C: Clock> StoreHealth for FallbackStore<P, C> {
    async fn health(&self) -> StoreReport {
        let mut report = self.primary().health().await;
        report.breaker_open = Some(self.stats().breaker_open);
        report.falling_back = self
            .falling_back()
            .iter()
            .map(|rule| rule.as_str().to_owned())
            .collect();
        report.failing_nodes = self
            .failing_nodes()
            .iter()
            .map(|node| node.to_string())
            .collect();
        report
    }
}

impl<S: Store + StoreHealth, C: Clock + Clone> StoreHealth for FleetStore<S, C> {
    async fn health(&self) -> StoreReport {
        let mut report = self.shared().health().await;
        report.counted_exactly = self
            .counted_exactly()
            .into_iter()
            .map(|(rule, _)| rule.as_str().to_owned())
            .collect();
        report
    }
}

impl<S: StoreHealth> StoreHealth for Arc<S> {
    fn health(&self) -> impl Future<Output = StoreReport> + Send {
        (**self).health()
    }
}

#[cfg(feature = "redis")]
impl StoreHealth for tollgate_redis::RedisStore {
    fn health(&self) -> impl Future<Output = StoreReport> + Send {
        probe(self)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tollgate_core::{Counting, FleetModes, Item, Key, MemoryStore, Quota, RuleId};
    use tollgate_core::{Store, SyncSettings, Timestamp};
    use tollgate_testing::ManualClock;
    use tollgate_wrappers::FleetStore;

    use super::StoreHealth;

    /// Ten gateways syncing a rule whose limit (50) is below 10 × 10: once they have learnt
    /// the fleet, each one's health report names the rule as counted exactly.
    #[tokio::test]
    async fn the_health_report_names_the_rules_a_fleet_store_counts_exactly() {
        let clock = ManualClock::new(Timestamp::from_secs(1_800_000_000));
        let shared = MemoryStore::builder().clock(clock.clone()).build();
        let fleet: Vec<_> = (0..10)
            .map(|_| FleetStore::with_clock(shared.clone(), clock.clone()))
            .collect();
        let (rule, key) = (RuleId::new("tight").expect("valid"), Key::new("acme"));
        let sync = Counting::Sync(SyncSettings::new().every(Duration::from_millis(100)));
        let quota = Quota::fixed_window(50, Duration::from_secs(3_600)).expect("valid");
        let item =
            Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_counting(sync));
        assert!(fleet[0].health().await.counted_exactly.is_empty());
        for _ in 0..3 {
            for gateway in &fleet {
                let _ = gateway.check(&[item]).await.expect("answers");
            }
            clock.advance(Duration::from_millis(100));
            for gateway in &fleet {
                gateway.tick().await;
            }
        }
        let report = fleet[0].health().await;
        assert!(report.reachable);
        assert_eq!(report.counted_exactly, vec!["tight".to_owned()]);
    }
}
