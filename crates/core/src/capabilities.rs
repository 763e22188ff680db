//! What a store stack can carry out of what an item asks ([`FleetModes`]), per store it
//! counts in, and the sentence to say when it cannot.

use std::fmt;

use crate::{Counting, FleetModes};

/// What a store stack can do with the [`FleetModes`] an item asks for, for each store an item
/// can be counted in: the default store, and each store a `Stores` names.
/// [`Store::capabilities`](crate::Store::capabilities) answers it; every wrapper adds what it
/// carries out to what its inner store can:
///
/// * a plain store (the default answer, [`Capabilities::default`]) counts every item exactly,
///   where it is, shared by every gateway, and knows no store names;
/// * [`MemoryStore`](crate::MemoryStore) counts on this gateway alone
///   ([`this_gateway`](Self::this_gateway)): a split's part is right there;
/// * `SubBuckets` adds sub-buckets, `BlockedCache`
///   cached refusals, each for every store under it (they pass the store name on);
/// * `FleetStore` adds splits, sub-buckets and cached refusals for every
///   store under it, and **leases and syncs for the default store only** (see below);
/// * `Stores` answers per name: each named store's capabilities under its
///   name, its default store's for the rest;
/// * `FallbackStore`, [`DynStore`](crate::DynStore), `Arc<S>` answer
///   as the store they hold (a fallback's local memory counts only while the primary is down).
///
/// [`supports`](Self::supports) gives the one answer to "can an item with these modes be
/// honoured?", and the sentence naming what is missing and which wrapper provides it. Rule
/// files are checked with it when they are installed; code that builds rules can ask it the
/// same way.
///
/// # The order of `FleetStore` and `Stores`
///
/// Put a `FleetStore` inside each store of a `Stores`:
/// `Stores::new(FleetStore::new(local)).with("home", FleetStore::new(home))`. A `FleetStore`
/// around a `Stores` leases and syncs for its default store only (its leases, pushes and
/// give-backs are made without a store name), so it reports a leased or synced rule naming a
/// store as not supported, with that fix; its splits, sub-buckets and cached refusals work in
/// either order, and are reported so.
///
/// ```
/// use tollgate_core::{Counting, FleetModes, LeaseSettings, MemoryStore, Store};
/// use tollgate_wrappers::{FleetStore, Stores};
///
/// let leased = FleetModes::new().with_counting(Counting::Lease(LeaseSettings::new()));
/// let at_home = leased.with_store("home");
///
/// // A plain store counts a leased rule exactly: not what it asks.
/// let error = MemoryStore::new().capabilities().supports(&leased).unwrap_err();
/// assert!(error.is_counting());
/// assert!(error.to_string().contains("FleetStore"), "{error}");
///
/// // Fleet modes inside each store: a leased rule is leased wherever it is counted.
/// let inside = Stores::new(FleetStore::new(MemoryStore::new()))
///     .with("home", FleetStore::new(MemoryStore::new()))?;
/// assert!(inside.capabilities().supports(&leased).is_ok());
/// assert!(inside.capabilities().supports(&at_home).is_ok());
///
/// // A FleetStore around the Stores leases for the default store only.
/// let around = FleetStore::new(
///     Stores::new(MemoryStore::new()).with("home", MemoryStore::new())?,
/// );
/// assert!(around.capabilities().supports(&leased).is_ok());
/// assert!(around.capabilities().supports(&at_home).unwrap_err().is_counting());
///
/// // A name the stack does not hold.
/// let elsewhere = FleetModes::new().with_store("elsewhere");
/// assert!(inside.capabilities().supports(&elsewhere).unwrap_err().is_unknown_store());
/// # Ok::<(), tollgate_wrappers::StoreNameError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// The default store's (items naming no store, or a name no `Stores` holds).
    default: Can,
    /// Each named store's, by name.
    named: Vec<(Box<str>, Can)>,
}

