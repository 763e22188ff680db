//! The quota service: Envoy's `StreamRateLimitQuotas`, on a rate limit service's store and
//! rules.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::RateLimitQuotaServiceServer;
use tollgate_core::{Clock, DynStore, SystemClock, Timestamp};

use super::assignment;
use super::settings::{Settings, whole_seconds};
use crate::observe;
use crate::table::DescriptorTable;

/// Envoy's rate limit quota service (RLQS, `envoy.service.rate_limit_quota.v3`), answering the
/// `rate_limit_quota` filter's usage reports with assignments leased from a
/// [`RateLimitService`](crate::RateLimitService)'s store, by the same rule file: made by
/// [`RateLimitService::quota_service`](crate::RateLimitService::quota_service), it follows every
/// rule file that service installs or watches. Mount [`server`](Self::server) next to the rate
/// limit service's. How buckets are matched, leased and bounded is in the [module's
/// docs](crate::rlqs).
///
/// ```
/// use std::time::Duration;
/// use tollgate_config::{Extractors, RuleFile};
/// use tollgate_core::MemoryStore;
/// use tollgate_envoy::RateLimitService;
///
/// let rules = RuleFile::parse("rules.toml", r#"
/// [[rule]]
/// id = "per-user"
/// envoy = { domain = "edge", descriptor = [{ key = "user" }] }
/// algorithm = "fixed_window"
/// limit = 100
/// window = "1m"
/// "#, &Extractors::new())?;
/// let limits = RateLimitService::new(MemoryStore::new());
/// limits.set_rules(&rules)?;
/// let quotas = limits
///     .quota_service()
///     .with_assignment_ttl(Duration::from_secs(6))
///     .with_leases_per_limit(20); // leases of at most 5 of the 100
/// assert_eq!(quotas.assignment_ttl(), Duration::from_secs(6));
/// assert_eq!(quotas.leases_per_limit(), 20);
/// // Mount both: tonic::transport::Server::builder()
/// //     .add_service(limits.server()).add_service(quotas.server())
/// let _server = quotas.server();
/// # Ok::<(), tollgate_config::ConfigErrors>(())
/// ```
#[derive(Clone)]
pub struct QuotaService {
    store: DynStore,
    table: Arc<ArcSwap<DescriptorTable>>,
    settings: Settings,
    clock: Arc<dyn Clock>,
    sent: Arc<AtomicU64>,
}

impl std::fmt::Debug for QuotaService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuotaService")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl QuotaService {
    /// A quota service counting in `store` by the rules `table` holds.
    pub(crate) fn new(store: DynStore, table: Arc<ArcSwap<DescriptorTable>>) -> QuotaService {
        QuotaService {
            store,
            table,
            settings: Settings::default(),
            clock: Arc::new(SystemClock::new()),
            sent: Arc::new(AtomicU64::new(0)),
        }
    }

    /// How long each assignment lasts (default 15 s), as whole seconds, at least one: Envoy
    /// 1.40 reads only the seconds of `assignment_time_to_live`. Envoy must report each bucket
    /// at least every half of it (its `reporting_interval`): an assignment is renewed at the
    /// first report in the second half of its life, and one that lapses puts the bucket back
    /// on Envoy's own `expired_assignment_behavior` (else `no_assignment_behavior`) until the
    /// next report. A longer one strands more of a token bucket's refill (see the bound).
    #[must_use]
    pub fn with_assignment_ttl(mut self, ttl: Duration) -> Self {
        self.settings.ttl = whole_seconds(ttl);
        self
    }

    /// How long each assignment lasts.
    pub fn assignment_ttl(&self) -> Duration {
        self.settings.ttl
    }

    /// A lease is at most ⌈C / `leases`⌉ units of a limit C (default 10; at least 1: a whole
    /// limit per lease). Larger leases mean fewer store calls and a looser fleet-wide bound.
    #[must_use]
    pub fn with_leases_per_limit(mut self, leases: u64) -> Self {
        self.settings.leases_per_limit = leases.max(1);
        self
    }

    /// A lease is at most ⌈C / this⌉ units of a limit C.
    pub fn leases_per_limit(&self) -> u64 {
        self.settings.leases_per_limit
    }

    /// A bucket whose reports show no request for this long (default 1 minute) is abandoned:
    /// Envoy forgets it and stops reporting it, and this service forgets it too.
    #[must_use]
    pub fn with_abandon_after(mut self, idle: Duration) -> Self {
        self.settings.abandon_after = idle;
        self
    }

    /// How long a bucket may report no request before it is abandoned.
    pub fn abandon_after(&self) -> Duration {
        self.settings.abandon_after
    }

    /// Reads the time from `clock` (tests give the store's manual clock): the time to live of
    /// assignments and the store's waits are measured on it. The system clock by default.
    #[must_use]
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The tonic service to mount: `builder.add_service(quotas.server())`.
    pub fn server(&self) -> RateLimitQuotaServiceServer<QuotaService> {
        RateLimitQuotaServiceServer::new(self.clone())
    }

    /// How many bucket actions (assignments and abandons) this service and its clones have
    /// sent, on every stream.
    pub fn actions_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    pub(crate) fn store(&self) -> &DynStore {
        &self.store
    }

    pub(crate) fn table(&self) -> &ArcSwap<DescriptorTable> {
        &self.table
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Counts `action`, about to be sent.
    pub(crate) fn sent(&self, action: &BucketAction) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        observe::acted(assignment::kind(action));
    }
}
