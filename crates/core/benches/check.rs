//! Time per check: tollgate's [`MemoryStore`] against governor's keyed limiter, side by side.
//!
//! Both limiters get the **same keys** (one `tollgate_core::Key` per caller, built from the
//! strings `"user:0"`, `"user:1"`, ...; governor is keyed by that very `Key` type, so both hash
//! and compare the same bytes) and the **same quota**: a token bucket of capacity B refilled at
//! R a second, which is governor's `Quota::per_second(R).allow_burst(B)`.
//!
//! * `allow`: B = 10^9, R = 10^6/s — every check is allowed (asserted before timing);
//! * `refuse`: B = 1, R = 1/s — nearly every check is refused (asserted before timing).
//!
//! Cases, each timed for tollgate (two paths) and then for governor, on fresh limiters:
//!
//! * `hot_key`: one key, one thread;
//! * `many_keys`: 10,000 keys round-robin, one thread;
//! * `2_threads_hot_key`: two threads on one key;
//! * `2_threads_many_keys`: two threads round-robin over the same 10,000 keys, half a lap apart.
//!
//! tollgate is called through its public paths only, an [`Item`] per check and the ready future
//! polled once with `now_or_never`:
//!
//! * `tollgate`: `Store::check_one`, the one-rule check (typed limits, single-rule routes);
//! * `tollgate_batch`: `Store::check` on a one-item slice, answering a whole `BatchDecision`
//!   (what a route with several rules uses);
//! * `tollgate_batch3`: `Store::check` on three items, three rules on the caller's key;
//! * `tollgate_leased`: the quota leased by a `FleetStore` over the in-memory store.
//!
//! The two-thread cases
//! report wall-clock time divided by the checks **all** threads did (the inverse of throughput),
//! measured from the moment a barrier releases both threads.
//!
//! Run: `cargo bench -p tollgate-core --bench check` (optionally `-- allow/hot_key` to filter),
//! or `scripts/bench-ratios` for the tollgate/governor ratio table.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::Criterion;
use criterion::measurement::WallTime;
use futures_util::FutureExt;
use governor::DefaultKeyedRateLimiter;
use tollgate_core::{
    Counting, FleetModes, Item, Key, LeaseSettings, MemoryStore, Quota, Rate, RuleId, Store,
};
use tollgate_wrappers::FleetStore;

/// Distinct keys in the `many_keys` cases.
const KEYS: usize = 10_000;
/// Threads in the `2_threads_*` cases.
const THREADS: usize = 2;
/// The most units one lease takes in the `tollgate_leased` cases.
const LEASE_UNITS: u64 = 10_000_000;

/// One quota, in both libraries' terms.
struct Limits {
    name: &'static str,
    capacity: u32,
    per_second: u32,
}

/// Allows every check: refill one token per microsecond, a billion in the bucket.
const ALLOW: Limits = Limits {
    name: "allow",
    capacity: 1_000_000_000,
    per_second: 1_000_000,
};

/// Refuses nearly every check: one token, one back per second.
const REFUSE: Limits = Limits {
    name: "refuse",
    capacity: 1,
    per_second: 1,
};

impl Limits {
    fn tollgate(&self) -> Quota {
        Quota::token_bucket(
            u64::from(self.capacity),
            Rate::per_second(u64::from(self.per_second)),
        )
        .expect("the bench quota is valid")
    }

    fn governor(&self) -> governor::Quota {
        governor::Quota::per_second(non_zero(self.per_second)).allow_burst(non_zero(self.capacity))
    }
}

fn non_zero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("the bench numbers are not zero")
}

/// One check of one key, whichever the library.
trait Limiter: Sync {
    fn check(&self, key: &Key) -> bool;

    /// Enters what a check runs inside on the timing thread (a Tokio runtime, for a limiter
    /// that starts background work), as a server's handler already is.
    fn enter(&self) -> Option<tokio::runtime::EnterGuard<'_>> {
        None
    }
}

struct Tollgate {
    store: MemoryStore,
    rule: RuleId,
    quota: Quota,
}

impl Tollgate {
    fn new(limits: &Limits) -> Self {
        Tollgate {
            store: MemoryStore::new(),
            rule: RuleId::new("bench").expect("the bench rule id is valid"),
            quota: limits.tollgate(),
        }
    }
}

impl Limiter for Tollgate {
    #[inline]
    fn check(&self, key: &Key) -> bool {
        let item = Item::new(&self.rule, self.quota, key);
        self.store
            .check_one(&item)
            .now_or_never()
            .expect("the in-memory store answers with a ready future")
            .expect("the in-memory store does not fail")
            .decision()
            .is_allowed()
    }
}

