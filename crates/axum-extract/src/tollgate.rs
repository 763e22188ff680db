//! The handle handlers reach the store and the registry through.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRequestParts;
use http::request::Parts;
use parking_lot::RwLock;
use tollgate_core::{DynStore, Quota, RuleId, Store};
use tollgate_tower::headers::HeaderStyle;
use tollgate_tower::observe::RuleObservers;
use tollgate_tower::{KeyLogging, LayerHandle, QuotaRegistry, RateLimitLayer, Responder};

use crate::{Limit, LimitRejection, TollgateSource};

/// What typed limits need: the store (shared with the layer), the live-quota registry (shared
/// with the layer), and how refusals look. Build it with [`Tollgate::from_layer`] so all of
/// that is configured once, in the layer. Give it to the router in its state (`FromRef`: a
/// router that cannot give one does not compile) or, in an app without state, as an extension
/// (a route that lacks it answers a clear `500` with an error log, never a panic); see
/// [`TollgateSource`]. Cloning is cheap and clones share everything.
///
/// ```
/// use axum::{Extension, Router, routing::post};
/// use tollgate_axum::Tollgate;
/// use tollgate_core::MemoryStore;
/// use tollgate_tower::{QuotaRegistry, RateLimitLayer};
///
/// let store = MemoryStore::new(); // clones share counts
/// let registry = QuotaRegistry::new();
/// let tollgate = Tollgate::new(store.clone()).registry(registry.clone());
/// let app: Router = Router::new()
///     .route("/follow", post(|| async { "followed" }))
///     .layer(RateLimitLayer::new(store).registry(registry))
///     .layer(Extension(tollgate));
/// ```
#[derive(Clone)]
pub struct Tollgate {
    shared: Arc<Shared>,
}

struct Shared {
    store: DynStore,
    registry: QuotaRegistry,
    header_style: HeaderSource,
    key_logging: KeyLogging,
    unavailable_retry_after: Duration,
    responder: Option<Responder>,
    /// Each typed limit's rule id and default quota, resolved once per type.
    declared: RwLock<HashMap<TypeId, Declared>>,
    /// The layer, with `from_layer`: its top refused callers, and whether it records metrics
    /// (its setting as it is when a limit is first used; without a layer, off).
    layer: Option<LayerHandle>,
}

/// Where the header style comes from: set here, or the layer's, read at each refusal so a rule
/// file's `headers` (swapped in with its rules) reaches typed limits too.
#[derive(Clone)]
enum HeaderSource {
    Fixed(HeaderStyle),
    Layer(LayerHandle),
}

impl HeaderSource {
    fn current(&self) -> HeaderStyle {
        match self {
            HeaderSource::Fixed(style) => *style,
            HeaderSource::Layer(layer) => layer.header_style(),
        }
    }
}

impl std::fmt::Debug for Tollgate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tollgate")
            .field("registry", &self.shared.registry)
            .field("header_style", &self.shared.header_style.current())
            .field("key_logging", &self.shared.key_logging)
            .finish_non_exhaustive()
    }
}

impl Tollgate {
    /// Typed limits counting in `store` (pass a clone of the layer's store, or an `Arc` of it,
    /// so handlers and the layer share counts).
    pub fn new<St: Store>(store: St) -> Self {
        Tollgate {
            shared: Arc::new(Shared {
                store: DynStore::new(store),
                registry: QuotaRegistry::new(),
                header_style: HeaderSource::Fixed(HeaderStyle::default()),
                key_logging: KeyLogging::default(),
                unavailable_retry_after: Duration::from_secs(1),
                responder: None,
                declared: RwLock::new(HashMap::new()),
                layer: None,
            }),
        }
    }

    /// Typed limits configured as `layer` is, so everything is configured once: they count in
    /// the layer's store, take live quotas from its registry (a new, unshared one if it has
    /// none), write the same headers (the layer's style as it is at each request, so a reloaded
    /// rule file's `headers` apply here too), log keys the same way, answer refusals with its
    /// responder, and count refusals in its top refused callers and metrics when it keeps them,
    /// so a refusal by a typed limit looks exactly like one by the layer.
    ///
    /// ```
    /// use axum::{Extension, Router, routing::post};
    /// use tollgate_axum::Tollgate;
    /// use tollgate_core::MemoryStore;
    /// use tollgate_tower::{QuotaRegistry, RateLimitLayer};
    ///
    /// let layer = RateLimitLayer::new(MemoryStore::new()).registry(QuotaRegistry::new());
    /// let tollgate = Tollgate::from_layer(&layer);
    /// let app: Router = Router::new()
    ///     .route("/follow", post(|| async { "followed" }))
    ///     .layer(layer)
    ///     .layer(Extension(tollgate));
    /// ```
    pub fn from_layer<St: Store>(layer: &RateLimitLayer<St>) -> Self {
        let layer = layer.handle();
        Tollgate {
            shared: Arc::new(Shared {
                store: layer.store().clone(),
                registry: layer.registry().cloned().unwrap_or_default(),
                header_style: HeaderSource::Layer(layer.clone()),
                key_logging: layer.key_logging(),
                unavailable_retry_after: layer.unavailable_retry_after(),
                responder: layer.responder().cloned(),
                declared: RwLock::new(HashMap::new()),
                layer: Some(layer),
            }),
        }
    }

    /// Takes live quotas from `registry` (share it with the layer).
    #[must_use]
    pub fn registry(self, registry: QuotaRegistry) -> Self {
        self.with(|shared| shared.registry = registry)
    }