/// What one store an item can be counted in does with what the item asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Can {
    /// Leases and syncs (a `FleetStore` around it).
    lease_and_sync: bool,
    /// A split's part counted on this gateway alone (a `FleetStore`, or in-process memory).
    split: bool,
    sub_buckets: bool,
    cache_blocked: bool,
    /// A `FleetStore` wraps the `Stores` that names this store: it leases and syncs for the
    /// default store only. (What the fix for a missing lease says.)
    fleet_store_outside: bool,
    /// Waits, on request, for a replica to hold a count before answering (a Redis store).
    replica_ack: bool,
}

impl Capabilities {
    /// A store of this gateway's own, in process (the in-memory store): counts every item
    /// exactly, and a split's part is counted right (no other gateway counts in it).
    ///
    /// ```
    /// use tollgate_core::{Capabilities, Counting, FleetModes, SplitSettings};
    /// let split = FleetModes::new().with_counting(Counting::Split(SplitSettings::new(4)));
    /// assert!(Capabilities::this_gateway().supports(&split).is_ok());
    /// assert!(Capabilities::default().supports(&split).is_err(), "a shared store");
    /// ```
    pub fn this_gateway() -> Self {
        Capabilities {
            default: Can {
                split: true,
                ..Can::default()
            },
            named: Vec::new(),
        }
    }

    /// Whether an item asking for `modes` is counted as it asks in this store stack: `Ok`, or
    /// what is missing (the first of: the store it names, its counting, its sub-buckets, its
    /// cached refusals), with the wrapper that would provide it.
    ///
    /// What is asked is checked, whatever the item's mode: a shadow rule asking for a lease
    /// is refused over a store that cannot lease, though the store would count it exactly
    /// anyway (as every store counts shadow rules).
    ///
    /// ```
    /// use tollgate_core::{FleetModes, MemoryStore, Store};
    /// use tollgate_wrappers::SubBuckets;
    /// let spread = FleetModes::new().with_sub_buckets(8);
    /// assert!(MemoryStore::new().capabilities().supports(&spread).unwrap_err().is_sub_buckets());
    /// assert!(SubBuckets::new(MemoryStore::new()).capabilities().supports(&spread).is_ok());
    /// ```
    pub fn supports(&self, modes: &FleetModes<'_>) -> Result<(), Unsupported> {
        let store = modes.store_name();
        let can = match store {
            None => self.default,
            Some(name) => self.named(name).ok_or_else(|| Unsupported {
                asked: Asked::Store,
                store: Some(Box::from(name)),
                known: self.names().map(Box::from).collect(),
                fleet_store_outside: false,
            })?,
        };
        let missing = |asked| {
            Err(Unsupported {
                asked,
                store: store.map(Box::from),
                known: Vec::new(),
                fleet_store_outside: can.fleet_store_outside,
            })
        };
        match modes.counting() {
            Counting::Lease(_) if !can.lease_and_sync => return missing(Asked::Lease),
            Counting::Sync(_) if !can.lease_and_sync => return missing(Asked::Sync),
            Counting::Split(_) if !can.split => return missing(Asked::Split),
            _ => {}
        }
        if modes.sub_buckets() > 1 && !can.sub_buckets {
            return missing(Asked::SubBuckets);
        }
        if modes.cache_blocked() && !can.cache_blocked {
            return missing(Asked::CacheBlocked);
        }
        if modes.replica_ack().is_some() && modes.counting() != Counting::Exact {
            return missing(Asked::ReplicaAckNotExact);
        }
        if modes.replica_ack().is_some() && !can.replica_ack {
            return missing(Asked::ReplicaAck);
        }
        Ok(())
    }

    /// What the store named `name` does, if this stack holds one of that name.
    fn named(&self, name: &str) -> Option<Can> {
        self.named
            .iter()
            .find(|(held, _)| &**held == name)
            .map(|(_, can)| *can)
    }

    /// Whether an item naming `name` is counted in a store of that name.
    pub(crate) fn knows_store(&self, name: &str) -> bool {
        self.named(name).is_some()
    }