/// The same store through the batch path: `Store::check` on a one-item slice, answering a
/// `BatchDecision` (what the layer uses for requests that match several rules).
struct TollgateBatch(Tollgate);

impl Limiter for TollgateBatch {
    #[inline]
    fn check(&self, key: &Key) -> bool {
        let item = Item::new(&self.0.rule, self.0.quota, key);
        self.0
            .store
            .check(std::slice::from_ref(&item))
            .now_or_never()
            .expect("the in-memory store answers with a ready future")
            .expect("the in-memory store does not fail")
            .is_allowed()
    }
}

/// The same quota leased from the in-memory store by a `FleetStore` (`Counting::Lease`), as the
/// layer asks (`check_now`, else `check`), inside a Tokio runtime as the layer always is: a
/// check spends what the gateway holds, and top-ups run on the runtime's worker now and then.
struct TollgateLeased {
    store: FleetStore<MemoryStore>,
    rule: RuleId,
    quota: Quota,
    settings: LeaseSettings,
    runtime: tokio::runtime::Runtime,
}

impl TollgateLeased {
    fn new(limits: &Limits) -> Self {
        TollgateLeased {
            store: FleetStore::new(MemoryStore::new()),
            rule: RuleId::new("bench").expect("the bench rule id is valid"),
            quota: limits.tollgate(),
            // Leases as large as a second of this bench's checks may need (the key's demand
            // sizes them, up to this cap), so what is timed is the local spend: with the default
            // cap of 100 units a key checked millions of times a second tops up every 50
            // checks, and the bench would time the top-up path instead.
            settings: LeaseSettings::new().max_units(LEASE_UNITS),
            runtime: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .build()
                .expect("a Tokio runtime for the leased bench"),
        }
    }
}

impl Limiter for TollgateLeased {
    fn enter(&self) -> Option<tokio::runtime::EnterGuard<'_>> {
        Some(self.runtime.enter())
    }

    #[inline]
    fn check(&self, key: &Key) -> bool {
        let modes = FleetModes::new().with_counting(Counting::Lease(self.settings));
        let item = Item::new(&self.rule, self.quota, key).with_fleet_modes(modes);
        let items = std::slice::from_ref(&item);
        let answer = match self.store.check_now(items) {
            Some(answer) => answer,
            // Another thread's top-up of this lease may be on its way: wait for it.
            None => futures_executor::block_on(self.store.check(items)),
        };
        answer
            .expect("the in-memory store does not fail")
            .is_allowed()
    }
}

/// Three rules on the same caller in one `Store::check` (a route with a per-caller, a per-route
/// and a daily rule, say): each rule's key lives in its own shard, so one lock per shard touched.
struct TollgateBatch3 {
    store: MemoryStore,
    rules: [RuleId; 3],
    quota: Quota,
}

impl TollgateBatch3 {
    fn new(limits: &Limits) -> Self {
        let rule = |name| RuleId::new(name).expect("the bench rule ids are valid");
        TollgateBatch3 {
            store: MemoryStore::new(),
            rules: [rule("bench"), rule("bench-route"), rule("bench-daily")],
            quota: limits.tollgate(),
        }
    }
}

impl Limiter for TollgateBatch3 {
    #[inline]
    fn check(&self, key: &Key) -> bool {
        let items = self
            .rules
            .each_ref()
            .map(|rule| Item::new(rule, self.quota, key));
        self.store
            .check(&items)
            .now_or_never()
            .expect("the in-memory store answers with a ready future")
            .expect("the in-memory store does not fail")
            .is_allowed()
    }
}

struct Governor(DefaultKeyedRateLimiter<Key>);

impl Governor {
    fn new(limits: &Limits) -> Self {
        Governor(DefaultKeyedRateLimiter::keyed(limits.governor()))
    }
}

impl Limiter for Governor {
    #[inline]
    fn check(&self, key: &Key) -> bool {
        self.0.check_key(key).is_ok()
    }
}

#[derive(Clone, Copy)]
enum Case {
    HotKey,
    ManyKeys,
    ThreadsHotKey,
    ThreadsManyKeys,
}

impl Case {
    const ALL: [Case; 4] = [
        Case::HotKey,
        Case::ManyKeys,
        Case::ThreadsHotKey,
        Case::ThreadsManyKeys,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::HotKey => "hot_key",
            Case::ManyKeys => "many_keys",
            Case::ThreadsHotKey => "2_threads_hot_key",
            Case::ThreadsManyKeys => "2_threads_many_keys",
        }
    }

    fn keys(self, all: &[Key]) -> &[Key] {
        match self {
            Case::HotKey | Case::ThreadsHotKey => &all[..1],
            Case::ManyKeys | Case::ThreadsManyKeys => all,
        }
    }

    fn threaded(self) -> bool {
        matches!(self, Case::ThreadsHotKey | Case::ThreadsManyKeys)
    }
}

