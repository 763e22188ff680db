//! The store the service counts in: memory, or Redis (Cluster) as a fleet of gateways counts
//! it — behind a `FallbackStore` (each rule's `on_store_failure` when Redis cannot answer in
//! time) inside a `FleetStore` (the fleet modes a rule file names: leases, syncs, splits,
//! sub-buckets, cached refusals), with resets announced on Redis followed.

use std::time::Duration;

use tollgate_core::{Item, Key, MemoryStore, Quota, RuleId, Store};
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

/// How long the start waits for Redis's first answer.
const WARM_UP: Duration = Duration::from_secs(2);

/// One read before serving (it writes nothing), without the store timeout: the connection's
/// first call loads the script and learns the server's time, which can take longer than a
/// check's deadline, and would have answered the first requests by their failure policy.
async fn warm_up(redis: &RedisStore) -> Result<(), String> {
    let rule = RuleId::new("tollgate-envoy.warm-up").map_err(|error| error.to_string())?;
    let quota =
        Quota::fixed_window(1, Duration::from_secs(1)).map_err(|error| error.to_string())?;
    let key = Key::new("warm-up");
    redis
        .peek(&Item::new(&rule, quota, &key))
        .await
        .map(|_| ())
        .map_err(|error| format!("Redis does not answer: {error}"))
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
        // Redis down at start is an outage like any other: the rules' failure policies answer
        // until it is back, so the service starts anyway.
        match tokio::time::timeout(WARM_UP, warm_up(&redis)).await {
            Ok(Ok(())) => {}
            Ok(Err(why)) => {
                tracing::warn!(target: "tollgate::envoy", "{why}; serving, each rule answering by its on_store_failure until Redis answers")
            }
            Err(_) => {
                tracing::warn!(target: "tollgate::envoy", "Redis did not answer within {WARM_UP:?}; serving, each rule answering by its on_store_failure until it does")
            }
        }
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
