//! The rate limit service: Envoy's `ShouldRateLimit`, decided by a rule file's descriptor rules
//! in any tollgate store.

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService as Rls, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use smallvec::SmallVec;
use tollgate_config::{ConfigErrors, Extractors, RuleFile, RuleWatcher, WatchError};
use tollgate_core::{DynStore, Item, Store};
use tollgate_tower::RateLimitLayer;
use tonic::{Request, Response, Status};

use crate::observe::Answered;
use crate::rlqs::QuotaService;
use crate::table::DescriptorTable;
use crate::{answer, caps, plan};

/// Envoy's rate limit service (`envoy.service.ratelimit.v3.RateLimitService`), answering
/// `ShouldRateLimit` from a rule file's descriptor rules (`envoy = { domain, descriptor }`)
/// counted in `store`. Mount [`server`](Self::server) in a tonic server of your own, next to
/// other services, or run the `tollgate-envoy` binary.
///
/// A request is decided all or nothing: its counted descriptors go to the store in one call,
/// and a refused request charges none of them. A rule whose store cannot answer follows its
/// `on_store_failure` (with the store behind a `FallbackStore`, as the binary builds it):
/// `closed` answers `UNAVAILABLE` (Envoy then applies its `failure_mode_deny`), `open` and
/// `open_within` answer OK, `local` decides in this process's memory. A request outside the
/// caps of [`caps`](crate::caps) is `INVALID_ARGUMENT` and counts nothing.
///
/// ```
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
/// use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
/// use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
/// use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
/// use tollgate_config::{Extractors, RuleFile};
/// use tollgate_core::MemoryStore;
/// use tollgate_envoy::RateLimitService;
///
/// let rules = RuleFile::parse("rules.toml", r#"
/// [[rule]]
/// id = "per-address"
/// envoy = { domain = "edge", descriptor = [{ key = "remote_address" }] }
/// algorithm = "fixed_window"
/// limit = 2
/// window = "1m"
/// "#, &Extractors::new())?;
/// let service = RateLimitService::new(MemoryStore::new());
/// service.set_rules(&rules)?;
/// let request = RateLimitRequest {
///     domain: "edge".into(),
///     descriptors: vec![RateLimitDescriptor {
///         entries: vec![Entry { key: "remote_address".into(), value: "203.0.113.7".into() }],
///         ..Default::default()
///     }],
///     hits_addend: 0,
/// };
/// let codes: Vec<i32> = [
///     service.decide(&request).await?.overall_code,
///     service.decide(&request).await?.overall_code,
///     service.decide(&request).await?.overall_code,
/// ].into();
/// assert_eq!(codes, [Code::Ok as i32, Code::Ok as i32, Code::OverLimit as i32]);
/// // Mount it: tonic::transport::Server::builder().add_service(service.server())
/// # Ok(()) }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(run()).unwrap();
/// ```
#[derive(Clone)]
pub struct RateLimitService {
    shared: Arc<Shared>,
}

struct Shared {
    store: DynStore,
    table: Arc<ArcSwap<DescriptorTable>>,
    /// A layer on the same store: what a rule file watcher installs into (its HTTP rules are
    /// unused here) and the rule loads are counted through.
    layer: RateLimitLayer<DynStore>,
}

impl std::fmt::Debug for RateLimitService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitService").finish_non_exhaustive()
    }
}

impl RateLimitService {
    /// A service counting in `store`, with no rules yet (every domain is unknown: OK).
    pub fn new(store: impl Store) -> RateLimitService {
        let store = DynStore::new(store);
        RateLimitService {
            shared: Arc::new(Shared {
                // Counts rule loads as `tollgate_config_loads_total`, like any layer's.
                layer: RateLimitLayer::new(store.clone()).metrics(),
                store,
                table: Arc::new(ArcSwap::from_pointee(DescriptorTable::default())),
            }),
        }
    }