    /// The store names held, in the order they were added.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.named.iter().map(|(name, _)| &**name)
    }

    /// Every store's capabilities changed by `add`.
    fn each(mut self, add: impl Fn(&mut Can)) -> Self {
        add(&mut self.default);
        for (_, can) in &mut self.named {
            add(can);
        }
        self
    }

    /// A store that can wait for a replica to hold a count before it answers
    /// ([`FleetModes::with_replica_ack`]): a Redis store, whose masters have replicas.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::{Capabilities, FleetModes, MemoryStore, Store};
    /// let acked = FleetModes::new().with_replica_ack(Duration::from_millis(50));
    /// assert!(Capabilities::default().with_replica_ack().supports(&acked).is_ok());
    /// let error = MemoryStore::new().capabilities().supports(&acked).unwrap_err();
    /// assert!(error.is_replica_ack(), "{error}");
    /// ```
    #[must_use]
    pub fn with_replica_ack(self) -> Self {
        self.each(|can| can.replica_ack = true)
    }

    /// With a `SubBuckets` around it.
    pub(crate) fn with_sub_buckets(self) -> Self {
        self.each(|can| can.sub_buckets = true)
    }

    /// With a `BlockedCache` around it.
    pub(crate) fn with_blocked_cache(self) -> Self {
        self.each(|can| can.cache_blocked = true)
    }

    /// With a `FleetStore` around it (whose own `BlockedCache` and
    /// `SubBuckets` are already added): splits everywhere, since a split is counted in the
    /// fleet store's own memory whatever it names; leases and syncs for the default store only.
    pub(crate) fn with_fleet_store(mut self) -> Self {
        self.default.lease_and_sync = true;
        self.each(|can| {
            can.split = true;
            can.fleet_store_outside = true;
        })
    }

    /// A `Stores`: `default` for the default store, and each named store's
    /// for its name (its answer for that name when it is itself a `Stores` holding it, its
    /// default otherwise). Names the default store holds (a `Stores` as the default store)
    /// stay, unless a named store takes them.
    pub(crate) fn stores<'n>(
        default: Capabilities,
        named: impl IntoIterator<Item = (&'n str, Capabilities)>,
    ) -> Self {
        let mut stores = default;
        for (name, held) in named {
            let can = held.named(name).unwrap_or(held.default);
            stores.named.retain(|(taken, _)| &**taken != name);
            stores.named.push((Box::from(name), can));
        }
        stores
    }
}

/// What an item asked that a store stack cannot do: [`Capabilities::supports`]' answer.
///
/// Its sentence names what is missing, for which store, and the wrapper that provides it.
///
/// ```
/// use tollgate_core::{FleetModes, MemoryStore, Store};
/// let cached = FleetModes::new().with_cache_blocked(true);
/// let error = MemoryStore::new().capabilities().supports(&cached).unwrap_err();
/// assert!(error.is_cache_blocked());
/// assert_eq!(error.store_name(), None);
/// assert!(error.to_string().contains("BlockedCache"), "{error}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    asked: Asked,
    /// The store the item names.
    store: Option<Box<str>>,
    /// The names the stack holds (for an unknown one).
    known: Vec<Box<str>>,
    fleet_store_outside: bool,
}

/// Which of the item's asks cannot be honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Store,
    Lease,
    Sync,
    Split,
    SubBuckets,
    CacheBlocked,
    ReplicaAck,
    /// A replica acknowledgement on a rule counted otherwise than exactly.
    ReplicaAckNotExact,
}

impl Unsupported {
    /// The item names a store the stack does not hold ([`FleetModes::with_store`]).
    pub fn is_unknown_store(&self) -> bool {
        self.asked == Asked::Store
    }

    /// The item's counting (lease, sync or split: [`FleetModes::with_counting`]) cannot be
    /// carried out where it is counted.
    pub fn is_counting(&self) -> bool {
        matches!(self.asked, Asked::Lease | Asked::Sync | Asked::Split)
    }

    /// No `SubBuckets` where the item is counted
    /// ([`FleetModes::with_sub_buckets`]).
    pub fn is_sub_buckets(&self) -> bool {
        self.asked == Asked::SubBuckets
    }

    /// No `BlockedCache` where the item is counted
    /// ([`FleetModes::with_cache_blocked`]).
    pub fn is_cache_blocked(&self) -> bool {
        self.asked == Asked::CacheBlocked
    }

    /// The store where the item is counted has no replicas to wait for, or the item is counted
    /// otherwise than exactly ([`FleetModes::with_replica_ack`]).
    pub fn is_replica_ack(&self) -> bool {
        matches!(self.asked, Asked::ReplicaAck | Asked::ReplicaAckNotExact)
    }

