//! What each store stack can do with what an item asks: every fleet-mode ask (lease, sync,
//! split, sub-buckets, cached refusals, a replica's acknowledgement, a named store, and each
//! mode in a named store) against
//! every stack a layer's store is made of — a plain shared store, the in-memory store, each
//! wrapper alone, `Stores` with fleet modes inside and outside, nested `Stores`, and the
//! forwarding ones (`Arc`, `DynStore`, `FallbackStore`) — through `Capabilities::supports`.

use std::sync::Arc;

use tollgate_core::{
    Capabilities, Counting, DynStore, FleetModes, LeaseSettings, MemoryStore, SplitSettings, Store,
    SyncSettings, Unsupported,
};
use tollgate_wrappers::{BlockedCache, FallbackStore, FleetStore, Stores, SubBuckets};

/// A store every gateway shares, that knows nothing of fleet modes and can wait for a replica
/// (as the Redis store).
use tollgate_testing::SharedMemory as Shared;

/// What an item can ask, by the name the tables below use.
fn ask(name: &'static str) -> FleetModes<'static> {
    let (mode, store) = match name.split_once('@') {
        Some((mode, store)) => (mode, Some(store)),
        None => (name, None),
    };
    let modes = FleetModes::new().with_store(store);
    match mode {
        "exact" => modes,
        "lease" => modes.with_counting(Counting::Lease(LeaseSettings::new())),
        "sync" => modes.with_counting(Counting::Sync(SyncSettings::new())),
        "split" => modes.with_counting(Counting::Split(SplitSettings::new(4))),
        "sub" => modes.with_sub_buckets(4),
        "cache" => modes.with_cache_blocked(true),
        "ack" => modes.with_replica_ack(std::time::Duration::from_millis(50)),
        other => panic!("no ask named {other}"),
    }
}

/// Every ask: each mode in the default store, then each in the store named `home`.
const ASKS: [&str; 14] = [
    "exact",
    "lease",
    "sync",
    "split",
    "sub",
    "cache",
    "ack",
    "exact@home",
    "lease@home",
    "sync@home",
    "split@home",
    "sub@home",
    "cache@home",
    "ack@home",
];

/// Checks that `capabilities` support exactly the asks `supported` lists, and that each one
/// refused says what is missing and names the wrapper that provides it.
#[track_caller]
fn answers(stack: &str, capabilities: &Capabilities, supported: &[&str]) {
    for name in ASKS {
        let answer = capabilities.supports(&ask(name));
        assert_eq!(
            answer.is_ok(),
            supported.contains(&name),
            "{stack}: {name}: {answer:?}"
        );
        if let Err(error) = answer {
            says_what_is_missing(stack, name, &error);
        }
    }
}

#[track_caller]
fn says_what_is_missing(stack: &str, name: &str, error: &Unsupported) {
    let text = error.to_string();
    let (mode, store) = match name.split_once('@') {
        Some((mode, store)) => (mode, Some(store)),
        None => (name, None),
    };
    assert_eq!(error.store_name(), store, "{stack}: {name}: {text}");
    if error.is_unknown_store() {
        assert!(store.is_some(), "{stack}: {name}: {text}");
        assert!(
            text.contains("\"home\"") && text.contains("Stores"),
            "{text}"
        );
        return;
    }
    let (is_it, wrapper) = match mode {
        "lease" | "sync" => (error.is_counting(), "FleetStore"),
        "split" => (error.is_counting(), "FleetStore"),
        "sub" => (error.is_sub_buckets(), "SubBuckets"),
        "cache" => (error.is_cache_blocked(), "BlockedCache"),
        "ack" => (error.is_replica_ack(), "RedisStore"),
        other => panic!("{stack}: {other} is never refused but for its store: {text}"),
    };
    assert!(is_it, "{stack}: {name}: the wrong kind: {text}");
    assert!(text.contains(wrapper), "{stack}: {name}: {text}");
    match store {
        Some(store) => assert!(text.contains(&format!("{store:?}")), "{stack}: {text}"),
        None => assert!(text.contains("default store"), "{stack}: {text}"),
    }
}

const ALL_DEFAULT: [&str; 7] = ["exact", "lease", "sync", "split", "sub", "cache", "ack"];

fn with_home<S: Store>(default: S, home: S) -> Stores<S> {
    Stores::new(default)
        .with("home", home)
        .expect("a valid name")
}

#[test]
fn a_plain_shared_store_counts_exactly_and_knows_no_names() {
    answers(
        "Shared",
        &Shared::default().capabilities(),
        &["exact", "ack"],
    );
    let redis_like = Capabilities::default().with_replica_ack();
    assert_eq!(Shared::default().capabilities(), redis_like);
}

#[test]
fn the_memory_store_also_counts_a_split_s_part_right() {
    answers(
        "MemoryStore",
        &MemoryStore::new().capabilities(),
        &["exact", "split"],
    );
}

#[test]
fn each_wrapper_adds_its_own_mode() {
    answers(
        "SubBuckets<Shared>",
        &SubBuckets::new(Shared::default()).capabilities(),
        &["exact", "sub", "ack"],
    );
    answers(
        "BlockedCache<Shared>",
        &BlockedCache::new(Shared::default()).capabilities(),
        &["exact", "cache", "ack"],
    );
    answers(
        "BlockedCache<SubBuckets<Shared>>",
        &BlockedCache::new(SubBuckets::new(Shared::default())).capabilities(),
        &["exact", "sub", "cache", "ack"],
    );
    answers(
        "FleetStore<Shared>",
        &FleetStore::new(Shared::default()).capabilities(),
        &ALL_DEFAULT,
    );
    answers(
        "SubBuckets<MemoryStore>",
        &SubBuckets::new(MemoryStore::new()).capabilities(),
        &["exact", "split", "sub"],
    );
}

#[test]
fn stores_answer_per_named_store() {
    answers(
        "Stores<Shared>",
        &with_home(Shared::default(), Shared::default()).capabilities(),
        &["exact", "ack", "exact@home", "ack@home"],
    );
    answers(
        "Stores<MemoryStore>",
        &with_home(MemoryStore::new(), MemoryStore::new()).capabilities(),
        &["exact", "split", "exact@home", "split@home"],
    );
    // Only the home store is a fleet store: its modes at home, none in the default store.
    let home_only = with_home(
        DynStore::new(Shared::default()),
        DynStore::new(FleetStore::new(Shared::default())),
    );
    answers(
        "Stores<Shared, home: FleetStore>",
        &home_only.capabilities(),
        &[
            "exact",
            "ack",
            "exact@home",
            "lease@home",
            "sync@home",
            "split@home",
            "sub@home",
            "cache@home",
            "ack@home",
        ],
    );
}

/// The documented order, a fleet store inside each store, does every mode everywhere; the
/// other order leases and syncs for the default store only, and says so (put it inside).
#[test]
fn the_order_of_fleet_store_and_stores() {
    let inside = with_home(
        FleetStore::new(Shared::default()),
        FleetStore::new(Shared::default()),
    );
    answers("Stores<FleetStore>", &inside.capabilities(), &ASKS);

    let outside = FleetStore::new(with_home(Shared::default(), Shared::default()));
    let capabilities = outside.capabilities();
    answers(
        "FleetStore<Stores>",
        &capabilities,
        &[
            "exact",
            "lease",
            "sync",
            "split",
            "sub",
            "cache",
            "ack",
            "exact@home",
            "split@home",
            "sub@home",
            "cache@home",
            "ack@home",
        ],
    );
    for name in ["lease@home", "sync@home"] {
        let error = capabilities.supports(&ask(name)).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("default store only") && text.contains("inside"),
            "{name}: {text}"
        );
        assert!(
            text.contains(".with(\"home\", FleetStore::new(..))"),
            "{name}: {text}"
        );
    }

    // The sub-bucket and blocked-caller wrappers pass the store name on: either order works.
    let spread_outside = BlockedCache::new(SubBuckets::new(with_home(
        Shared::default(),
        Shared::default(),
    )));
    answers(
        "BlockedCache<SubBuckets<Stores>>",
        &spread_outside.capabilities(),
        &[
            "exact",
            "sub",
            "cache",
            "ack",
            "exact@home",
            "sub@home",
            "cache@home",
            "ack@home",
        ],
    );
    let spread_inside = with_home(
        BlockedCache::new(SubBuckets::new(Shared::default())),
        BlockedCache::new(SubBuckets::new(Shared::default())),
    );
    assert_eq!(spread_inside.capabilities(), spread_outside.capabilities());
}

