//! Metrics through the [`metrics`] facade (feature `metrics`): the names every tollgate crate
//! records under, and what the store wrapper and the in-memory store record.
//!
//! Labels are rule ids and fixed words only — never a caller's key — so a metric's cardinality
//! is bounded by the rules a service defines (escalating rules add their `<id>.block` item).
//! Nothing is recorded unless turned on
//! (`FallbackStoreBuilder::metrics`,
//! `RateLimitLayer::metrics` in `tollgate-tower`); handles are created when a store is built, a
//! rule set installed, or (fall-back and typed-limit handles) on first use, never per request,
//! so the recorder must be installed before (with `metrics-exporter-prometheus`, before
//! building the layer). Requests answered without the store (a fail-closed 503, a missing key
//! refused) are not in `tollgate_checks_total`; the store wrapper's metrics count outages.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `tollgate_checks_total` | counter | `rule`, `outcome` | each rule's own decision per request the store answered: `allowed`, `refused`, `shadow_refused` (a shadow or flag rule's would-be refusal), `refused_locally` (refused by a `BlockedCache` on this gateway, without a store call, until the time the store gave); typed limits count under their ids (handles made on a limit's first use) |
//! | `tollgate_near_limit_total` | counter | `rule` | allowed checks that left less than 20 % of the limit |
//! | `tollgate_in_flight` | gauge | `rule` | slots of a concurrency rule held by requests running through this gateway's layer |
//! | `tollgate_rule_alerting` | gauge | `rule` | 1 while a rule that states an alert share (`alert_at`) is alerting — a caller reached that share of its limit, and its allowance has not been whole since — else 0 (made when the rule is installed) |
//! | `tollgate_alerts_total` | counter | `rule` | alerts raised (each is a `warn` event on target `tollgate::alert`; its clearing an `info` one) |
//! | `tollgate_envoy_answers_total` | counter | `code` | `tollgate-envoy`'s answers to Envoy's `ShouldRateLimit`: `ok`, `over_limit`, `unavailable` (the store could not answer and a rule fails closed), `invalid_argument` |
//! | `tollgate_envoy_quota_actions_total` | counter | `action` | `tollgate-envoy`'s quota service's bucket actions sent to Envoys: `token_bucket`, `allow_all`, `deny_all`, `abandon` |
//! | `tollgate_store_errors_total` | counter | `store`, `kind` | failed calls to the primary store: `timeout`, `unavailable`, `protocol`, `capacity`, `time_out_of_range` |
//! | `tollgate_store_seconds` | histogram | `store` | how long the primary store took to answer (or to time out) |
//! | `tollgate_fallback_active` | gauge | `store`, `rule` | 1 while the rule is answered by its failure policy (made when the rule first falls back) |
//! | `tollgate_fallback_decisions_total` | counter | `store`, `rule`, `policy` | answers by a failure policy (`open`, `open_within`, `local`, `closed`; a call failed closed counts its closed rules only) |
//! | `tollgate_breaker_open` | gauge | `store` | 1 while the circuit breaker is open (for a store of several nodes, the breaker of requests spanning them) |
//! | `tollgate_node_breaker_open` | gauge | `store`, `node` | 1 while the breaker of one node of the primary is open (a Redis Cluster master, by address: [`Store::node_of`](crate::Store::node_of); `a+b` for requests spread over several), 0 once it closes or the node is forgotten |
//! | `tollgate_config_loads_total` | counter | `result` | rule files and fleet documents loaded (`success`) or refused (`error`) |
//! | `tollgate_memory_keys` | gauge | | keys held by the in-memory store ([`MemoryStore::publish_metrics`](crate::MemoryStore::publish_metrics)) |
//! | `tollgate_memory_lossy_evictions_total` | counter | | live states evicted because the in-memory store was full |
//! | `tollgate_blocked_keys` | gauge | | callers a `BlockedCache` remembers as blocked (`BlockedCache::publish_metrics`) |
//! | `tollgate_blocked_refused_locally_total` | counter | | requests it refused without a store call (per rule: `tollgate_checks_total{outcome="refused_locally"}`) |
//! | `tollgate_fleet_decided_locally_total` | counter | | leased or synced checks a `FleetStore` decided without a store call (`FleetStore::publish_metrics`, and every tick of its ticker) |
//! | `tollgate_fleet_store_calls_total` | counter | | its calls to the shared store for leased or synced rules: leases, top-ups, give-backs, pushes |
//! | `tollgate_fleet_leases_returned_total` | counter | | leases whose unspent units went back to the shared store |
//! | `tollgate_fleet_failed_pushes_total` | counter | | pushes of synced spend the shared store did not take (the spend is kept and pushed again) |
//! | `tollgate_fleet_unsynced_units` | gauge | | units spent on this gateway and not yet in the shared count |
//!
//! The same names reach OpenTelemetry through any `metrics` recorder that exports to it (for
//! instance `metrics-exporter-opentelemetry`), or by scraping the Prometheus endpoint with the
//! OpenTelemetry Collector's `prometheus` receiver.

