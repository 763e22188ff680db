//! The layer: configuration shared by every service it wraps.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::Method;
use tower_layer::Layer;

use tollgate_core::{Clock, DynStore, Store};

use crate::handle::LayerHandle;
use crate::headers::HeaderStyle;
use crate::headers::refused::Refused;
use crate::in_force::InForce;
use crate::observe::Observer;
use crate::observe::key_logging::KeyLogging;
use crate::observe::stats::StatsBook;
use crate::observe::top_refused::TopRefused;
use crate::rules::grpc_method::grpc_method_pattern;
use crate::rules::path_pattern::{PathPattern, PathPatternError};
use crate::rules::registry::QuotaRegistry;
use crate::rules::rule::Rule;
use crate::rules::rule_set::RuleSet;
use crate::service::RateLimit;
use crate::settings::Settings;
use tollgate_key::client_ip::Cidr;

/// Applies rate-limit rules to every request of the services it wraps.
///
/// Clones of the layer, and every service it makes (axum clones services freely), share one
/// store and one rule set, so cloning never multiplies a limit. Rules can be replaced at runtime
/// with [`replace_rules`](crate::LayerHandle::replace_rules) on its [`handle`](RateLimitLayer::handle), for every service made from this layer
/// value. Builder methods that add rules give the layer a rule set of its own, so a base layer
/// can be cloned and extended per route (`base.clone().rule(login)`) without the extensions
/// leaking into the base or into each other; the store is still shared.
///
/// ```
/// use std::time::Duration;
/// use http::Method;
/// use tollgate_core::{MemoryStore, Quota, Rate};
/// use tollgate_tower::key::{ClientIp, Endpoint, HeaderKey};
/// use tollgate_tower::{RateLimitLayer, Rule};
///
/// let layer = RateLimitLayer::new(MemoryStore::new())
///     // Every request: 100 a minute per client address.
///     .rule(Rule::new("per-ip", Quota::sliding_window_counter(100, Duration::from_secs(60))?, ClientIp::peer())?)
///     // Sign-ups: 3 per device a day.
///     .route(
///         Method::POST,
///         "/signup",
///         Rule::new(
///             "signups-per-device",
///             Quota::fixed_window(3, Duration::from_secs(86_400))?,
///             HeaderKey::new(http::HeaderName::from_static("x-device-id")),
///         )?,
///     )?
///     .exempt_path("/healthz")?;
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub struct RateLimitLayer<St> {
    /// The store as its own type, for [`store`](Self::store) alone: the services count through
    /// the erased handle `in_force` holds, which shares it.
    store: Arc<St>,
    in_force: Arc<InForce>,
    settings: Arc<Settings>,
}

impl<St: std::fmt::Debug> std::fmt::Debug for RateLimitLayer<St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("store", &self.store)
            .field("rules", &self.in_force.rules.load())
            .finish_non_exhaustive()
    }
}

impl<St> Clone for RateLimitLayer<St> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            store: Arc::clone(&self.store),
            in_force: Arc::clone(&self.in_force),
            settings: Arc::clone(&self.settings),
        }
    }
}

impl<St: Store> RateLimitLayer<St> {
    /// A layer counting in `store`, with no rules yet.
    pub fn new(store: St) -> Self {
        let store = Arc::new(store);
        let in_force = InForce::observed(InForce {
            store: DynStore::from_arc(Arc::clone(&store)),
            rules: ArcSwap::from_pointee(RuleSet::new()),
            observers: Arc::default(),
        });
        RateLimitLayer {
            store,
            in_force,
            settings: Arc::new(Settings::default()),
        }
    }

    /// Adds a rule applied to every request through this layer (put the layer on a route with
    /// axum's `route_layer` for per-route rule sets).
    pub fn rule(self, rule: Rule) -> Self {
        self.update_rules(|rules| rules.rule(rule))
    }

    /// Adds a rule for requests with `method` whose path matches `pattern` (see
    /// [`PathPattern`]; a `GET` row also matches `HEAD`): one row of a gateway-level table.
    /// An error when `pattern` is not valid (axum 0.7's `/users/:id`, say).
    pub fn route(
        self,
        method: Method,
        pattern: &str,
        rule: Rule,
    ) -> Result<Self, PathPatternError> {
        let pattern = PathPattern::new(pattern)?;
        Ok(self.update_rules(|rules| rules.route_pattern(Some(method), pattern, rule)))
    }

    /// Adds a rule for requests of any method whose path matches `pattern`; an error when
    /// `pattern` is not valid.
    pub fn any_method(self, pattern: &str, rule: Rule) -> Result<Self, PathPatternError> {
        let pattern = PathPattern::new(pattern)?;
        Ok(self.update_rules(|rules| rules.route_pattern(None, pattern, rule)))
    }

