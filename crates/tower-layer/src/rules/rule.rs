//! A rule: which policy, how much, who is counted, and what happens at the limit.

use std::fmt;
use std::sync::Arc;

use http::StatusCode;
use http::request::Parts;
use tollgate_core::{Counting, FleetModes, Mode, OnStoreFailure, Quota, RuleId, RuleIdError};

use crate::observe::alerts::AlertShare;
use crate::observe::notices::RuleNotices;
use crate::rules::actual_cost::SettleFrom;
use crate::rules::cost::Cost;
use crate::rules::escalation::{Escalated, Escalation};
use crate::rules::missing_key::MissingKey;
use crate::rules::on_refusal::OnRefusal;
use crate::rules::overrides::QuotaOverrides;
use tollgate_key::KeyExtractor;

/// One rate limit, as the layer applies it: the policy name, the algorithm and quota, who is
/// counted, the cost of a request, the mode, what a refusal does, what a missing key does, what
/// a store failure does, and whether the policy is shown in response headers.
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{OnStoreFailure, Quota, Rate};
/// use tollgate_tower::key::{Global, HeaderKey};
/// use tollgate_tower::{Rule, OnRefusal};
///
/// // The partner API: 200 a second per API key, fail open.
/// let partner = Rule::new(
///     "partner-api",
///     Quota::token_bucket(200, Rate::per_second(200))?,
///     HeaderKey::new(http::HeaderName::from_static("x-api-key")),
/// )?;
///
/// // Sign-ups: a global cap that fails closed and flags instead of refusing.
/// let signups = Rule::new("signups-global", Quota::fixed_window(2_000, Duration::from_secs(1))?, Global)?
///     .with_store_failure(OnStoreFailure::Closed)
///     .on_refusal(OnRefusal::Flag);
/// # let _ = (partner, signups);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Rule {
    pub(crate) id: RuleId,
    pub(crate) quota: Quota,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) cost: Cost,
    pub(crate) mode: Mode,
    pub(crate) on_refusal: OnRefusal,
    pub(crate) on_missing_key: MissingKey,
    pub(crate) on_store_failure: OnStoreFailure,
    /// What the rule asks of the store beyond an exact count, but its store's name (a
    /// `FleetModes` borrows the name it carries: [`fleet_modes`](Self::fleet_modes) lends it
    /// `store`).
    pub(crate) modes: FleetModes<'static>,
    /// The store it is counted in, among a `Stores` (`tollgate_wrappers`)' (`None`: the
    /// default one).
    pub(crate) store: Option<Arc<str>>,
    pub(crate) disclose: Option<bool>,
    pub(crate) count_when: Option<CountWhen>,
    pub(crate) escalation: Option<Escalated>,
    pub(crate) overrides: Option<Arc<QuotaOverrides>>,
    pub(crate) settle: Option<SettleFrom>,
    /// Charged per inbound gRPC message rather than per call ([`per_message`](Self::per_message)).
    pub(crate) per_message: bool,
    /// The share of its limit at which it alerts ([`with_alert_at`](Self::with_alert_at)).
    pub(crate) alert_at: Option<AlertShare>,
    /// The TOML table a rule file defined it with (`None`: built in code).
    pub(crate) source: Option<Arc<str>>,
    pub(crate) notices: Arc<RuleNotices>,
}

/// Decides from a response's status whether a request counts against a rule.
pub type CountWhen = Arc<dyn Fn(StatusCode) -> bool + Send + Sync>;