/// A `Stores` as the default store of a `Stores`: its names are known through the outer one,
/// with their own capabilities; a named store of the outer one takes its name.
#[test]
fn nested_stores_answer_for_the_inner_names() {
    let inner = with_home(
        DynStore::new(Shared::default()),
        DynStore::new(FleetStore::new(Shared::default())),
    );
    let nested = Stores::new(DynStore::new(inner));
    answers(
        "Stores<Stores<Shared, home: FleetStore>>",
        &nested.capabilities(),
        &[
            "exact",
            "ack",
            "exact@home",
            "lease@home",
            "sync@home",
            "split@home",
            "sub@home",
            "cache@home",
            "ack@home",
        ],
    );
    let taken = nested
        .with("home", DynStore::new(Shared::default()))
        .expect("a name the outer store does not hold yet");
    answers(
        "the outer home",
        &taken.capabilities(),
        &["exact", "ack", "exact@home", "ack@home"],
    );
}

/// `Arc`, `DynStore` and `FallbackStore` answer as the store they hold.
#[test]
fn forwarding_stores_answer_as_what_they_hold() {
    let inside = || {
        with_home(
            FleetStore::new(Shared::default()),
            FleetStore::new(Shared::default()),
        )
    };
    let expected = inside().capabilities();
    assert_eq!(Arc::new(inside()).capabilities(), expected);
    assert_eq!(DynStore::new(inside()).capabilities(), expected);
    assert_eq!(
        DynStore::from_arc(Arc::new(inside())).capabilities(),
        expected
    );
    assert_eq!(DynStore::new(Arc::new(inside())).capabilities(), expected);
    assert_eq!(
        FallbackStore::builder(inside()).build().capabilities(),
        expected
    );
    answers(
        "FallbackStore<Shared>",
        &FallbackStore::builder(Shared::default())
            .build()
            .capabilities(),
        &["exact", "ack"],
    );
    answers(
        "FleetStore<FallbackStore<Shared>>",
        &FleetStore::new(FallbackStore::builder(Shared::default()).build()).capabilities(),
        &ALL_DEFAULT,
    );
    let stack = with_home(
        FleetStore::new(FallbackStore::builder(Shared::default()).build()),
        FleetStore::new(FallbackStore::builder(Shared::default()).build()),
    );
    answers(
        "Stores<FleetStore<FallbackStore>>",
        &DynStore::new(stack).capabilities(),
        &ASKS,
    );
}

