//! Which rules apply to a request: rules for every request, and a table of method + path
//! pattern rows.

use std::sync::Arc;

use http::Method;
use http::request::Parts;

use crate::headers::HeaderStyle;
use crate::observe::observers::{Observed, Observers, RuleObservers};
use crate::rules::exemptions::Exemptions;
use crate::rules::grpc_method::grpc_method_pattern;
use crate::rules::path_index::PathIndex;
use crate::rules::path_pattern::{PathPattern, PathPatternError};
use crate::rules::rule::Rule;
use tollgate_core::{Capabilities, RuleId, Unsupported};
use tollgate_key::MatchedPattern;
use tollgate_key::client_ip::Cidr;

/// Where a rule sits in a [`RuleSet`], so a request's plan can outlive a borrow of the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleRef {
    Everywhere(usize),
    Route(usize),
}

/// One row of the route table.
#[derive(Debug, Clone)]
struct Route {
    method: Option<Method>,
    pattern: PathPattern,
    rule: Rule,
}

/// Every rule a layer knows: rules for every request, and route rows. Swappable at runtime
/// through [`LayerHandle::replace_rules`](crate::LayerHandle::replace_rules).
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    everywhere: Vec<Rule>,
    routes: Vec<Route>,
    /// The route rows' patterns as one tree, made on the first request after rows change.
    route_index: std::sync::OnceLock<PathIndex>,
    exemptions: Exemptions,
    header_style: Option<HeaderStyle>,
    /// What the layer's observers keep for each rule, by position (`everywhere`, then
    /// `routes`), made when the set is installed.
    observers: Option<Arc<[RuleObservers]>>,
    /// Why the layer's store cannot count each rule as it asks (`None`: it can), by position,
    /// found when the set is installed.
    unsupported: Option<Arc<[Option<Unsupported>]>>,
}

impl RuleSet {
    /// An empty set.
    pub fn new() -> Self {
        RuleSet::default()
    }

    /// Adds a rule for every request.
    #[must_use]
    pub fn rule(mut self, rule: Rule) -> Self {
        self.everywhere.push(rule);
        self.positions_changed();
        self
    }

    /// Observers and checks are by position: a set whose rules moved drops them (the layer that
    /// installs it makes new ones).
    fn positions_changed(&mut self) {
        self.observers = None;
        self.unsupported = None;
        self.route_index = std::sync::OnceLock::new();
    }

    /// Adds a rule for requests with `method` whose path matches `pattern` (a `GET` row also
    /// matches `HEAD`, which servers answer with the GET handler); an error when `pattern` is
    /// not a valid [`PathPattern`].
    pub fn route(
        self,
        method: Method,
        pattern: &str,
        rule: Rule,
    ) -> Result<Self, PathPatternError> {
        Ok(self.route_pattern(Some(method), PathPattern::new(pattern)?, rule))
    }

    /// Adds a rule for requests of any method whose path matches `pattern`; an error when
    /// `pattern` is not a valid [`PathPattern`].
    pub fn any_method(self, pattern: &str, rule: Rule) -> Result<Self, PathPatternError> {
        Ok(self.route_pattern(None, PathPattern::new(pattern)?, rule))
    }

    /// Adds a rule for gRPC calls to `method` (`"chirp.v1.Feed/Get"`, or `"chirp.v1.Feed/*"`
    /// for every method of the service; see [`grpc_method_pattern`](crate::grpc_method_pattern)):
    /// requests to its path whatever their HTTP method (tonic serves any).
    pub fn grpc(self, method: &str, rule: Rule) -> Result<Self, PathPatternError> {
        let pattern = grpc_method_pattern(method)?;
        Ok(self.route_pattern(None, pattern, rule))
    }

    /// Requests whose path matches `pattern` skip limiting (besides the layer's own
    /// exemptions, [`RateLimitLayer::exempt_path`](crate::RateLimitLayer::exempt_path)); swapped
    /// with the rest of the set.
    pub fn exempt_path(mut self, pattern: &str) -> Result<Self, PathPatternError> {
        self.exemptions.add_paths([PathPattern::new(pattern)?]);
        Ok(self)
    }

    /// Adds checked exempt patterns (a rule file's) in one pass.
    pub fn exempt_patterns(mut self, patterns: impl IntoIterator<Item = PathPattern>) -> Self {
        self.exemptions.add_paths(patterns);
        self
    }

    /// Requests from a peer in `network` skip limiting (besides the layer's own exemptions;
    /// mind [`RateLimitLayer::exempt_network`](crate::RateLimitLayer::exempt_network)'s warning
    /// about load balancers).
    #[must_use]
    pub fn exempt_network(mut self, network: Cidr) -> Self {
        self.exemptions.peers.push(network);
        self
    }

    /// Which rate-limit headers responses carry while this set is in force, instead of the
    /// layer's [`headers`](crate::RateLimitLayer::headers).
    #[must_use]
    pub fn headers(mut self, style: HeaderStyle) -> Self {
        self.header_style = Some(style);
        self
    }