impl Rule {
    /// A rule named `id` (the policy name in headers and logs: `A-Z a-z 0-9 _ - .`, at most 64
    /// bytes) allowing `quota` per caller that `key` names. It enforces, costs 1, answers 429,
    /// skips requests without a key and fails open; change any of that with the methods below.
    ///
    /// `key` may also be an `Arc<dyn KeyExtractor>` shared with other rules (a rule file's named
    /// extractors are); it is kept as it is, not wrapped again.
    pub fn new(id: &str, quota: Quota, key: impl KeyExtractor) -> Result<Rule, RuleIdError> {
        Ok(Rule {
            id: RuleId::new(id)?,
            quota,
            key: tollgate_key::shared(key),
            cost: Cost::Fixed(1),
            mode: Mode::Enforce,
            on_refusal: OnRefusal::Reject,
            on_missing_key: MissingKey::Skip,
            on_store_failure: OnStoreFailure::Open,
            modes: FleetModes::new(),
            store: None,
            disclose: None,
            count_when: None,
            escalation: None,
            overrides: None,
            settle: None,
            per_message: false,
            alert_at: None,
            source: None,
            notices: Arc::default(),
        })
    }

    /// Blocks a caller for longer once it keeps sending after refusals (see [`Escalation`]).
    /// The strikes and the block live in the store under `<id>.strikes` and `<id>.block`, so
    /// the rule id must leave room for those suffixes (at most 56 bytes).
    pub fn escalate(mut self, escalation: Escalation) -> Result<Self, RuleIdError> {
        self.escalation = Some(Escalated::new(&self.id, escalation)?);
        Ok(self)
    }