    /// The store the item names, if any.
    pub fn store_name(&self) -> Option<&str> {
        self.store.as_deref()
    }

    /// Which store is missing the wrapper, as a sentence's subject.
    fn which(&self) -> String {
        match &self.store {
            Some(name) => format!("the store {name:?}"),
            None => "the default store".to_owned(),
        }
    }

    /// How to put `wrapper` around the store the item is counted in.
    fn wrap(&self, wrapper: &str) -> String {
        match &self.store {
            Some(name) => format!(".with({name:?}, {wrapper}::new(..))"),
            None => format!("{wrapper}::new(..)"),
        }
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let which = self.which();
        match self.asked {
            Asked::Store => {
                let name = self.store.as_deref().unwrap_or_default();
                if self.known.is_empty() {
                    write!(
                        f,
                        "no store is named {name:?}, and there are no named stores: make the \
                         store a `tollgate_wrappers::Stores` holding one, `.with({name:?}, ..)` \
                         (otherwise the rule would be counted in the default store)"
                    )
                } else {
                    write!(
                        f,
                        "no store is named {name:?} (the `Stores` holds {:?}); add it with \
                         `.with({name:?}, ..)` or name one it holds (otherwise the rule would \
                         be counted in the default store)",
                        self.known
                    )
                }
            }
            Asked::Lease | Asked::Sync => {
                let counting = if self.asked == Asked::Lease {
                    "leased counting (`Counting::Lease`)"
                } else {
                    "synced counting (`Counting::Sync`)"
                };
                if self.fleet_store_outside && self.store.is_some() {
                    write!(
                        f,
                        "{counting} needs a `FleetStore` around the store the rule is counted \
                         in, and {which} has none: the `FleetStore` around the `Stores` leases \
                         and syncs for its default store only; put one inside the `Stores`, \
                         `{}` (otherwise the rule would be counted exactly, a store call per \
                         check)",
                        self.wrap("FleetStore")
                    )
                } else {
                    write!(
                        f,
                        "{counting} needs a `FleetStore` around the store the rule is counted \
                         in, and {which} has none: wrap it, `{}` (otherwise the rule would be \
                         counted exactly, a store call per check)",
                        self.wrap("FleetStore")
                    )
                }
            }
            Asked::Split => write!(
                f,
                "a split (`Counting::Split`) must be counted on each gateway alone, and {which} \
                 is one the gateways may share: wrap it, `{}` (which counts split rules on the \
                 gateway), or count the rule in an in-memory store (otherwise every gateway's \
                 part would be counted in one shared count, and the fleet would admit one part \
                 in all)",
                self.wrap("FleetStore")
            ),
            Asked::SubBuckets => write!(
                f,
                "sub-buckets need a `SubBuckets` around the store the rule is counted in (a \
                 `FleetStore` holds one), and {which} has none: wrap it, `{}` or `{}` \
                 (otherwise the key would be counted whole)",
                self.wrap("FleetStore"),
                self.wrap("SubBuckets")
            ),
            Asked::CacheBlocked => write!(
                f,
                "cached refusals need a `BlockedCache` around the store the rule is counted in \
                 (a `FleetStore` holds one), and {which} has none: wrap it, `{}` or `{}` \
                 (otherwise every refusal would ask the store)",
                self.wrap("FleetStore"),
                self.wrap("BlockedCache")
            ),
            Asked::ReplicaAck => write!(
                f,
                "a replica acknowledgement needs a store whose count has replicas (a \
                 `RedisStore`), and {which} is not one: count the rule in Redis, or drop the \
                 acknowledgement (otherwise the answer would come without any replica holding \
                 the count)"
            ),
            Asked::ReplicaAckNotExact => write!(
                f,
                "a replica acknowledgement is for rules counted exactly: a leased or synced \
                 rule's store calls are leases and pushes, never waited on, and a split one asks \
                 no store; drop the acknowledgement or count the rule exactly (otherwise the \
                 answers would come without any replica holding the count)"
            ),
        }
    }
}

impl std::error::Error for Unsupported {}
