//! Where a rule's count is decided: in the shared store on every check, from a batch of units
//! leased to this gateway, or on a local copy synced every so often (see
//! `FleetStore`).

use std::time::Duration;

/// How a rule is counted across a fleet of gateways that share one store.
///
/// | counting | store calls | over-admission against the exact limiter | under-admission |
/// |---|---|---|---|
/// | [`Exact`](Counting::Exact) | one per check | 0 | 0 |
/// | [`Lease`](Counting::Lease) | about one per gateway per `top_up_every` (one call at a time per key) | ≤ min(R·L, G·H) for buckets and logs (units held while the bucket refills); 0 for fixed and sliding windows | ≤ G·H + R·P (units held, one period's refill) |
/// | [`Sync`](Counting::Sync) | one batch per gateway per `every`, and one per M units admitted | ≤ G·M, by default within a tenth of the limit | a stale view may refuse for up to `every` |
/// | [`Split`](Counting::Split) | none: no shared state | 0 (the N parts add up to the limit) | up to the other gateways' parts, when the load balancer does not spread a caller's requests evenly |
///
/// G gateways; R the rule's rate (units a second); L the lease lifetime; P its `top_up_every`;
/// H = 1.5 × the largest lease (a lease and the top-up asked for when half of it is spent); M
/// the most a gateway
/// spends before it syncs; N the parts of a split. Only a `FleetStore`
/// reads lease and sync: any other store counts those rules exactly. A split divides the item's
/// quota itself ([`Item::quota`](crate::Item::quota) is this gateway's part), so every store
/// counts the part; a `FleetStore` counts it on the gateway, without the shared store. Whether
/// a store stack does what a rule's counting asks is its
/// [`capabilities`](crate::Store::capabilities)' answer (rule files asking for more are refused).
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{Counting, LeaseSettings, SyncSettings};
///
/// let lease = Counting::Lease(LeaseSettings::new().max_units(50).lifetime(Duration::from_secs(5)));
/// let sync = Counting::Sync(SyncSettings::new().every(Duration::from_millis(100)));
/// assert_ne!(lease, sync);
/// assert_eq!(Counting::default(), Counting::Exact);
/// ```
///
/// Exhaustive on purpose, like [`OnStoreFailure`](crate::OnStoreFailure): the wrapper that
/// carries the modes out decides each, so a new mode must be a compile error there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Counting {
    /// Every check asks the shared store (the default).
    #[default]
    Exact,
    /// Each gateway takes units in batches and spends them locally.
    Lease(LeaseSettings),
    /// Each gateway decides on a local copy and pushes its spend in batches.
    Sync(SyncSettings),
    /// Each of N gateways allows its own part of the limit, with no shared state.
    Split(SplitSettings),
}

impl Counting {
    /// The name rule files use: `exact`, `lease` or `sync`.
    pub fn name(&self) -> &'static str {
        match self {
            Counting::Exact => "exact",
            Counting::Lease(_) => "lease",
            Counting::Sync(_) => "sync",
            Counting::Split(_) => "split",
        }
    }
}

/// How a leasing gateway takes units (see [`Counting::Lease`]).
///
/// A lease is sized to the key's observed rate — about one top-up every `top_up_every`, at least
/// 1 unit, at most `max_units` — so a quiet key takes one unit at a time and strands nothing,
/// and a busy one asks the store about once per `top_up_every`. A new top-up is asked for in the
/// background when half a lease is left, so a busy key never waits on the store. Units not spent
/// go back (a refund by receipt) when the lease ends — after `lifetime`, or at the end of the
/// window it was taken in — or when the key has been quiet for two `top_up_every`.
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::LeaseSettings;
/// let settings = LeaseSettings::new().max_units(20).top_up_every(Duration::from_millis(500));
/// assert_eq!(settings.held_at_most(), 30);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseSettings {
    top_up_every: Duration,
    max_units: u64,
    lifetime: Duration,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        LeaseSettings::new()
    }
}

impl LeaseSettings {
    /// One top-up a second, at most 100 units a lease, leases live at most 10 seconds.
    pub const fn new() -> Self {
        LeaseSettings {
            top_up_every: Duration::from_secs(1),
            max_units: 100,
            lifetime: Duration::from_secs(10),
        }
    }

