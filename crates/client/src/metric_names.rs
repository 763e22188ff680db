//! The names the client's counters are recorded under (feature `metrics` records them), for
//! dashboards and alerts that must name exactly what is emitted.

/// Retries sent after a refusal, labelled `status` (the refusal's HTTP status).
pub const RETRIES: &str = "tollgate_client_retries_total";
/// Refusals given back to the caller without a retry, labelled `reason`.
pub const GAVE_UP: &str = "tollgate_client_gave_up_total";
/// Requests that waited for their host's shared cool-down before being sent.
pub const COOL_DOWN_WAITS: &str = "tollgate_client_cool_down_waits_total";

/// Every name above.
pub const NAMES: &[&str] = &[RETRIES, GAVE_UP, COOL_DOWN_WAITS];
