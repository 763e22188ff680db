//! The layer: configuration shared by every service it wraps.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::Method;
use tower_layer::Layer;

use crate::client_ip::Cidr;
use crate::headers::HeaderStyle;
use crate::settings::{KeyLogging, Responder, Settings};
use crate::{PathPattern, PathPatternError, QuotaRegistry, RateLimit, Refused, Rule, RuleSet};

/// What every service made by one layer shares: the store (shared with every layer built from
/// the same `RateLimitLayer::new`) and the current rules (this layer value's own).
pub(crate) struct Core<St> {
    pub(crate) store: Arc<St>,
    pub(crate) rules: ArcSwap<RuleSet>,
    /// Whether installed rules get metric handles (feature `metrics`): kept with the rules, so
    /// whoever replaces them (a watcher, a clone made earlier) installs them alike.
    #[cfg(feature = "metrics")]
    pub(crate) metrics: std::sync::atomic::AtomicBool,
    /// Each rule's admin counters once tracked ([`RateLimitLayer::track_stats`]), shared by
    /// every layer value built from the same `new`, so a rule keeps its counts across reloads.
    pub(crate) stats: Arc<std::sync::OnceLock<crate::stats::StatsBook>>,
}

/// Applies rate-limit rules to every request of the services it wraps.
///
/// Clones of the layer, and every service it makes (axum clones services freely), share one
/// store and one rule set, so cloning never multiplies a limit. Rules can be replaced at runtime
/// with [`replace_rules`](RateLimitLayer::replace_rules), for every service made from this layer
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
    core: Arc<Core<St>>,
    settings: Arc<Settings>,
}

impl<St: std::fmt::Debug> std::fmt::Debug for RateLimitLayer<St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("store", &self.core.store)
            .field("rules", &self.core.rules.load())
            .finish_non_exhaustive()
    }
}

impl<St> Clone for RateLimitLayer<St> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            core: Arc::clone(&self.core),
            settings: Arc::clone(&self.settings),
        }
    }
}

impl<St> RateLimitLayer<St> {
    /// A layer counting in `store`, with no rules yet.
    pub fn new(store: St) -> Self {
        RateLimitLayer {
            core: Arc::new(Core {
                store: Arc::new(store),
                rules: ArcSwap::from_pointee(RuleSet::new()),
                #[cfg(feature = "metrics")]
                metrics: std::sync::atomic::AtomicBool::new(false),
                stats: Arc::default(),
            }),
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

    /// A builder step: this layer gets a rule set of its own, so adding a rule to a clone (say,
    /// a shared base extended per route) never changes the base or services already built. The
    /// store stays shared.
    fn update_rules(mut self, change: impl FnOnce(RuleSet) -> RuleSet) -> Self {
        let current = RuleSet::clone(&self.core.rules.load());
        let rules = self.prepared(change(current));
        self.core = Arc::new(Core {
            store: Arc::clone(&self.core.store),
            rules: ArcSwap::from_pointee(rules),
            #[cfg(feature = "metrics")]
            metrics: std::sync::atomic::AtomicBool::new(self.metrics_enabled()),
            stats: Arc::clone(&self.core.stats),
        });
        self
    }

    /// `rules` as this layer installs them: with each rule's metric handles when metrics are on,
    /// without any (a set taken from a metered layer, say) when they are off.
    fn prepared(&self, rules: RuleSet) -> RuleSet {
        let rules = rules.with_stats(self.core.stats.get());
        #[cfg(feature = "metrics")]
        return if self.metrics_enabled() {
            rules.with_metrics()
        } else {
            rules.without_metrics()
        };
        #[cfg(not(feature = "metrics"))]
        rules
    }

    /// Records each rule's decisions through the `metrics` facade (feature `metrics`):
    /// `tollgate_checks_total{rule, outcome}` (`allowed`, `refused`, `shadow_refused`, and
    /// `refused_locally` for a refusal a [`BlockedCache`](tollgate_core::BlockedCache) made
    /// without the store) and
    /// `tollgate_near_limit_total{rule}` (allowed with less than 20 % of the limit left); typed
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
    /// assert!(layer.metrics_enabled());
    /// ```
    #[cfg(feature = "metrics")]
    pub fn metrics(self) -> Self {
        self.core
            .metrics
            .store(true, std::sync::atomic::Ordering::Release);
        // In place: a watcher or a clone made before this call goes on replacing these rules.
        self.core
            .rules
            .rcu(|rules| RuleSet::clone(rules).with_metrics());
        self
    }

    /// Counts each rule's decisions in the layer — allowed, refused, shadow-refused — since now
    /// and per minute over the last hour, for [`rule_stats`](Self::rule_stats) (what
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
    /// let stats = layer.rule_stats(&RuleId::new("all")?).expect("tracked");
    /// assert_eq!(stats.since_start.checks(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn track_stats(self) -> Self {
        let _ = self.core.stats.set(crate::stats::StatsBook::default());
        // In place: a watcher or a clone made before this call goes on replacing these rules.
        let book = self.core.stats.get();
        self.core
            .rules
            .rcu(|rules| RuleSet::clone(rules).with_stats(book));
        self
    }

    /// `rule`'s counts ([`track_stats`](Self::track_stats)); `None` when not tracked, or no
    /// rule with this id was installed since.
    pub fn rule_stats(&self, rule: &tollgate_core::RuleId) -> Option<crate::stats::RuleStats> {
        self.core.stats.get()?.report(rule)
    }

    /// Counts each rule's refused callers (shadow refusals included) over the last hour, for
    /// [`top_refused`](Self::top_refused): a Space-Saving summary of `k` counters per rule and
    /// five-minute slice, fed off the request path through a bounded channel to a thread of its
    /// own (a full channel drops samples and counts them; a request never waits). Memory per
    /// rule is fixed; counts are at most `refusals / k` high (see [`crate::top_refused`]).
    ///
    /// ```
    /// use tollgate_core::{MemoryStore, RuleId};
    /// use tollgate_tower::RateLimitLayer;
    /// use tollgate_tower::top_refused::DEFAULT_TOP_K;
    ///
    /// let layer = RateLimitLayer::new(MemoryStore::new()).track_top_refused(DEFAULT_TOP_K);
    /// let report = layer.top_refused(&RuleId::new("login")?, 10).expect("tracked");
    /// assert!(report.callers.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn track_top_refused(mut self, k: usize) -> Self {
        Arc::make_mut(&mut self.settings).top_refused =
            Some(Arc::new(crate::top_refused::TopRefused::start(k)));
        self
    }