/// Each rule's decision per request.
pub const CHECKS: &str = "tollgate_checks_total";
/// Allowed checks that left less than 20 % of the limit.
pub const NEAR_LIMIT: &str = "tollgate_near_limit_total";
/// Gauge: slots of a concurrency rule held by requests running through this gateway's layer.
pub const IN_FLIGHT: &str = "tollgate_in_flight";
/// Gauge: 1 while a rule is alerting (a caller reached its alert share of its limit), else 0.
pub const RULE_ALERTING: &str = "tollgate_rule_alerting";
/// Alerts raised, per rule.
pub const ALERTS: &str = "tollgate_alerts_total";
/// `tollgate-envoy`'s answers to `ShouldRateLimit`, by code.
pub const ENVOY_ANSWERS: &str = "tollgate_envoy_answers_total";
/// `tollgate-envoy`'s quota service's bucket actions, by action.
pub const ENVOY_QUOTA_ACTIONS: &str = "tollgate_envoy_quota_actions_total";
/// Failed calls to the primary store.
pub const STORE_ERRORS: &str = "tollgate_store_errors_total";
/// How long the primary store took to answer.
pub const STORE_SECONDS: &str = "tollgate_store_seconds";
/// 1 while a rule is answered by its failure policy.
pub const FALLBACK_ACTIVE: &str = "tollgate_fallback_active";
/// Answers by a failure policy.
pub const FALLBACK_DECISIONS: &str = "tollgate_fallback_decisions_total";
/// 1 while the circuit breaker is open.
pub const BREAKER_OPEN: &str = "tollgate_breaker_open";
/// 1 while the circuit breaker of one node of the primary store is open.
pub const NODE_BREAKER_OPEN: &str = "tollgate_node_breaker_open";
/// Rule sources loaded or refused.
pub const CONFIG_LOADS: &str = "tollgate_config_loads_total";
/// Keys held by the in-memory store.
pub const MEMORY_KEYS: &str = "tollgate_memory_keys";
/// States still in use evicted because the in-memory store was full.
pub const MEMORY_LOSSY_EVICTIONS: &str = "tollgate_memory_lossy_evictions_total";

/// Callers a blocked-caller cache remembers.
pub const BLOCKED_KEYS: &str = "tollgate_blocked_keys";
/// Requests a blocked-caller cache refused without a store call.
pub const BLOCKED_REFUSED_LOCALLY: &str = "tollgate_blocked_refused_locally_total";

/// Leased or synced checks decided without a store call.
pub const FLEET_DECIDED_LOCALLY: &str = "tollgate_fleet_decided_locally_total";
/// Calls to the shared store for leased or synced rules.
pub const FLEET_STORE_CALLS: &str = "tollgate_fleet_store_calls_total";
/// Leases whose unspent units went back.
pub const FLEET_LEASES_RETURNED: &str = "tollgate_fleet_leases_returned_total";
/// Pushes of synced spend the shared store did not take.
pub const FLEET_FAILED_PUSHES: &str = "tollgate_fleet_failed_pushes_total";
/// Units spent here and not yet in the shared count.
pub const FLEET_UNSYNCED_UNITS: &str = "tollgate_fleet_unsynced_units";
/// Synced rules counted exactly because the fleet syncing them is too large for their limit.
pub const FLEET_RULES_COUNTED_EXACTLY: &str = "tollgate_fleet_rules_counted_exactly";

/// Every name above, for dashboards and alerts that must name exactly what is recorded.
pub const NAMES: &[&str] = &[
    CHECKS,
    NEAR_LIMIT,
    IN_FLIGHT,
    RULE_ALERTING,
    ALERTS,
    ENVOY_ANSWERS,
    ENVOY_QUOTA_ACTIONS,
    STORE_ERRORS,
    STORE_SECONDS,
    FALLBACK_ACTIVE,
    FALLBACK_DECISIONS,
    BREAKER_OPEN,
    NODE_BREAKER_OPEN,
    CONFIG_LOADS,
    MEMORY_KEYS,
    MEMORY_LOSSY_EVICTIONS,
    BLOCKED_KEYS,
    BLOCKED_REFUSED_LOCALLY,
    FLEET_DECIDED_LOCALLY,
    FLEET_STORE_CALLS,
    FLEET_LEASES_RETURNED,
    FLEET_FAILED_PUSHES,
    FLEET_UNSYNCED_UNITS,
    FLEET_RULES_COUNTED_EXACTLY,
];

/// Whether an allowed check that left `remaining` of `limit` was near the limit (below 20 %).
pub fn is_near_limit(remaining: u64, limit: u64) -> bool {
    u128::from(remaining) * 5 < u128::from(limit)
}

#[cfg(test)]
mod tests {
    use super::is_near_limit;

    #[test]
    fn near_means_below_a_fifth_of_the_limit() {
        assert!(is_near_limit(1, 10));
        assert!(!is_near_limit(2, 10));
        assert!(is_near_limit(0, 1));
        assert!(!is_near_limit(u64::MAX, u64::MAX));
    }
}