/// Times `limiter` on `case` under `id`.
fn bench_case<L: Limiter>(
    group: &mut criterion::BenchmarkGroup<'_, WallTime>,
    id: &str,
    limiter: &L,
    case: Case,
    keys: &[Key],
) {
    if case.threaded() {
        group.bench_function(id, |b| {
            b.iter_custom(|iters| run_threads(limiter, keys, iters));
        });
    } else {
        let _inside = limiter.enter();
        group.bench_function(id, |b| {
            let mut next = 0;
            b.iter(|| {
                let key = &keys[next];
                next += 1;
                if next == keys.len() {
                    next = 0;
                }
                black_box(limiter.check(black_box(key)))
            });
        });
    }
}

/// `iters` checks on each of [`THREADS`] threads, round-robin over `keys` (each thread starting
/// its own share of the way in); wall-clock time from the barrier to the last thread's end,
/// divided by the thread count, so the figure is time per check of all threads together.
fn run_threads<L: Limiter>(limiter: &L, keys: &[Key], iters: u64) -> Duration {
    let barrier = Barrier::new(THREADS);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|thread| {
                let barrier = &barrier;
                scope.spawn(move || {
                    let _inside = limiter.enter();
                    let mut next = thread * keys.len() / THREADS;
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(limiter.check(&keys[next]));
                        next += 1;
                        if next == keys.len() {
                            next = 0;
                        }
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("a bench thread panicked"))
            .collect()
    });
    let start = spans.iter().map(|span| span.0).min();
    let end = spans.iter().map(|span| span.1).max();
    let elapsed = end
        .zip(start)
        .map_or(Duration::ZERO, |(end, start)| end - start);
    elapsed / THREADS as u32
}

/// Checks that the quotas do what their names say, on fresh limiters, before anything is timed.
fn check_quotas(keys: &[Key]) {
    let checks = 100_000;
    for limits in [ALLOW, REFUSE] {
        let counts = [
            ("tollgate", allowed(&Tollgate::new(&limits), keys, checks)),
            (
                "tollgate_batch",
                allowed(&TollgateBatch(Tollgate::new(&limits)), keys, checks),
            ),
            ("governor", allowed(&Governor::new(&limits), keys, checks)),
        ];
        for (library, allowed) in counts {
            eprintln!(
                "quota {}: {library} allowed {allowed} of {checks} checks on one key",
                limits.name
            );
            match limits.name {
                "allow" => assert_eq!(allowed, checks, "the allow quota must allow every check"),
                _ => assert!(
                    allowed <= 2,
                    "the refuse quota must refuse nearly every check"
                ),
            }
        }
    }
}

fn allowed(limiter: &impl Limiter, keys: &[Key], checks: usize) -> usize {
    (0..checks).filter(|_| limiter.check(&keys[0])).count()
}

fn main() {
    let keys: Vec<Key> = (0..KEYS).map(|i| Key::new(format!("user:{i}"))).collect();
    check_quotas(&keys);

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
        .configure_from_args();
    let mut group = criterion.benchmark_group("check");
    for limits in [ALLOW, REFUSE] {
        for case in Case::ALL {
            let keys = case.keys(&keys);
            let prefix = format!("{}/{}", limits.name, case.name());
            // Fresh limiters per case, so no case inherits another's state.
            let tollgate = Tollgate::new(&limits);
            bench_case(
                &mut group,
                &format!("{prefix}/tollgate"),
                &tollgate,
                case,
                keys,
            );
            let batch = TollgateBatch(Tollgate::new(&limits));
            bench_case(
                &mut group,
                &format!("{prefix}/tollgate_batch"),
                &batch,
                case,
                keys,
            );
            let three = TollgateBatch3::new(&limits);
            bench_case(
                &mut group,
                &format!("{prefix}/tollgate_batch3"),
                &three,
                case,
                keys,
            );
            let leased = TollgateLeased::new(&limits);
            bench_case(
                &mut group,
                &format!("{prefix}/tollgate_leased"),
                &leased,
                case,
                keys,
            );
            let governor = Governor::new(&limits);
            bench_case(
                &mut group,
                &format!("{prefix}/governor"),
                &governor,
                case,
                keys,
            );
        }
    }
    group.finish();
    criterion.final_summary();
}