    /// The set with what `observers` keep for each of its rules (made now, once: the request
    /// path only uses them).
    pub(crate) fn observed_by(mut self, observers: &Observers) -> Self {
        let each: Vec<RuleObservers> = self
            .rules()
            .map(|rule| {
                let notices = Arc::clone(&rule.notices);
                observers.of_rule(&rule.id, notices, Observed::LayerRule, rule.alert_at)
            })
            .collect();
        self.observers = Some(each.into());
        self
    }

    /// The set with each rule checked against what the layer's store can do.
    pub(crate) fn checked_against(mut self, capabilities: &Capabilities) -> Self {
        let found: Vec<Option<Unsupported>> = self
            .rules()
            .map(|rule| capabilities.supports(&rule.fleet_modes()).err())
            .collect();
        self.unsupported = found.iter().any(Option::is_some).then(|| found.into());
        self
    }

    /// The first rule of a checked set the layer's store cannot count as it asks, and why.
    pub(crate) fn first_unsupported(&self) -> Option<(RuleId, Unsupported)> {
        let found = self.unsupported.as_ref()?;
        self.rules()
            .zip(found.iter())
            .find_map(|(rule, unsupported)| Some((rule.id.clone(), unsupported.clone()?)))
    }

    /// Why the layer's store cannot count the rule `at` names as it asks, once installed.
    pub(crate) fn unsupported(&self, at: RuleRef) -> Option<&Unsupported> {
        self.unsupported.as_ref()?.get(self.position(at))?.as_ref()
    }

    /// What the layer's observers keep for the rule `at` names, once the set is installed.
    pub(crate) fn observers(&self, at: RuleRef) -> Option<&RuleObservers> {
        self.observers.as_ref()?.get(self.position(at))
    }

    /// Where the rule `at` names is among [`rules`](Self::rules).
    fn position(&self, at: RuleRef) -> usize {
        match at {
            RuleRef::Everywhere(index) => index,
            RuleRef::Route(index) => self.everywhere.len() + index,
        }
    }

    /// Whether the set exempts `request` from limiting.
    pub(crate) fn exempts(&self, request: &Parts) -> bool {
        self.exemptions.covers(request)
    }

    /// The header style in force: the set's (a rule file's `headers`), else `layer`'s.
    ///
    /// ```
    /// use tollgate_tower::RuleSet;
    /// use tollgate_tower::headers::HeaderStyle;
    ///
    /// let set = RuleSet::new().headers(HeaderStyle::default().with_legacy(true));
    /// assert!(set.header_style(HeaderStyle::default()).legacy());
    /// assert!(!RuleSet::new().header_style(HeaderStyle::default()).legacy());
    /// ```
    pub fn header_style(&self, layer: HeaderStyle) -> HeaderStyle {
        self.header_style.unwrap_or(layer)
    }

    /// Adds a row for an already checked pattern (`None`: any method), as
    /// [`route`](Self::route) does for a pattern written as text.
    #[must_use]
    pub fn route_pattern(
        mut self,
        method: Option<Method>,
        pattern: PathPattern,
        rule: Rule,
    ) -> Self {
        self.routes.push(Route {
            method,
            pattern,
            rule,
        });
        self.positions_changed();
        self
    }

    /// Every rule that applies to `request` — rules for every request first, then matching rows
    /// in the order they were added — and the first matching row's pattern.
    pub(crate) fn matching(
        &self,
        request: &Parts,
        mut each: impl FnMut(RuleRef),
    ) -> Option<MatchedPattern> {
        (0..self.everywhere.len()).for_each(|index| each(RuleRef::Everywhere(index)));
        if self.routes.is_empty() {
            return None;
        }
        let mut first = None;
        let path = request.uri.path();
        let index = self
            .route_index
            .get_or_init(|| PathIndex::new(self.routes.iter().map(|route| &route.pattern)));
        let mut rows = index.matching(path);
        rows.sort_unstable();
        for index in rows {
            let route = &self.routes[index];
            let method_matches = route.method.as_ref().is_none_or(|method| {
                // A HEAD request runs the GET handler (axum's `get` serves both), so GET rows
                // count it too.
                *method == request.method
                    || (*method == Method::GET && request.method == Method::HEAD)
            });
            if method_matches {
                first.get_or_insert_with(|| MatchedPattern(Arc::clone(route.pattern.text())));
                each(RuleRef::Route(index));
            }
        }
        first
    }

    /// The rule `at` names (`None` only for a reference into another set).
    pub(crate) fn get(&self, at: RuleRef) -> Option<&Rule> {
        match at {
            RuleRef::Everywhere(index) => self.everywhere.get(index),
            RuleRef::Route(index) => self.routes.get(index).map(|route| &route.rule),
        }
    }

    /// Every rule of the set: rules for every request, then route rows, in the order added.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::Quota;
    /// use tollgate_tower::key::Global;
    /// use tollgate_tower::{Rule, RuleSet};
    ///
    /// let rules = RuleSet::new().rule(Rule::new("cap", Quota::fixed_window(10, Duration::from_secs(1))?, Global)?);
    /// let ids: Vec<&str> = rules.rules().map(|rule| rule.id().as_str()).collect();
    /// assert_eq!(ids, ["cap"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        (self.everywhere.iter()).chain(self.routes.iter().map(|route| &route.rule))
    }

    /// Whether the set has no rules at all.
    pub fn is_empty(&self) -> bool {
        self.everywhere.is_empty() && self.routes.is_empty()
    }
}