    /// Counts a request only when its response's status satisfies `counts` — for example only
    /// failed logins (`|status| status == 401 || status == 403`). The request is charged up
    /// front, so concurrent attempts can never overshoot, and the charge is refunded with its
    /// receipt when the response says it should not count.
    ///
    /// ```
    /// use std::time::Duration;
    /// use http::StatusCode;
    /// use tollgate_core::Quota;
    /// use tollgate_tower::Rule;
    /// use tollgate_tower::key::HeaderKey;
    ///
    /// let failed_logins = Rule::new(
    ///     "failed-logins",
    ///     Quota::sliding_window_log(10, Duration::from_secs(15 * 60))?,
    ///     HeaderKey::new(http::HeaderName::from_static("x-login")),
    /// )?
    /// .count_only_when(|status| status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN);
    /// # let _ = failed_logins;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn count_only_when(
        mut self,
        counts: impl Fn(StatusCode) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.count_when = Some(Arc::new(counts));
        self
    }

    /// Gives particular callers (by key or by plan) other quotas than the rule's own; see
    /// [`QuotaOverrides`]. Empty overrides are none.
    #[must_use]
    pub fn overrides(mut self, overrides: QuotaOverrides) -> Self {
        self.overrides = (!overrides.is_empty()).then(|| Arc::new(overrides));
        self
    }

    /// Each request costs `cost` units (an expensive search might cost 10).
    #[must_use]
    pub fn cost(mut self, cost: u64) -> Self {
        self.cost = Cost::Fixed(cost);
        self
    }

    /// Each request costs what `cost` computes from its parts. A computed cost larger than the
    /// quota is refused with its own problem type, never a 500.
    #[must_use]
    pub fn cost_fn(mut self, cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.cost = Cost::Computed(Arc::new(cost));
        self
    }

    /// Each request's cost (or estimate, for a settled rule) is the integer in its header
    /// `name`; a request without it, or with a value that is not an integer, costs `default`.
    /// The caller sets the header, so a value below 1 counts as 1: a request can never make
    /// itself free (a cost of 0 always passes).
    ///
    /// ```
    /// use tollgate_core::{Quota, Rate};
    /// use tollgate_tower::{Rule, key::Global};
    ///
    /// let rule = Rule::new("tokens", Quota::token_bucket(1_000, Rate::per_second(100))?, Global)?
    ///     .cost_from_header(http::HeaderName::from_static("x-max-tokens"), 100);
    /// # let _ = rule;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn cost_from_header(mut self, name: http::HeaderName, default: u64) -> Self {
        self.cost = Cost::from_header(name, default);
        self
    }

    /// Settles each request's cost once its response is known: the rule's cost
    /// ([`cost`](Self::cost), [`cost_fn`](Self::cost_fn)) is an **estimate** taken up front, and
    /// the actual cost is read `from` the response (see [`SettleFrom`]) when its body ends.
    /// More than the estimate is charged as debt, which the caller's next requests pay before
    /// they are admitted (a request is refused while its caller owes); less is given back. For
    /// "tokens per minute" limits, bytes streamed, rows scanned.
    ///
    /// A caller with `K` requests in flight gets at most `K × (max actual − estimate)` past its
    /// limit, and owes it (up to 1,024 full allowances; see
    /// [`Estimate`](tollgate_core::Estimate)). An estimate is at least 1, so each request in
    /// flight holds at least one unit (an estimate of 0 would admit any number at once). A
    /// caller that owes is refused with a `Retry-After` until its debt and its estimate fit in
    /// one allowance; a debt and estimate larger than the limit wait until the allowance is
    /// whole, and what remains of the debt is paid over further refills (the caller is
    /// refused again with the rest of the wait). A settled rule is counted exactly in the store it
    /// names: never leased or synced, and a split rule's estimate stands (its local count keeps
    /// no receipt to settle against). A response the
    /// rule's [`count_only_when`](Self::count_only_when) says does not count settles at 0. A
    /// shadow or flag rule, a concurrency or a pacing quota settles nothing (their cost is
    /// taken exactly: a slot or a place in a queue is not spent); rule files refuse them all,
    /// and a split, leased or synced settled rule.
    ///
    /// ```
    /// use tollgate_core::{Quota, Rate};
    /// use tollgate_tower::{Rule, SettleFrom, key::HeaderKey};
    ///
    /// // 100,000 tokens a minute per API key: each call is admitted on an estimate of 500 and
    /// // settled with what the model reports in `x-tokens-used`.
    /// let tokens = Rule::new(
    ///     "llm-tokens",
    ///     Quota::token_bucket(100_000, Rate::per_minute(100_000))?,
    ///     HeaderKey::new(http::HeaderName::from_static("x-api-key")),
    /// )?
    /// .cost(500)
    /// .settle(SettleFrom::header(http::HeaderName::from_static("x-tokens-used")));
    /// assert!(tokens.settles());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn settle(mut self, from: SettleFrom) -> Self {
        self.settle = Some(from);
        self
    }

    /// Whether the rule settles its cost after the response ([`settle`](Self::settle)).
    pub fn settles(&self) -> bool {
        self.settle.is_some()
    }

    /// Charges every inbound message of a gRPC call instead of the call (feature `grpc`): the
    /// first message is paid when the call opens, with its other rules (so a call that opens
    /// with nothing left is refused at once, and a call that sends no message still pays one);
    /// each further message of a client-streaming or bidirectional call is checked as it
    /// arrives, at the rule's cost per message, and a refused message ends the call with
    /// `RESOURCE_EXHAUSTED` (its `RetryInfo` and `QuotaFailure` as for a refused call). The
    /// service's handler reads the refusal as the error of its inbound stream; whatever it does
    /// with it (swallows it, answers another status), the call ends with the refusal's status. A
    /// pacing quota holds each message back for its delay. A call in progress keeps the rules it
    /// opened with when the rule set is replaced.
    ///
    /// Every request the rule matches is read as a stream of gRPC messages, whatever its
    /// `content-type` says (tonic serves a method without looking at it, so a client could
    /// otherwise label a call as something else and send unlimited messages): put per-message
    /// rules on gRPC methods ([`RateLimitLayer::grpc`](crate::RateLimitLayer::grpc)). The layer
    /// reads the framing itself, so it needs a request body it can wrap: tonic's
    /// (`Server::builder().layer(..)`) or axum's (a tonic service routed by axum); any other
    /// body makes the request answer `INTERNAL` (`500` to HTTP callers), logged as a
    /// misconfiguration, never a call let through uncounted.
    ///
    /// Every message is counted exactly: [`settle`](Self::settle) and
    /// [`count_only_when`](Self::count_only_when) do not apply, refusals mid-call do not
    /// [`escalate`](Self::escalate), and a concurrency quota keeps counting calls (a slot is
    /// held by a call, not by a message); rule files refuse those combinations.
    ///
    /// ```
    /// use tollgate_core::{Quota, Rate};
    /// use tollgate_tower::{RateLimitLayer, Rule, key::HeaderKey};
    ///
    /// // 100 uploaded chunks a minute per API key, however many calls they come in.
    /// let chunks = Rule::new(
    ///     "upload-chunks",
    ///     Quota::token_bucket(100, Rate::per_minute(100))?,
    ///     HeaderKey::new(http::HeaderName::from_static("x-api-key")),
    /// )?
    /// .per_message();
    /// assert!(chunks.is_per_message());
    /// let layer = RateLimitLayer::new(tollgate_core::MemoryStore::new())
    ///     .grpc("files.v1.Uploads/Put", chunks)?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "grpc")]
    #[must_use]
    pub fn per_message(mut self) -> Self {
        self.per_message = true;
        self
    }

    /// Whether the rule charges each inbound gRPC message ([`per_message`](Self::per_message),
    /// feature `grpc`); a concurrency rule never does.
    pub fn is_per_message(&self) -> bool {
        self.per_message && self.quota.algorithm() != tollgate_core::Algorithm::Concurrency
    }

    /// Alerts when a caller reaches `share` of its limit — the global cap on one-time codes at
    /// 80 %, say — so an operator hears of it before the cap refuses anyone: a `warn` event on
    /// target `tollgate::alert` once when raised and an `info` one once when cleared, the
    /// gauge `tollgate_rule_alerting{rule}` and the counter `tollgate_alerts_total{rule}` (with
    /// [`metrics`](crate::RateLimitLayer::metrics)), and
    /// [`LayerHandle::alerts`](crate::LayerHandle::alerts) (the admin API's health and status
    /// page). For a per-key rule, any key at the share raises the rule's alert; it clears once
    /// no key has reached the share for as long as its allowance takes to be whole again (see
    /// [`observe::alerts`](crate::observe::alerts)). The request path compares the decision's
    /// remaining and limit, and touches one atomic word past the share; events and metrics
    /// change only with the alert. Only the layer's rules alert (not typed limits).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::Quota;
    /// use tollgate_tower::{AlertShare, Rule, key::Global};
    ///
    /// let codes = Rule::new("otp-global", Quota::fixed_window(2_000, Duration::from_secs(1))?, Global)?
    ///     .with_alert_at(AlertShare::new(0.8)?);
    /// assert_eq!(codes.alert_at(), Some(AlertShare::new(0.8)?));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_alert_at(mut self, share: AlertShare) -> Self {
        self.alert_at = Some(share);
        self
    }

    /// The share of its limit at which the rule alerts, if it does
    /// ([`with_alert_at`](Self::with_alert_at)).
    pub fn alert_at(&self) -> Option<AlertShare> {
        self.alert_at
    }

    /// Shadow mode: never refuses; would-be refusals are recorded (a `tollgate::refusal` event).
    #[must_use]
    pub fn shadow(mut self) -> Self {
        self.mode = Mode::Shadow;
        self
    }

    /// Sets the mode.
    #[must_use]
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// What a refusal by this rule does (default: 429).
    #[must_use]
    pub fn on_refusal(mut self, action: OnRefusal) -> Self {
        self.on_refusal = action;
        self
    }

    /// What a request without this rule's key does (default: skip the rule; but a key that
    /// cannot be found because of the deployment answers 500, see [`MissingKey`]).
    #[must_use]
    pub fn on_missing_key(mut self, missing: MissingKey) -> Self {
        self.on_missing_key = missing;
        self
    }

    /// What happens when the store cannot answer (default: open, the rule is not applied).
    /// `Closed` answers 503 with `Retry-After`. `Local` and `OpenWithin` count in this gateway's
    /// memory, which needs a store that keeps one: wrap the shared store in
    /// `FallbackStore` (`tollgate_wrappers`) (it also gives every call a timeout and a
    /// circuit breaker). With a plain store that simply fails, the layer can only tell open from
    /// closed, and `Local` and `OpenWithin` fail open.
    #[must_use]
    pub fn with_store_failure(mut self, policy: OnStoreFailure) -> Self {
        self.on_store_failure = policy;
        self
    }

    /// How the rule is counted across a fleet of gateways (default: exactly, in the shared store
    /// on every check). [`Counting::Lease`] and [`Counting::Sync`] trade a stated, bounded
    /// overshoot for far fewer store calls on hot keys; they need the layer's store to be (or
    /// hold, as its default store) a `FleetStore` (`tollgate_wrappers`): over any other
    /// store the rule is refused when installed (see
    /// [`Capabilities`](tollgate_core::Capabilities)). Pacing quotas are always counted exactly.
    ///
    /// ```
    /// use tollgate_core::{Counting, LeaseSettings, Quota, Rate};
    /// use tollgate_tower::{Rule, key::HeaderKey};
    ///
    /// let partner = Rule::new(
    ///     "partner-api",
    ///     Quota::token_bucket(200, Rate::per_second(200))?,
    ///     HeaderKey::new(http::HeaderName::from_static("x-api-key")),
    /// )?
    /// .with_counting(Counting::Lease(LeaseSettings::new().max_units(20)));
    /// assert_eq!(partner.counting().name(), "lease");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_counting(mut self, counting: Counting) -> Self {
        self.modes = self.modes.with_counting(counting);
        self
    }

    /// How the rule is counted across a fleet.
    pub fn counting(&self) -> Counting {
        self.modes.counting()
    }

    /// Shares the limit out among `gateways` gateways, each allowing its part with no shared
    /// state ([`Counting::Split`]): ⌊C/N⌋ or ⌈C/N⌉ of the limit and R/N of the rate, adding up
    /// to the limit when each gateway's layer knows its number
    /// ([`RateLimitLayer::gateway`](crate::RateLimitLayer::gateway)). Exact only when the load
    /// balancer spreads each caller's requests evenly. Needs a limit of at least `gateways`
    /// (else the rule is counted whole). Give the layer a store of this gateway's own — a
    /// `FleetStore` (`tollgate_wrappers`) (split rules never reach its shared store) or
    /// a `MemoryStore`; over a store the gateways share, without a `FleetStore`, the rule is
    /// refused when installed (every gateway's part would be counted in one shared key).
    ///
    /// ```
    /// use tollgate_core::{Quota, Rate};
    /// use tollgate_tower::{Rule, key::Global};
    ///
    /// // "Each of 50 servers allows 4 a second locally, with no shared state."
    /// let search = Rule::new("search", Quota::token_bucket(200, Rate::per_second(200))?, Global)?
    ///     .split(50);
    /// assert_eq!(search.counting().name(), "split");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn split(self, gateways: u32) -> Self {
        self.with_counting(Counting::Split(tollgate_core::SplitSettings::new(gateways)))
    }

    /// Spreads each key's count over `sub_buckets` sub-keys on different Redis Cluster slots,
    /// each with its part of the quota, for a key too hot for one shard (see
    /// `SubBuckets` (`tollgate_wrappers`), which a `FleetStore` (`tollgate_wrappers`)
    /// applies). A refusal may come while up to (S − 2)·⌈C/S⌉ + 2(c − 1) units are unused
    /// elsewhere. 1 (the default) keeps one key; a rule counted otherwise than exactly, or with
    /// a limit below `sub_buckets`, keeps one key; at most
    /// [`MAX_SUB_BUCKETS`](tollgate_core::MAX_SUB_BUCKETS). Changing it starts the rule's keys
    /// in new sub-buckets (like a new rule id).
    #[must_use]
    pub fn sub_buckets(mut self, sub_buckets: u32) -> Self {
        self.modes = self.modes.with_sub_buckets(sub_buckets);
        self
    }

    /// Refuses this rule's refused callers on this gateway, without asking the store, until the
    /// store said they may try again (see `BlockedCache` (`tollgate_wrappers`), which a
    /// `FleetStore` (`tollgate_wrappers`) applies). Same status, headers and
    /// `Retry-After`; counted as `refused_locally`.
    #[must_use]
    pub fn cache_blocked(mut self, cache_blocked: bool) -> Self {
        self.modes = self.modes.with_cache_blocked(cache_blocked);
        self
    }

    /// Answers only once a Redis replica holds the count, waiting at most `wait` (see
    /// [`FleetModes::with_replica_ack`]): a failover right after a check then cannot forget
    /// it. For login attempts and one-time codes, where a forgotten count is a fresh set of
    /// guesses; off by default (it adds a replica's round trip to each check). Only for rules
    /// counted exactly; a store with no replicas to wait for (in memory) refuses the rule when
    /// it is installed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::Quota;
    /// use tollgate_tower::{Rule, key::Global};
    ///
    /// let per_minute = Quota::fixed_window(5, Duration::from_secs(60))?;
    /// let login = Rule::new("login", per_minute, Global)?.replica_ack(Duration::from_millis(50));
    /// assert_eq!(login.fleet_modes().replica_ack(), Some(Duration::from_millis(50)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn replica_ack(mut self, wait: std::time::Duration) -> Self {
        self.modes = self.modes.with_replica_ack(wait);
        self
    }

    /// Counts this rule in the store named `name` of the layer's
    /// `Stores` (`tollgate_wrappers`) (a home region's Redis for security rules, say)
    /// instead of the default one.
    #[must_use]
    pub fn with_store(mut self, name: &str) -> Self {
        self.store = Some(Arc::from(name));
        self
    }

    /// What the rule asks of the store beyond an exact count — how it is counted across a
    /// fleet, sub-buckets, cached refusals, a named store, a replica's acknowledgement — as the store's
    /// [`Capabilities`](tollgate_core::Capabilities) check it.
    pub fn fleet_modes(&self) -> FleetModes<'_> {
        let modes: FleetModes<'_> = self.modes;
        modes.with_store(self.store.as_deref())
    }

    /// The store this rule names, if any.
    pub fn store_name(&self) -> Option<&str> {
        self.store.as_deref()
    }

    /// Whether the policy appears in `RateLimit` / `RateLimit-Policy` headers. By default
    /// enforced rules that answer 429 are shown; shadow, challenge and flag rules are not (don't
    /// show a spammer where the line is).
    #[must_use]
    pub fn disclose(mut self, disclose: bool) -> Self {
        self.disclose = Some(disclose);
        self
    }

    /// The policy name.
    pub fn id(&self) -> &RuleId {
        &self.id
    }

    /// The key this rule counts a caller named by `values` under (one value per part of its
    /// key, as an operator's reset names one; see
    /// [`KeyExtractor::key_from_values`](crate::key::KeyExtractor::key_from_values)): how a
    /// service outside HTTP — an Envoy rate limit service handed a descriptor's values — counts
    /// the same caller in the same place.
    ///
    /// ```
    /// use tollgate_core::{Quota, Rate};
    /// use tollgate_tower::Rule;
    /// use tollgate_tower::key::PeerIp;
    ///
    /// let rule = Rule::new("reads", Quota::gcra(Rate::per_second(5), 5)?, PeerIp::new())?;
    /// assert_eq!(rule.key_of_values(&["2001:db8::1"])?, rule.key_of_values(&["2001:db8::2"])?); // one /64
    /// assert!(rule.key_of_values(&["no address"]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key_of_values(
        &self,
        values: &[&str],
    ) -> Result<tollgate_core::Key, tollgate_key::KeyValueError> {
        tollgate_key::key_of_values(&*self.key, values)
    }

    /// The quota.
    pub fn quota(&self) -> &Quota {
        &self.quota
    }

    /// The quotas particular callers get instead of [`quota`](Self::quota) (set with
    /// [`overrides`](Self::overrides)); `None` when there are none.
    pub fn quota_overrides(&self) -> Option<&QuotaOverrides> {
        self.overrides.as_deref()
    }

    /// How many requests this rule (and every clone of it) has skipped because they had no key
    /// for it, since it was made. The first such skip is also logged at `warn`.
    pub fn keyless_skips(&self) -> u64 {
        self.notices.keyless_skips()
    }

    /// The TOML table a rule file defined this rule with, as the file would be written back
    /// (`None`: the rule was built in code).
    pub fn source_toml(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// Records the TOML table this rule was read from (rule files do), so that writing the
    /// rules back ([`source_toml`](Self::source_toml)) gives what was read.
    #[must_use]
    pub fn with_source_toml(mut self, toml: impl Into<Arc<str>>) -> Self {
        self.source = Some(toml.into());
        self
    }

    /// The rule's mode: enforcing, shadow, ...
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// What the rule does when the store cannot answer.
    pub fn on_store_failure(&self) -> OnStoreFailure {
        self.on_store_failure
    }

    /// Whether the rule can stop a request: enforced (not shadow) and not a flag rule. Only such
    /// a rule refuses when its quota is spent, or fails closed when the store is down.
    ///
    /// ```
    /// use tollgate_core::{Quota, Rate};
    /// use tollgate_tower::{OnRefusal, Rule, key::PeerIp};
    ///
    /// let quota = Quota::token_bucket(10, Rate::per_second(1))?;
    /// let rule = Rule::new("reads", quota, PeerIp::new())?;
    /// assert!(rule.can_refuse());
    /// assert!(!rule.clone().shadow().can_refuse());
    /// assert!(!rule.on_refusal(OnRefusal::Flag).can_refuse());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn can_refuse(&self) -> bool {
        matches!(self.store_mode(), Mode::Enforce | Mode::ReadOnly)
    }

    /// How the rule is sent to the store: a flag rule as a shadow one (it never stops a
    /// request). What a service that counts the rule outside this layer (an Envoy rate limit
    /// service) gives its items.
    ///
    /// ```
    /// use tollgate_core::{Mode, Quota, Rate};
    /// use tollgate_tower::{OnRefusal, Rule};
    /// use tollgate_tower::key::Global;
    ///
    /// let rule = Rule::new("signups", Quota::gcra(Rate::per_minute(5), 5)?, Global)?;
    /// assert_eq!(rule.store_mode(), Mode::Enforce);
    /// assert_eq!(rule.on_refusal(OnRefusal::Flag).store_mode(), Mode::Shadow);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn store_mode(&self) -> Mode {
        match self.on_refusal {
            OnRefusal::Flag => Mode::Shadow,
            _ => self.mode,
        }
    }

    /// Whether the policy is shown in rate-limit headers: as the rule's `disclose` says, else
    /// when it enforces and answers a plain refusal (a challenge, a flag or a shadow rule is
    /// not announced).
    ///
    /// ```
    /// use tollgate_core::{Quota, Rate};
    /// use tollgate_tower::Rule;
    /// use tollgate_tower::key::Global;
    ///
    /// let rule = Rule::new("signups", Quota::gcra(Rate::per_minute(5), 5)?, Global)?;
    /// assert!(rule.is_disclosed());
    /// assert!(!rule.shadow().is_disclosed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_disclosed(&self) -> bool {
        self.disclose.unwrap_or(
            matches!(self.mode, Mode::Enforce | Mode::ReadOnly)
                && matches!(self.on_refusal, OnRefusal::Reject | OnRefusal::Unavailable),
        )
    }

    /// What `request` costs this rule (its estimate, for a settled rule).
    pub(crate) fn cost_of(&self, request: &Parts) -> u64 {
        self.cost.of(request)
    }
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule")
            .field("id", &self.id)
            .field("quota", &self.quota)
            .field("mode", &self.mode)
            .field("on_refusal", &self.on_refusal)
            .field("on_missing_key", &self.on_missing_key)
            .field("on_store_failure", &self.on_store_failure)
            .field("disclosed", &self.is_disclosed())
            .finish_non_exhaustive()
    }
}