    /// `rule`'s `n` most refused callers over the last hour, shown as the layer's
    /// [`KeyLogging`] says (keyed fingerprints by default); `None` unless
    /// [`track_top_refused`](Self::track_top_refused) was called. Samples still in the channel
    /// are not yet counted.
    pub fn top_refused(
        &self,
        rule: &tollgate_core::RuleId,
        n: usize,
    ) -> Option<crate::top_refused::TopRefusedReport> {
        let top = self.settings.top_refused.as_ref()?;
        Some(top.report(rule, n, self.settings.key_logging))
    }

    /// The rules whose refusals [`top_refused`](Self::top_refused) has counted (empty unless
    /// tracked).
    pub fn top_refused_rules(&self) -> Vec<tollgate_core::RuleId> {
        self.settings
            .top_refused
            .as_ref()
            .map(|top| top.rules())
            .unwrap_or_default()
    }

    /// The feed into this layer's top-refused counter, when tracked: for refusals decided
    /// outside the layer (`tollgate_axum::Tollgate::from_layer` uses it for typed limits).
    pub fn top_refused_feed(&self) -> Option<crate::top_refused::TopRefusedFeed> {
        let top = self.settings.top_refused.as_ref()?;
        Some(crate::top_refused::TopRefusedFeed(Arc::clone(top)))
    }

    /// Whether this layer records metrics.
    pub fn metrics_enabled(&self) -> bool {
        #[cfg(feature = "metrics")]
        return self.core.metrics.load(std::sync::atomic::Ordering::Acquire);
        #[cfg(not(feature = "metrics"))]
        false
    }

    /// Replaces every rule at once, for all services made from this layer value (and its clones
    /// made since the last builder call), without rebuilding them: the next request sees the new
    /// set.
    pub fn replace_rules(&self, rules: RuleSet) {
        self.core.rules.store(Arc::new(self.prepared(rules)));
    }

    /// The current rules.
    pub fn current_rules(&self) -> Arc<RuleSet> {
        self.core.rules.load_full()
    }

    /// Which rate-limit headers responses carry (default: the IETF fields, no legacy ones).
    pub fn headers(mut self, style: HeaderStyle) -> Self {
        Arc::make_mut(&mut self.settings).header_style = style;
        self
    }

    /// Renders refusals the service's own way (custom JSON, a gRPC status) instead of the
    /// default 429 problem response. Rules with [`RefusalAction::Respond`](crate::RefusalAction)
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
            .paths
            .push(pattern);
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
    /// assert_eq!(layer.gateway_index(), Some(3));
    /// ```
    pub fn gateway(mut self, index: u32) -> Self {
        Arc::make_mut(&mut self.settings).gateway = Some(index);
        self
    }

    /// This gateway's number, if set.
    pub fn gateway_index(&self) -> Option<u32> {
        self.settings.gateway
    }

    /// The store.
    pub fn store(&self) -> &St {
        &self.core.store
    }

    /// The store, shared: what code outside the layer (typed limits in handlers) counts in, so
    /// both count the same callers together.
    pub fn shared_store(&self) -> Arc<St> {
        Arc::clone(&self.core.store)
    }

    /// The live-quota registry, if one was given.
    pub fn current_registry(&self) -> Option<&QuotaRegistry> {
        self.settings.registry.as_ref()
    }

    /// Which rate-limit headers responses carry: the current rule set's style
    /// ([`RuleSet::headers`], a rule file's `headers`), else the layer's.
    pub fn current_header_style(&self) -> HeaderStyle {
        self.core
            .rules
            .load()
            .header_style(self.settings.header_style)
    }

    /// How keys appear in events.
    pub fn current_key_logging(&self) -> KeyLogging {
        self.settings.key_logging
    }

    /// The `Retry-After` of a 503 when the store is down and a rule fails closed.
    pub fn current_unavailable_retry_after(&self) -> Duration {
        self.settings.unavailable_retry_after
    }

    /// The responder hook, if one was given.
    pub fn current_responder(&self) -> Option<Responder> {
        self.settings.responder.clone()
    }
}

impl<S, St> Layer<S> for RateLimitLayer<St> {
    type Service = RateLimit<S, St>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::new(inner, Arc::clone(&self.core), Arc::clone(&self.settings))
    }
}
