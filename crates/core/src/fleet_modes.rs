//! What one item asks of the store wrappers it passes through: how it is counted across a
//! fleet, over how many sub-buckets, whether its refused callers are cached, in which named
//! store, and whether its count must reach a replica before the answer.

use std::time::Duration;

use crate::Counting;

/// The most sub-buckets one key may be spread over ([`FleetModes::with_sub_buckets`] clamps to
/// it): far more than any cluster has masters, and few enough that the ids they need stay few.
pub const MAX_SUB_BUCKETS: u32 = 1_024;

/// The longest a check waits for a replica's acknowledgement
/// ([`FleetModes::with_replica_ack`] clamps to it): a rule's whole store deadline is usually
/// well below it.
pub const MAX_REPLICA_ACK: Duration = Duration::from_secs(1);

/// What an item asks of the wrappers around a store, each read by the one wrapper that carries
/// it out:
///
/// | asks | read by | without that wrapper |
/// |---|---|---|
/// | [`with_counting`](Self::with_counting): lease, sync | `FleetStore` | counted exactly, a store call per check |
/// | [`with_counting`](Self::with_counting): split | `FleetStore`, or a store of this gateway's own ([`MemoryStore`](crate::MemoryStore)) | over a shared store, every gateway's part is counted in one count: the fleet admits one part |
/// | [`with_sub_buckets`](Self::with_sub_buckets) | `SubBuckets` (a `FleetStore` holds one) | the key counted whole |
/// | [`with_cache_blocked`](Self::with_cache_blocked) | `BlockedCache` (a `FleetStore` holds one) | every refusal asks the store |
/// | [`with_store`](Self::with_store) | `Stores` | counted in the default store |
/// | [`with_replica_ack`](Self::with_replica_ack) | the store itself (`tollgate_redis::RedisStore`) | answered without waiting for a replica |
///
/// Given to an item with [`Item::with_fleet_modes`](crate::Item::with_fleet_modes). Whether a
/// store stack does what these ask is its [`Capabilities`](crate::Capabilities)'
/// [`supports`](crate::Capabilities::supports): rule files are refused when it does not, rather
/// than counted otherwise in silence.
///
/// ```
/// use tollgate_core::{Counting, FleetModes, MemoryStore, SplitSettings, Store};
/// use tollgate_wrappers::FleetStore;
///
/// let modes = FleetModes::new().with_counting(Counting::Split(SplitSettings::new(4)));
/// assert!(FleetStore::new(MemoryStore::new()).capabilities().supports(&modes).is_ok());
/// let home = FleetModes::new().with_store("home").with_cache_blocked(true);
/// assert_eq!(home.store_name(), Some("home"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FleetModes<'a> {
    counting: Counting,
    sub_buckets: u32,
    cache_blocked: bool,
    store: Option<&'a str>,
    replica_ack: Option<Duration>,
}

impl Default for FleetModes<'_> {
    fn default() -> Self {
        FleetModes::new()
    }
}

impl<'a> FleetModes<'a> {
    /// Nothing asked: counted exactly, on one key, every refusal asking the store, in the
    /// default store.
    pub const fn new() -> Self {
        FleetModes {
            counting: Counting::Exact,
            sub_buckets: 1,
            cache_blocked: false,
            store: None,
            replica_ack: None,
        }
    }

    /// How the rule is counted across a fleet ([`Counting`]); a
    /// `FleetStore` carries it out. A [`Counting::Split`] also makes the
    /// item's quota this gateway's part ([`Item::quota`](crate::Item::quota)).
    #[must_use]
    pub const fn with_counting(mut self, counting: Counting) -> Self {
        self.counting = counting;
        self
    }

    /// Spreads the key's count over `sub_buckets` sub-keys, each with its part of the quota, on
    /// different Redis Cluster slots (see `SubBuckets`); 1 (the default)
    /// keeps one key. Clamped to 1..=[`MAX_SUB_BUCKETS`].
    #[must_use]
    pub fn with_sub_buckets(mut self, sub_buckets: u32) -> Self {
        self.sub_buckets = sub_buckets.clamp(1, MAX_SUB_BUCKETS);
        self
    }

    /// Lets a `BlockedCache` refuse the rule's refused callers on this
    /// gateway, without the store, until the store said they may try again.
    #[must_use]
    pub const fn with_cache_blocked(mut self, cache_blocked: bool) -> Self {
        self.cache_blocked = cache_blocked;
        self
    }

    /// Names the store the item is counted in, among a `Stores`' (a home
    /// region's, say); `None` (the default), the default store.
    ///
    /// ```
    /// use tollgate_core::FleetModes;
    /// let rule_store: Option<&str> = None;
    /// assert_eq!(FleetModes::new().with_store(rule_store), FleetModes::new());
    /// assert_eq!(FleetModes::new().with_store("home").store_name(), Some("home"));
    /// ```
    #[must_use]
    pub fn with_store(mut self, name: impl Into<Option<&'a str>>) -> Self {
        self.store = name.into();
        self
    }

    /// Asks the store to answer only once a replica holds the count, waiting at most `wait`
    /// (Redis `WAIT 1 <ms>` after the script, on the master that ran it): a failover right
    /// after the answer then keeps what was admitted. For rules where a lost count is a
    /// security hole (login attempts per account, one-time codes), and only for rules counted
    /// exactly (a leased or synced rule's store calls are leases and pushes, never waited on).
    /// Rounded up to whole milliseconds and clamped to 1 ms..=[`MAX_REPLICA_ACK`]; `None`
    /// (the default) answers at once.
    ///
    /// A replica that does not acknowledge in time does not fail the check: the answer stands,
    /// counted as unacknowledged, and the store stops waiting on that master for a second. The
    /// wait is cut to end before the caller's own deadline (a `FallbackStore`'s timeout).
    /// Asked with a lease, a sync or a split, it is refused when the rule is installed
    /// ([`Capabilities::supports`](crate::Capabilities::supports)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::FleetModes;
    /// let acked = FleetModes::new().with_replica_ack(Duration::from_micros(1_500));
    /// assert_eq!(acked.replica_ack(), Some(Duration::from_millis(2)));
    /// assert_eq!(FleetModes::new().replica_ack(), None);
    /// ```
    #[must_use]
    pub fn with_replica_ack(mut self, wait: impl Into<Option<Duration>>) -> Self {
        self.replica_ack = wait.into().map(|wait| {
            let millis = wait.as_nanos().div_ceil(1_000_000);
            let millis = u64::try_from(millis).unwrap_or(u64::MAX);
            Duration::from_millis(millis).clamp(Duration::from_millis(1), MAX_REPLICA_ACK)
        });
        self
    }

    /// How long the item asks the store to wait for a replica to hold its count, if at all.
    pub const fn replica_ack(&self) -> Option<Duration> {
        self.replica_ack
    }

    /// How the rule asks to be counted across a fleet.
    pub const fn counting(&self) -> Counting {
        self.counting
    }

    /// Over how many sub-buckets the key asks to be spread (1: one key).
    pub const fn sub_buckets(&self) -> u32 {
        self.sub_buckets
    }

    /// Whether refused callers ask to be cached.
    pub const fn cache_blocked(&self) -> bool {
        self.cache_blocked
    }

    /// The store named, if any.
    pub const fn store_name(&self) -> Option<&'a str> {
        self.store
    }
}