    /// Adds a rule for gRPC calls to `method` (`"chirp.v1.Feed/Get"`, or `"chirp.v1.Feed/*"`
    /// for every method of the service): requests to its path, whatever their HTTP method —
    /// gRPC calls are POSTs, but tonic serves a path whatever the method, so a rule for POST
    /// alone could be walked around (see [`grpc_method_pattern`](crate::grpc_method_pattern)).
    pub fn grpc(self, method: &str, rule: Rule) -> Result<Self, PathPatternError> {
        let pattern = grpc_method_pattern(method)?;
        Ok(self.update_rules(|rules| rules.route_pattern(None, pattern, rule)))
    }

    /// A builder step: this layer gets a rule set of its own, so adding a rule to a clone (say,
    /// a shared base extended per route) never changes the base or services already built. The
    /// store stays shared.
    fn update_rules(mut self, change: impl FnOnce(RuleSet) -> RuleSet) -> Self {
        let in_force = &self.in_force;
        let current = RuleSet::clone(&in_force.rules.load());
        let rules = in_force.prepared(change(current));
        self.in_force = InForce::observed(InForce {
            store: in_force.store.clone(),
            rules: ArcSwap::from_pointee(rules),
            observers: Arc::clone(&in_force.observers),
        });
        self
    }

    /// Records each rule's decisions through the `metrics` facade (feature `metrics`):
    /// `tollgate_checks_total{rule, outcome}` (`allowed`, `refused`, `shadow_refused`, and
    /// `refused_locally` for a refusal a `BlockedCache` (`tollgate_wrappers`) made
    /// without the store) and
    /// `tollgate_near_limit_total{rule}` (allowed with less than 20 % of the limit left), and
    /// for a concurrency rule `tollgate_in_flight{rule}` (slots its running requests hold); typed
    /// limits made with `Tollgate::from_layer` and a `RuleWatcher` on this layer
    /// (`tollgate_config_loads_total{result}`) record too. Handles are made now and whenever
    /// rules are installed, so **install the recorder before building the layer**; then a
    /// request only increments counters. Labels are rule ids and fixed words, never a caller's
    /// key. Off (and free) until called. See `tollgate_core::metrics` for every name.
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_tower::RateLimitLayer;
    ///
    /// // After installing a recorder (metrics-exporter-prometheus, say):
    /// let layer = RateLimitLayer::new(MemoryStore::new()).metrics();
    /// # let _ = layer;
    /// ```
    #[cfg(feature = "metrics")]
    pub fn metrics(self) -> Self {
        let in_force = &self.in_force;
        (in_force.observers.metrics).store(true, std::sync::atomic::Ordering::Release);
        in_force.observers.changed();
        self
    }