/// An unknown name is refused through every wrapper, and the sentence lists the names held.
#[test]
fn an_unknown_name_is_refused_through_every_wrapper() {
    let hoem = FleetModes::new().with_store("hoem");
    let stores = || with_home(MemoryStore::new(), MemoryStore::new());
    let stacks = [
        stores().capabilities(),
        FleetStore::new(stores()).capabilities(),
        Arc::new(FleetStore::new(stores())).capabilities(),
        BlockedCache::new(SubBuckets::new(stores())).capabilities(),
        FallbackStore::builder(stores()).build().capabilities(),
        Stores::new(stores()).capabilities(),
        DynStore::new(stores()).capabilities(),
    ];
    for capabilities in &stacks {
        let error = capabilities.supports(&hoem).unwrap_err();
        assert!(error.is_unknown_store(), "{error}");
        let text = error.to_string();
        assert!(
            text.contains("\"hoem\"") && text.contains("\"home\""),
            "{text}"
        );
        assert!(capabilities.supports(&ask("exact@home")).is_ok());
    }
    let plain = MemoryStore::new()
        .capabilities()
        .supports(&hoem)
        .unwrap_err();
    assert!(
        plain.to_string().contains("there are no named stores"),
        "{plain}"
    );
}

/// Asking for nothing (exact counting, one key, no cache, the default store) is what every
/// store does.
#[test]
fn asking_for_nothing_is_never_refused() {
    let quiet = FleetModes::new()
        .with_sub_buckets(1)
        .with_cache_blocked(false)
        .with_counting(Counting::Exact);
    assert!(Capabilities::default().supports(&quiet).is_ok());
    assert!(Capabilities::default().supports(&FleetModes::new()).is_ok());
}

/// A replica acknowledgement is for rules counted exactly: asked with a lease, a sync or a
/// split it is refused even over a store that can wait for replicas (the rule's store calls
/// would be leases and pushes, never waited on).
#[test]
fn a_replica_acknowledgement_is_for_rules_counted_exactly() {
    let wait = std::time::Duration::from_millis(50);
    let stack = FleetStore::new(Shared::default()).capabilities();
    assert!(
        stack
            .supports(&FleetModes::new().with_replica_ack(wait))
            .is_ok()
    );
    for counting in [
        Counting::Lease(LeaseSettings::new()),
        Counting::Sync(SyncSettings::new()),
        Counting::Split(SplitSettings::new(4)),
    ] {
        let asked = FleetModes::new()
            .with_counting(counting)
            .with_replica_ack(wait);
        let error = stack.supports(&asked).unwrap_err();
        assert!(error.is_replica_ack(), "{error}");
        assert!(error.to_string().contains("counted exactly"), "{error}");
    }
}