    /// Decides by `file`'s descriptor rules from the next request on; its mistakes, and the
    /// rules in force stay, when the store cannot count a rule as it asks (see
    /// [`RuleFile::fits_store`]).
    pub fn set_rules(&self, file: &RuleFile) -> Result<(), ConfigErrors> {
        file.fits_store(&self.shared.store.capabilities())?;
        self.shared.table.store(Arc::new(DescriptorTable::of(file)));
        Ok(())
    }

    /// Loads the rule file at `path` and follows it: every valid change is in force for the
    /// next request, a change with mistakes is refused and logged while the rules in force
    /// stay (see [`RuleWatcher`]). Keep the watcher: dropping it stops watching. Needs a tokio
    /// runtime.
    pub fn watch(
        &self,
        path: impl AsRef<Path>,
        extractors: Extractors,
    ) -> Result<RuleWatcher, WatchError> {
        let watcher = RuleWatcher::start(path, extractors, &self.shared.layer)?;
        self.follow(&watcher);
        Ok(watcher)
    }

    /// Follows the rules `watcher` installs (a watcher of a layer on the same store, so the
    /// file's HTTP rules and its Envoy rules count together).
    pub fn follow(&self, watcher: &RuleWatcher) {
        let table = Arc::clone(&self.shared.table);
        watcher.on_install(move |file| table.store(Arc::new(DescriptorTable::of(file))));
    }

    /// The tonic service to mount: `builder.add_service(service.server())`.
    pub fn server(&self) -> RateLimitServiceServer<RateLimitService> {
        RateLimitServiceServer::new(self.clone()).max_decoding_message_size(caps::MAX_REQUEST_BYTES)
    }

    /// The quota service (RLQS) on this service's store and rules: it answers Envoy's
    /// `rate_limit_quota` filter by the same rule file, and follows every rule file this
    /// service installs ([`set_rules`](Self::set_rules)) or watches ([`watch`](Self::watch),
    /// [`follow`](Self::follow)) — one file, one watcher, both services, counting the same
    /// callers under the same keys.
    pub fn quota_service(&self) -> QuotaService {
        QuotaService::new(self.shared.store.clone(), Arc::clone(&self.shared.table))
    }

    /// The layer this service's rule files are installed into, on the same store: its handle
    /// serves the admin API and counts rule loads.
    pub fn layer(&self) -> &RateLimitLayer<DynStore> {
        &self.shared.layer
    }

    /// Decides one request, as `ShouldRateLimit` answers it.
    pub async fn decide(&self, request: &RateLimitRequest) -> Result<RateLimitResponse, Status> {
        let table = self.shared.table.load();
        let answer = self.decide_counted(&table, request).await;
        table.answers.answered(match &answer {
            Ok(response) if response.overall_code == Code::OverLimit as i32 => Answered::OverLimit,
            Ok(_) => Answered::Ok,
            Err(status) if status.code() == tonic::Code::InvalidArgument => {
                Answered::InvalidArgument
            }
            Err(_) => Answered::Unavailable,
        });
        answer
    }

    async fn decide_counted(
        &self,
        table: &DescriptorTable,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, Status> {
        caps::check(request)?;
        if !table.knows(&request.domain) {
            return Ok(answer::unknown_domain());
        }
        let planned = plan::plan(table, request)?;
        let items: SmallVec<[Item<'_>; 4]> = planned.iter().map(plan::Planned::item).collect();
        let batch = if items.is_empty() {
            None
        } else {
            let store = &self.shared.store;
            let decided = match store.check_now(&items) {
                Some(decided) => decided,
                None => store.check(&items).await,
            };
            Some(decided.map_err(|error| {
                tracing::warn!(target: "tollgate::envoy", %error, "the store cannot answer and a rule fails closed");
                Status::unavailable(format!("the rate limit store cannot answer: {error}"))
            })?)
        };
        Ok(answer::answer(
            request.descriptors.len(),
            &planned,
            &items,
            batch.as_ref(),
            table.style,
        ))
    }
}

#[tonic::async_trait]
impl Rls for RateLimitService {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.decide(request.get_ref()).await.map(Response::new)
    }
}