    /// About how often a busy key tops up (at least 1 ms).
    #[must_use]
    pub fn top_up_every(mut self, every: Duration) -> Self {
        self.top_up_every = every.max(Duration::from_millis(1));
        self
    }

    /// The most units one lease takes (at least 1).
    #[must_use]
    pub fn max_units(mut self, units: u64) -> Self {
        self.max_units = units.max(1);
        self
    }

    /// The longest a lease lives before its unspent units go back (at least 1 ms).
    #[must_use]
    pub fn lifetime(mut self, lifetime: Duration) -> Self {
        self.lifetime = lifetime.max(Duration::from_millis(1));
        self
    }

    /// About how often a busy key tops up.
    pub fn top_up_period(&self) -> Duration {
        self.top_up_every
    }

    /// The most units one lease takes.
    pub fn max_lease(&self) -> u64 {
        self.max_units
    }

    /// The longest a lease lives.
    pub fn lease_lifetime(&self) -> Duration {
        self.lifetime
    }

    /// H: the most units one gateway holds for one key, a full lease and the top-up asked for
    /// when half of it is left (`max_units + ⌈max_units / 2⌉`).
    pub fn held_at_most(&self) -> u64 {
        self.max_units.saturating_add(self.max_units.div_ceil(2))
    }
}

/// How a syncing gateway pushes its spend (see [`Counting::Sync`]).
///
/// Each gateway decides on its own copy of the key's state and pushes what it spent to the
/// shared count as debt ([`Take::AsDebt`](crate::Take)) every `every` (default 200 ms) or as
/// soon as it has spent `max_unsynced` units, whichever is first, every key in one batched call;
/// the same call brings back the shared count, which the local copy then starts from.
///
/// The fleet over-admits by at most G·M (G gateways, each at most M units ahead of the shared
/// count). Without a cap, M is chosen so that this stays within a tenth of the limit L for the
/// fleet that is actually running: M = ⌊L / 10G⌋, G being how many gateways pushed for the
/// rule lately, which each learns from the shared store itself (every push also counts this
/// gateway in a per-rule counter of gateways, a fixed window of max(1 s, 4·I), and reads it back
/// on the same call) — a gateway that finds itself alone still keeps M = ⌊L / 10⌋, so gateways
/// that join cannot catch it with a large M. For its first two intervals on a rule, and again
/// after the rule has been quiet here for two of the counter's windows, before every gateway with
/// keys in use has pushed and been counted, a gateway pushes every unit (M = 1). A check costing
/// more than M is counted exactly. A rule whose limit is below 10·G cannot keep the bound
/// with M ≥ 1 and is counted exactly instead, and the fleet store says so
/// (`FleetStore::counted_exactly`).
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{Quota, Rate, SyncSettings};
/// let quota = Quota::token_bucket(200, Rate::per_second(200))?;
/// let settings = SyncSettings::new().every(Duration::from_millis(200));
/// assert_eq!(settings.unsynced_at_most(&quota, Some(1)), Some(20)); // 200 / 10, alone
/// assert_eq!(settings.unsynced_at_most(&quota, Some(4)), Some(5)); // 200 / (10 × 4)
/// assert_eq!(settings.unsynced_at_most(&quota, None), Some(1)); // the fleet not known yet
/// assert_eq!(settings.unsynced_at_most(&quota, Some(21)), None); // counted exactly
/// assert_eq!(settings.max_unsynced(50).unsynced_at_most(&quota, Some(21)), Some(50));
/// # Ok::<(), tollgate_core::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SyncSettings {
    every: Duration,
    max_unsynced: Option<u64>,
}

impl Default for SyncSettings {
    fn default() -> Self {
        SyncSettings::new()
    }
}

impl SyncSettings {
    /// Every 200 ms, with no cap on unsynced units but the local copy's own.
    pub const fn new() -> Self {
        SyncSettings {
            every: Duration::from_millis(200),
            max_unsynced: None,
        }
    }

    /// The interval I between syncs (at least 1 ms).
    #[must_use]
    pub fn every(mut self, every: Duration) -> Self {
        self.every = every.max(Duration::from_millis(1));
        self
    }

