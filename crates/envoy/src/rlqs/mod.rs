//! The rate limit quota service (RLQS, `envoy.service.rate_limit_quota.v3`): Envoy's
//! `rate_limit_quota` filter enforces each bucket itself, with assignments this service leases
//! from the shared store — so a fleet of Envoys decides locally and the fleet-wide limit holds
//! within the bound below. [`QuotaService`] is the service; it shares a
//! [`RateLimitService`](crate::RateLimitService)'s store and rules
//! ([`RateLimitService::quota_service`](crate::RateLimitService::quota_service)): one rule file,
//! one watcher, both services.
//!
//! # Buckets and rules
//!
//! Each Envoy holds one stream; each report names the domain (its first report must) and, per
//! bucket, the bucket id (a map, key → value, in no order) and the requests Envoy allowed and
//! denied since its last report. A bucket matches a rule as a descriptor would (see
//! `tollgate_config`'s `DescriptorMatch`): a rule of the report's domain whose entries have
//! exactly the bucket's keys, the bucket's values read in the rule's entry order, each value
//! matching its entry; of those that match, the most specific wins. The caller is keyed exactly
//! as the rate limit service keys it (the values of the entries that are not exact, in the
//! rule's order, through the rule's key), so both services count the same callers under the
//! same store keys.
//!
//! | the bucket | its assignment |
//! |---|---|
//! | matches a counted rule | a **lease** (below): a token bucket, or `DENY_ALL` when the store has none |
//! | matches an `unlimited` rule, or one that does not enforce (shadow, flag) | `ALLOW_ALL`, nothing counted |
//! | matches no rule (or its domain has none) | `ALLOW_ALL`: an edge lets through what no rule limits (the filter's own matcher decides what is reported at all) |
//! | its values name no caller of its rule (an address entry's value is no address), or one is past [`caps::MAX_VALUE_BYTES`](crate::caps::MAX_VALUE_BYTES) | `DENY_ALL`: it cannot be counted |
//! | has reported no request for [`abandon_after`](QuotaService::abandon_after) (1 min) | abandoned: both sides forget it |
//! | is new on a stream already holding [`MAX_BUCKETS_PER_STREAM`] | abandoned (Envoy's `no_assignment_behavior` applies to it) |
//!
//! A report that cannot be answered — no domain on a stream's first report, another domain
//! later, no buckets, a bucket usage with no id or an empty one, an empty or overlong key, more
//! than [`MAX_BUCKETS_PER_REPORT`] buckets — ends the stream with `INVALID_ARGUMENT` saying why,
//! and counts nothing of it (an assignment must name its bucket; Envoy never sends these). A
//! bucket's values come from requests, so a bad value is answered for its bucket alone. When
//! Envoy closes its side the response stream ends with `OK`.
//!
//! # Leases
//!
//! A lease is one store charge of the rule's item (quota, key, failure policy, fleet modes),
//! taken **up to** its size ([`Take::UpTo`](tollgate_core::Take::UpTo): what there is, at
//! least one unit), assigned to that Envoy as a token bucket of exactly the units granted:
//! `max_tokens` = the grant, one token per fill of `fill_interval` = T + 1 s, so no token is
//! added before the assignment ends (each new lease is a new bucket, see below). Nothing
//! granted: `DENY_ALL`.
//!
//! * **Size.** At most U = ⌈C / [`leases_per_limit`](QuotaService::leases_per_limit)⌉ of the
//!   limit C (default ⌈C/10⌉). A stream's first lease for a bucket is U (Envoy reports a bucket
//!   when traffic arrives); later ones are twice the requests (allowed + denied) of the report
//!   that asked, between 1 and U.
//! * **When.** Decided at each report: a bucket's first report; when the requests Envoy
//!   reports allowed since its lease reach the lease; after a `DENY_ALL`, at the first report
//!   at or after the store's retry time; when the rule or its quota changed; at the first report
//!   in the second half of an assignment's life; and at every report while the store cannot
//!   answer. Otherwise nothing is sent: the assignment stands. A replaced lease's unspent units
//!   stay charged.
//! * **Time to live.** Every assignment — token bucket, `DENY_ALL`, `ALLOW_ALL` — lives T =
//!   [`assignment_ttl`](QuotaService::assignment_ttl) (default 15 s, whole seconds), renewed
//!   before it lapses as long as Envoy reports at least every T/2 minus a round trip; Envoy
//!   1.40 reports every 5 s. A `DENY_ALL` that outlasts the store's retry time is replaced at
//!   the next report, so it never lapses into Envoy's own behaviour between reports.
//! * **What Envoy let through on its own.** Every report's allowed requests add to what the
//!   bucket admitted on the stream; every unit charged for it (leases, debt) to what is
//!   covered. What Envoy admitted beyond that — its `no_assignment_behavior` before the first
//!   assignment arrived, or after one lapsed — is charged as **debt**
//!   ([`Take::AsDebt`](tollgate_core::Take::AsDebt)) before the next lease: everything Envoy
//!   reports allowed is counted, before (a lease) or after (debt). Requests let through under
//!   `ALLOW_ALL` are not.
//! * **Store failure.** A rule whose store cannot answer follows its `on_store_failure`, as
//!   a `FallbackStore` carries it out: `open` → `ALLOW_ALL`, uncounted; `local` → a lease from
//!   the fallback's local memory; `open_within` → a lease of one unit counted in local memory
//!   (the fallback reports no grant); `closed` (or a store without a fallback) → `DENY_ALL`.
//!   Each lives T and is asked again at the next report.
//!
//! # The fleet-wide bound
//!
//! In the terms of the fleet modes table (the guide's `fleet-modes.md`): G Envoys reporting a
//! bucket, each one stream (an Envoy's workers share it); C the limit, R a token bucket's (or
//! GCRA's) refill rate; U ≤ ⌈C / `leases_per_limit`⌉ the lease; T the assignment's time to
//! live; I Envoy's report interval (5 s); E what the Envoys admit on their own — by
//! `no_assignment_behavior` between a bucket's first request and its first assignment (one
//! round trip and a store call; the whole connection's set-up for a stream's first bucket), or
//! after an assignment lapsed — which they report within I and which is charged then as debt.
//!
//! | mode | what an Envoy does | store calls | over-admission, any interval | under-admission |
//! |---|---|---|---|---|
//! | RLQS lease | spends a token bucket of a lease's units locally; reports every I; at a report the service leases again when the lease is spent, a `DENY_ALL`'s retry time passed, or the assignment is in the second half of T | one per Envoy per bucket per lease (two when debt is charged), at most one per report | windows: ≤ G·U per window (a lease drawn in one window may be spent in the next: it lives T, and a whole-second TTL cannot end with its window); token buckets and GCRA: ≤ min(R·T, G·U) (units held while the bucket refills, as FleetStore's leases with L = T); plus E, charged as debt a report later, so paid back from later allowance; E = 0 with `no_assignment_behavior: DENY_ALL` and no `expired_assignment_behavior` that allows (the first requests of each new bucket are then refused until its assignment lands) | a spent lease, or a refill after `DENY_ALL`, waits for the next report: up to I (5 s) of a bucket's traffic per Envoy; units of a lease replaced unspent (renewed at T/2, or a stream closed): ≤ U per Envoy per renewal |
//!
//! Leases alone never take more than the store has: each is an up-to charge in the store the
//! rate limit service counts in, and Envoy's token bucket holds exactly its lease and gains no
//! token before the assignment ends. `crates/envoy/tests/rlqs_streams.rs` shows two Envoys on
//! one bucket leased exactly the limit between them, on memory, Redis and Redis Cluster.
//!
//! # What Envoy 1.40's filter does, and needs
//!
//! Read from its source and seen through a real Envoy (`crates/envoy/tests/rlqs_envoy.rs`,
//! with `EnvoyConfig::log_level("debug")` in the harness), where it differs from the protos'
//! comments:
//!
//! * it ignores the bucket's `reporting_interval` and reports every bucket every **5 s**
//!   (hard-coded): the default T of 15 s leaves one report in each assignment's second half
//!   with 2.5 s to spare; a shorter T lets assignments lapse between reports;
//! * it reads only the **whole seconds** of `assignment_time_to_live`, and an unset or zero
//!   one expires at once (the proto: unset never expires) — every assignment here has T ≥ 1 s;
//! * an assignment that expires puts the bucket back on `expired_assignment_behavior`'s
//!   `fallback_rate_limit` for its timeout, else on `no_assignment_behavior` (the proto says the
//!   bucket is abandoned); `reuse_last_assignment` is treated as unset;
//! * a token bucket's `fill_interval` counts in whole seconds (below one, the rate divides by
//!   zero: a bucket that never runs out), an unset `tokens_per_fill` is read as 0 (the proto:
//!   1; Envoy then fills a token a year), and a token bucket equal to the one held — compared by `max_tokens`,
//!   `tokens_per_fill` and `fill_interval.nanos` only — is kept with its tokens and its TTL
//!   extended. So each lease carries a marker in `fill_interval.nanos` (0 and 1 by turns): a
//!   new lease is always a new, full bucket, at the same whole-second rate;
//! * `requests_per_time_unit` is not implemented (the action is dropped with an error log): it
//!   is never sent;
//! * a bucket's first request, and every one until its first assignment arrives, is decided by
//!   `no_assignment_behavior` (`ALLOW_ALL` when unset), reported, and charged here as debt;
//! * `time_elapsed` is sent in whole seconds (0 under a second, which the proto's validation
//!   forbids); this service does not read it.
//!
//! What the filter needs that this service cannot give:
//!
//! * **the answer headers of the rate limit service**: a refused request gets the filter's
//!   static `deny_response_settings` (429, no body), with no `Retry-After`, `RateLimit` or
//!   `RateLimit-Policy` field and no problem body — the protocol carries nothing per request;
//! * **a rate**: to follow a token bucket rule between reports, Envoy's bucket would need the
//!   fleet's share of R as its refill, which takes knowing G; this service sees only its own
//!   streams (and several replicas may share a store), so it leases fixed units, refilled only
//!   by the next lease — a rule's rate is followed in steps of one report (I);
//! * **a lease that ends with its window**: Envoy's whole-second TTL cannot end a lease drawn
//!   in a window's last second with that window, hence the G·U spill above.
//!
//! The service answers reports; it pushes no assignment on its own (the protocol allows it),
//! so a refill is noticed at the next report.

mod assignment;
mod bucket;
mod check;
mod draw;
mod grpc;
mod service;
mod settings;
mod stream;
mod target;

pub use check::MAX_BUCKETS_PER_REPORT;
pub use service::QuotaService;
pub use stream::MAX_BUCKETS_PER_STREAM;
