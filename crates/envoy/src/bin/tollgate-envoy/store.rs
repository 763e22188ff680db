//! The store the service counts in: memory, or Redis (Cluster) as a fleet of gateways counts
//! it — behind a `FallbackStore` (each rule's `on_store_failure` when Redis cannot answer in
//! time) inside a `FleetStore` (the fleet modes a rule file names: leases, syncs, splits,
//! sub-buckets, cached refusals), with resets announced on Redis followed.

use std::time::Duration;

use tollgate_core::MemoryStore;
use tollgate_envoy::RateLimitService;
use tollgate_redis::{RedisStore, ResetFollower};
use tollgate_wrappers::{FallbackStore, FleetStore};

use crate::args::Settings;

/// How often a fleet store gives quiet keys' leases back.
const TICK: Duration = Duration::from_secs(1);

/// The service on its store, and what keeps the store's background work alive.
pub(crate) struct Counted {
    pub(crate) service: RateLimitService,
    fleet: Option<Fleet>,
}

struct Fleet {
    store: FleetStore<FallbackStore<RedisStore>>,
    _resets: ResetFollower,
    ticker: tokio::task::JoinHandle<()>,
}

impl Counted {
    /// The store `settings` name, connected.
    pub(crate) async fn connect(settings: &Settings) -> Result<Counted, String> {
        let builder = RedisStore::builder().prefix(settings.redis_prefix.clone());
        let redis = match (&settings.redis, settings.redis_cluster.as_slice()) {
            (Some(url), _) => builder.connect(url).await,
            (None, []) => {
                return Ok(Counted {
                    service: RateLimitService::new(MemoryStore::new()),
                    fleet: None,
                });
            }
            (None, nodes) => builder.connect_cluster(nodes).await,
        }
        .map_err(|error| format!("cannot connect to Redis: {error}"))?;
        let store = FleetStore::new(
            FallbackStore::builder(redis.clone())
                .timeout(settings.store_timeout)
                .metrics("redis")
                .build(),
        );
        let resets = ResetFollower::start(&redis, store.blocked());
        let ticker = store.spawn_ticker(TICK);
        Ok(Counted {
            service: RateLimitService::new(store.clone()),
            fleet: Some(Fleet {
                store,
                _resets: resets,
                ticker,
            }),
        })
    }

    /// Before stopping: gives back the leases this process holds, so the fleet can spend them.
    pub(crate) async fn give_back(&self) {
        if let Some(fleet) = &self.fleet {
            fleet.ticker.abort();
            fleet.store.give_back().await;
        }
    }
}