    /// Counts each rule's decisions in the layer — allowed, refused, shadow-refused — since now
    /// and per minute over the last hour, for [`LayerHandle::stats`] (what
    /// `tollgate-admin`'s stats endpoint and status page show). A rule keeps its counts when a
    /// reload keeps it. Off (and free) until called; then a few relaxed atomic operations per
    /// rule a request meets. Independent of [`metrics`](Self::metrics): no recorder needed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::{MemoryStore, Quota, RuleId};
    /// use tollgate_tower::{RateLimitLayer, Rule};
    /// use tollgate_tower::key::Global;
    ///
    /// let layer = RateLimitLayer::new(MemoryStore::new())
    ///     .rule(Rule::new("all", Quota::fixed_window(100, Duration::from_secs(1))?, Global)?)
    ///     .track_stats();
    /// let stats = layer.handle().stats(&RuleId::new("all")?).expect("tracked");
    /// assert_eq!(stats.since_start.checks(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn track_stats(self) -> Self {
        let in_force = &self.in_force;
        let _ = in_force.observers.stats.set(StatsBook::default());
        in_force.observers.changed();
        self
    }

    /// Counts each rule's refused callers (shadow refusals included) over the last hour, for
    /// [`LayerHandle::top_refused`]: a Space-Saving summary of `k` counters per rule and
    /// five-minute slice (`k` from 1 to 10,000; 100 suits most services), fed off the request path through a bounded channel to a thread of its
    /// own (a full channel drops samples and counts them; a request never waits). Memory per
    /// rule is fixed; counts are at most `refusals / k` high (see [`crate::observe::top_refused`]).
    ///
    /// ```
    /// use tollgate_core::{MemoryStore, RuleId};
    /// use tollgate_tower::RateLimitLayer;
    ///
    /// let layer = RateLimitLayer::new(MemoryStore::new()).track_top_refused(100);
    /// let report = layer.handle().top_refused(&RuleId::new("login")?, 10).expect("tracked");
    /// assert!(report.callers.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn track_top_refused(self, k: usize) -> Self {
        let in_force = &self.in_force;
        let _ = in_force
            .observers
            .top_refused
            .get_or_init(|| Arc::new(TopRefused::start(k)));
        in_force.observers.changed();
        self
    }

    /// Adds an observer of every rule's decisions (see [`observe`](crate::observe)): asked
    /// now, and whenever rules are installed, for what it keeps per rule. Like the built-in
    /// ones, it is shared by the layer values built from the same `new`.
    pub fn observe(self, observer: impl Observer) -> Self {
        let in_force = &self.in_force;
        (in_force.observers.custom.lock())
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Arc::new(observer));
        in_force.observers.changed();
        self
    }

    /// Times rules' alerts ([`Rule::with_alert_at`]) on `clock` instead of the system's: give
    /// it the store's manual clock in a test or a simulation, so an alert clears on the time the
    /// store decides on. Shared, like the observers, by the layer values built from the same
    /// `new`.
    ///
    /// ```
    /// use tollgate_core::{MemoryStore, Timestamp};
    /// use tollgate_testing::ManualClock;
    /// use tollgate_tower::RateLimitLayer;
    ///
    /// let clock = ManualClock::new(Timestamp::from_secs(1_800_000_000));
    /// let store = MemoryStore::builder().clock(clock.clone()).build();
    /// let layer = RateLimitLayer::new(store).alert_clock(clock);
    /// # let _ = layer;
    /// ```
    pub fn alert_clock(self, clock: impl Clock) -> Self {
        (self.in_force.observers.alerts).set_clock(Arc::new(clock));
        self
    }

    /// Which rate-limit headers responses carry (default: the IETF fields, no legacy ones).
    pub fn headers(mut self, style: HeaderStyle) -> Self {
        Arc::make_mut(&mut self.settings).header_style = style;
        self
    }

    /// Renders refusals the service's own way (custom JSON, a gRPC status) instead of the
    /// default 429 problem response. Rules with [`OnRefusal::Respond`](crate::OnRefusal)
    /// keep their own response.
    pub fn responder(
        mut self,
        respond: impl Fn(&Refused) -> http::Response<Bytes> + Send + Sync + 'static,
    ) -> Self {
        Arc::make_mut(&mut self.settings).responder = Some(Arc::new(respond));
        self
    }

    /// Requests whose path matches `pattern` skip limiting (health checks); an error when
    /// `pattern` is not a valid [`PathPattern`].
    pub fn exempt_path(mut self, pattern: &str) -> Result<Self, PathPatternError> {
        let pattern = PathPattern::new(pattern)?;
        Arc::make_mut(&mut self.settings)
            .exemptions
            .add_paths([pattern]);
        Ok(self)
    }

    /// Requests whose TCP **peer** address is in `network` skip limiting (internal callers that
    /// connect directly). Behind a load balancer every peer is the balancer, so exempting its
    /// network would exempt everyone: exempt paths instead, or put internal callers on a route
    /// without this layer.
    pub fn exempt_network(mut self, network: Cidr) -> Self {
        Arc::make_mut(&mut self.settings)
            .exemptions
            .peers
            .push(network);
        self
    }

    /// Takes live quotas from `registry`: a rule whose id has an entry there uses that quota
    /// instead of its own, from the next request on. Share the registry with typed limits in
    /// handlers (tollgate-axum) to change any limit at runtime in one place.
    pub fn registry(mut self, registry: QuotaRegistry) -> Self {
        Arc::make_mut(&mut self.settings).registry = Some(registry);
        self
    }

    /// How keys appear in `tollgate::refusal` events (default: hashed).
    pub fn key_logging(mut self, logging: KeyLogging) -> Self {
        Arc::make_mut(&mut self.settings).key_logging = logging;
        self
    }

    /// The `Retry-After` of a 503 when the store is down and a rule fails closed (default 1 s).
    pub fn unavailable_retry_after(mut self, retry_after: Duration) -> Self {
        Arc::make_mut(&mut self.settings).unavailable_retry_after = retry_after;
        self
    }

    /// This gateway's number among the N gateways a [split](crate::Rule::split) rule shares its
    /// limit with, `0..N`: gateway `i` allows part `i` of the limit (the first `C mod N` parts
    /// get one more unit), so the parts add up to the limit. Without it, each gateway allows
    /// ⌊C/N⌋ and the parts add up to at most the limit.
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_tower::RateLimitLayer;
    /// // Gateway 3 of the fleet, say from its pod ordinal.
    /// let layer = RateLimitLayer::new(MemoryStore::new()).gateway(3);
    /// assert_eq!(layer.handle().gateway(), Some(3));
    /// ```
    pub fn gateway(mut self, index: u32) -> Self {
        Arc::make_mut(&mut self.settings).gateway = Some(index);
        self
    }

    /// The layer as code outside it sees it — its store (type erased), rules in force (to
    /// read or replace), settings and what it has observed — for typed limits in handlers, the
    /// admin API and rule-file watchers. Take it after the last builder call: a builder call
    /// that adds rules gives the layer a rule set of its own, which an earlier handle does not
    /// speak for.
    pub fn handle(&self) -> LayerHandle {
        LayerHandle {
            in_force: Arc::clone(&self.in_force),
            settings: Arc::clone(&self.settings),
        }
    }

    /// The store, as its own type: a `FleetStore` (tollgate-wrappers) to give back what it holds
    /// before the gateway stops, a `FallbackStore` to ask for its health.
    pub fn store(&self) -> &St {
        &self.store
    }
}

impl<S, St> Layer<S> for RateLimitLayer<St> {
    type Service = RateLimit<S, St>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::new(
            inner,
            Arc::clone(&self.in_force),
            Arc::clone(&self.settings),
        )
    }
}