    /// Which rate-limit headers refusals carry (default: the IETF fields).
    #[must_use]
    pub fn headers(self, style: HeaderStyle) -> Self {
        self.with(|shared| shared.header_style = HeaderSource::Fixed(style))
    }

    /// How keys appear in refusal events (default: hashed).
    #[must_use]
    pub fn key_logging(self, logging: KeyLogging) -> Self {
        self.with(|shared| shared.key_logging = logging)
    }

    /// `Retry-After` of a `503` when the store is down and a limit fails closed (default 1 s).
    #[must_use]
    pub fn unavailable_retry_after(self, retry_after: Duration) -> Self {
        self.with(|shared| shared.unavailable_retry_after = retry_after)
    }

    /// The registry of live quotas.
    pub fn quotas(&self) -> &QuotaRegistry {
        &self.shared.registry
    }

    fn with(self, change: impl FnOnce(&mut Shared)) -> Self {
        // Builders run before the handle is shared; a clone made earlier keeps its settings.
        let mut shared = match Arc::try_unwrap(self.shared) {
            Ok(shared) => shared,
            Err(shared) => Shared {
                store: shared.store.clone(),
                registry: shared.registry.clone(),
                header_style: shared.header_style.clone(),
                key_logging: shared.key_logging,
                unavailable_retry_after: shared.unavailable_retry_after,
                responder: shared.responder.clone(),
                declared: RwLock::new(HashMap::new()),
                layer: shared.layer.clone(),
            },
        };
        change(&mut shared);
        Tollgate {
            shared: Arc::new(shared),
        }
    }

    pub(crate) fn store(&self) -> &DynStore {
        &self.shared.store
    }

    pub(crate) fn header_style(&self) -> HeaderStyle {
        self.shared.header_style.current()
    }

    pub(crate) fn logging(&self) -> KeyLogging {
        self.shared.key_logging
    }

    pub(crate) fn retry_after_unavailable(&self) -> Duration {
        self.shared.unavailable_retry_after
    }

    /// The layer, when built [`from_layer`](Tollgate::from_layer).
    pub(crate) fn layer(&self) -> Option<&LayerHandle> {
        self.shared.layer.as_ref()
    }

    /// The layer's responder hook, when built [`from_layer`](Tollgate::from_layer).
    pub(crate) fn responder(&self) -> Option<Responder> {
        self.shared.responder.clone()
    }

    /// `L`'s rule id, live quota and counters (when metrics are on).
    pub(crate) fn resolve<L: Limit>(&self) -> Result<Resolved, LimitRejection> {
        let type_id = TypeId::of::<L>();
        let declared = self.shared.declared.read().get(&type_id).cloned();
        let declared = match declared {
            Some(declared) => declared,
            None => {
                let declared = declare::<L>(self);
                self.shared
                    .declared
                    .write()
                    .insert(type_id, declared.clone());
                declared
            }
        };
        let declared = declared.map_err(LimitRejection::not_configured)?;
        let quota = self
            .shared
            .registry
            .get(&declared.rule)
            .unwrap_or(declared.default_quota);
        if quota.algorithm() == tollgate_core::Algorithm::Concurrency {
            // Its slots would be held for ever: refused loudly, never leaked.
            return Err(LimitRejection::not_configured(format!(
                "limit {}: a concurrency quota's slots must be given back when the request \
                 ends, which typed limits do not do yet",
                declared.rule
            )));
        }
        Ok(Resolved {
            rule: declared.rule,
            quota,
            observers: declared.observers,
        })
    }

    /// The `Tollgate` a router put in `parts`' extensions.
    pub(crate) fn from_parts(parts: &Parts) -> Result<Tollgate, LimitRejection> {
        parts.extensions.get::<Tollgate>().cloned().ok_or_else(|| {
            LimitRejection::not_configured(
                "no tollgate_axum::Tollgate extension on this route: add \
                 `.layer(Extension(Tollgate::new(store)))` to the router",
            )
        })
    }
}

/// A typed limit's rule id, default quota and counters, or why its declaration is invalid.
type Declared = Result<DeclaredLimit, String>;

#[derive(Clone)]
struct DeclaredLimit {
    rule: RuleId,
    default_quota: Quota,
    observers: RuleObservers,
}

/// A typed limit as one request uses it.
pub(crate) struct Resolved {
    pub(crate) rule: RuleId,
    pub(crate) quota: Quota,
    /// What the layer's observers keep for it (its events, metrics, top refused callers),
    /// made once per type.
    pub(crate) observers: RuleObservers,
}

fn declare<L: Limit>(tollgate: &Tollgate) -> Declared {
    let rule = RuleId::new(L::ID).map_err(|error| format!("limit id {:?}: {error}", L::ID))?;
    let quota = L::default_quota().map_err(|error| format!("limit {:?}: {error}", L::ID))?;
    let observers = match tollgate.layer() {
        Some(layer) => layer.rule_observers(&rule),
        // Without a layer, the observers of a layer of no rules over the same store: the
        // refusal events and their summary alone.
        None => RateLimitLayer::new(tollgate.store().clone())
            .handle()
            .rule_observers(&rule),
    };
    Ok(DeclaredLimit {
        observers,
        rule,
        default_quota: quota,
    })
}

impl<S: TollgateSource> FromRequestParts<S> for Tollgate {
    type Rejection = LimitRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        state.tollgate(parts)
    }
}