    /// Syncs as soon as this many units are unsynced (M; at least 1).
    #[must_use]
    pub fn max_unsynced(mut self, units: u64) -> Self {
        self.max_unsynced = Some(units.max(1));
        self
    }

    /// The interval between syncs.
    pub fn interval(&self) -> Duration {
        self.every
    }

    /// M under `quota` for a fleet of `gateways` (`None`: not known yet): the cap if set;
    /// else ⌊L / 10G⌋ so the fleet's over-admission G·M stays within a tenth of the limit L;
    /// 1 while the fleet is not known. `None` when no M ≥ 1 keeps the bound (L < 10·G): the
    /// key is counted exactly.
    pub fn unsynced_at_most(&self, quota: &crate::Quota, gateways: Option<u64>) -> Option<u64> {
        if let Some(cap) = self.max_unsynced {
            return Some(cap);
        }
        match gateways {
            None => Some(1),
            Some(gateways) => {
                let m = quota.limit() / gateways.max(1).saturating_mul(10);
                (m >= 1).then_some(m)
            }
        }
    }

    /// How long the per-rule counter of gateways counts each gateway once: max(1 s, 4·I), so
    /// every gateway that pushes (at least once an interval while it has keys in use) is in it.
    pub fn presence_window(&self) -> Duration {
        self.every.saturating_mul(4).max(Duration::from_secs(1))
    }
}

/// A split allowance (see [`Counting::Split`]): the limit shared out among N gateways, each
/// allowing its part on its own, with no shared state — "each of 50 servers allows 4 a second".
///
/// Part `i` of a limit C is ⌊C/N⌋ or ⌈C/N⌉ (the first `C mod N` gateways get the extra unit) and
/// a bucket refills at R/N, so the parts add up to the limit exactly when gateways are numbered
/// `0..N` ([`gateway`](SplitSettings::gateway)). A gateway that does not know its number takes
/// ⌊C/N⌋: the parts then add up to at most the limit. The total is the limit only when the load
/// balancer spreads each caller's requests evenly; a caller whose requests all reach one
/// gateway gets that gateway's part. Needs C ≥ N, and a quota that refuses (not pacing).
///
/// ```
/// use tollgate_core::{Quota, Rate, SplitSettings};
/// let quota = Quota::token_bucket(200, Rate::per_second(200))?;
/// let split = SplitSettings::new(50);
/// assert_eq!(split.share(&quota).unwrap().limit(), 4);
/// let odd = Quota::token_bucket(10, Rate::per_second(10))?;
/// let parts: Vec<u64> = (0..4)
///     .map(|i| SplitSettings::new(4).gateway(i).share(&odd).unwrap().limit())
///     .collect();
/// assert_eq!(parts, [3, 3, 2, 2]);
/// assert_eq!(SplitSettings::new(4).share(&odd).unwrap().limit(), 2);
/// # Ok::<(), tollgate_core::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SplitSettings {
    parts: u32,
    gateway: Option<u32>,
}

impl SplitSettings {
    /// The limit shared out among `parts` gateways (at least 1).
    pub const fn new(parts: u32) -> Self {
        SplitSettings {
            parts: if parts == 0 { 1 } else { parts },
            gateway: None,
        }
    }

    /// This gateway's number, `0..parts` (taken modulo `parts`), so the remainder is spread and
    /// the parts add up to the limit.
    #[must_use]
    pub const fn gateway(mut self, index: u32) -> Self {
        self.gateway = Some(index % self.parts);
        self
    }

    /// N: how many gateways share the limit.
    pub const fn parts(&self) -> u32 {
        self.parts
    }

    /// This gateway's number, if it was given.
    pub const fn gateway_index(&self) -> Option<u32> {
        self.gateway
    }

    /// This gateway's part of `quota` (see [`Quota::part`](crate::Quota::part)); `None` when
    /// the quota cannot be split that many ways.
    pub fn share(&self, quota: &crate::Quota) -> Option<crate::Quota> {
        // Quota::part answers every part of one split or none, so gateways agree.
        let parts = u64::from(self.parts);
        let index = self.gateway.map_or(parts - 1, u64::from);
        quota.part(index, parts).ok()
    }
}
