//! The in-memory store's own promises: bounded keys with a lossless-first eviction order,
//! automatic sweeping, exact counts under concurrency, and clones that share state.

use std::time::Duration;

use futures_executor::block_on;
use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RefundNow, RuleId, Store, Timestamp};
use tollgate_testing::ManualClock;

fn store_with(clock: &ManualClock, max_keys: usize) -> MemoryStore<ManualClock> {
    MemoryStore::builder()
        .clock(clock.clone())
        .shards(1)
        .max_keys(max_keys)
        .build()
}

fn allowed<S: Store>(store: &S, item: Item<'_>) -> bool {
    block_on(store.check(&[item]))
        .expect("the in-memory store answers")
        .is_allowed()
}

/// Runs `attempt` `per_thread` times on each of `threads` threads at once; how many were allowed.
fn allowed_across_threads(
    threads: usize,
    per_thread: usize,
    attempt: impl Fn() -> bool + Sync,
) -> usize {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| (0..per_thread).filter(|_| attempt()).count()))
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("worker finished"))
            .sum()
    })
}

fn start() -> ManualClock {
    ManualClock::new(Timestamp::from_secs(1_700_000_000))
}

#[test]
fn full_again_state_is_evicted_first_and_losslessly() {
    let clock = start();
    let store = store_with(&clock, 64);
    let rule = RuleId::new("reads").unwrap();
    let quota = Quota::token_bucket(10, Rate::per_second(10)).unwrap();
    for i in 0..64 {
        let key = Key::new(format!("early-{i}"));
        assert!(allowed(&store, Item::new(&rule, quota, &key)));
    }
    assert_eq!(store.stats().keys, 64);
    clock.advance(Duration::from_secs(1)); // every bucket is full again
    for i in 0..64 {
        let key = Key::new(format!("late-{i}"));
        assert!(allowed(&store, Item::new(&rule, quota, &key)));
    }
    let stats = store.stats();
    assert_eq!(stats.keys, 64);
    assert_eq!(stats.lossless_evictions, 64);
    assert_eq!(stats.lossy_evictions, 0);
}

#[test]
fn flooding_distinct_keys_cannot_reset_a_refused_key() {
    let clock = start();
    let store = store_with(&clock, 64);
    let rule = RuleId::new("login").unwrap();
    let quota = Quota::token_bucket(10, Rate::per_hour(10)).unwrap();
    let attacker = Key::new("attacker");
    let attack = Item::new(&rule, quota, &attacker);
    while allowed(&store, attack) {}
    for i in 0..10_000 {
        let key = Key::new(format!("flood-{i}"));
        allowed(&store, Item::new(&rule, quota, &key));
        assert!(store.stats().keys <= 64, "the bound holds");
    }
    assert!(!allowed(&store, attack), "the refused key is still refused");
    let stats = store.stats();
    assert!(
        stats.lossy_evictions > 0,
        "lossy evictions are counted: {stats:?}"
    );
}

/// A flood at 100 % of its limit — keys that each spend their single unit — ranks level with a
/// refused caller on share used; the refused mark is what keeps the refused caller. Built as a
/// user would (default shard count), so small stores must not split into tiny shards.
#[test]
fn a_flood_at_its_full_limit_cannot_reset_a_refused_caller() {
    let clock = start();
    let store = MemoryStore::builder()
        .clock(clock.clone())
        .max_keys(64)
        .build();
    let rule = RuleId::new("signup").unwrap();
    let quota = Quota::token_bucket(1, Rate::per_hour(1)).unwrap();
    let caller = Key::new("caller");
    assert!(allowed(&store, Item::new(&rule, quota, &caller)));
    assert!(
        !allowed(&store, Item::new(&rule, quota, &caller)),
        "refused"
    );
    for round in 0..5 {
        for i in 0..120 {
            let key = Key::new(format!("flood-{round}-{i}"));
            assert!(
                allowed(&store, Item::new(&rule, quota, &key)),
                "each flood key spends its single unit"
            );
            assert!(store.stats().keys <= 64, "the bound holds");
        }
        assert!(
            !allowed(&store, Item::new(&rule, quota, &caller)),
            "the refused caller is still refused after flood round {round}"
        );
    }
    assert!(store.stats().lossy_evictions >= 5 * 120 - 64);
}

/// The same flood against windows and logs, whose state is kept apart from buckets'.
#[test]
fn a_flood_at_its_full_limit_cannot_reset_a_refused_caller_of_any_algorithm() {
    let day = Duration::from_secs(86_400);
    for quota in [
        Quota::fixed_window(1, day).unwrap(),
        Quota::sliding_window_counter(1, day).unwrap(),
        Quota::sliding_window_log(1, day).unwrap(),
        Quota::gcra(Rate::per_day(1), 1).unwrap(),
    ] {
        let clock = start();
        let store = store_with(&clock, 64);
        let rule = RuleId::new("signup").unwrap();
        let caller = Key::new("caller");
        assert!(allowed(&store, Item::new(&rule, quota, &caller)));
        assert!(!allowed(&store, Item::new(&rule, quota, &caller)));
        for i in 0..300 {
            let key = Key::new(format!("flood-{i}"));
            assert!(allowed(&store, Item::new(&rule, quota, &key)));
        }
        assert!(
            !allowed(&store, Item::new(&rule, quota, &caller)),
            "{:?}: the refused caller is still refused",
            quota.algorithm()
        );
    }
}

/// Refused callers are kept only while they fit: a flood of callers who all get refused cannot
/// grow the store past its bound.
#[test]
fn refused_callers_beyond_the_bound_are_evicted_and_counted() {
    let clock = start();
    let store = store_with(&clock, 64);
    let rule = RuleId::new("signup").unwrap();
    let quota = Quota::token_bucket(1, Rate::per_hour(1)).unwrap();
    for i in 0..200 {
        let key = Key::new(format!("refused-{i}"));
        assert!(allowed(&store, Item::new(&rule, quota, &key)));
        assert!(!allowed(&store, Item::new(&rule, quota, &key)));
        assert!(store.stats().keys <= 64, "the bound holds");
    }
    assert!(store.stats().lossy_evictions > 0);
}

/// Refused callers that fit in a shard all survive a flood: eviction takes them only when nobody
/// else is left, and then one at a time.
#[test]
fn refused_callers_that_fit_all_survive_a_flood() {
    let clock = start();
    let store = store_with(&clock, 64);
    let rule = RuleId::new("otp").unwrap();
    let quota = Quota::token_bucket(1, Rate::per_day(1)).unwrap();
    let refused: Vec<Key> = (0..63).map(|i| Key::new(format!("refused-{i}"))).collect();
    for key in &refused {
        assert!(allowed(&store, Item::new(&rule, quota, key)));
        assert!(!allowed(&store, Item::new(&rule, quota, key)));
    }
    for i in 0..500 {
        let key = Key::new(format!("flood-{i}"));
        assert!(allowed(&store, Item::new(&rule, quota, &key)));
        assert!(store.stats().keys <= 64);
    }
    let reset = refused
        .iter()
        .filter(|key| allowed(&store, Item::new(&rule, quota, key)))
        .count();
    assert_eq!(
        reset, 0,
        "63 refused callers fit in 64 keys; the flood reset {reset}"
    );
}

/// More distinct quotas under one rule than a shard numbers: the states dropped to make room are
/// those of a quota without refused callers.
#[test]
fn running_out_of_quota_slots_keeps_refused_callers() {
    let clock = start();
    let store = store_with(&clock, 1 << 16);
    let rule = RuleId::new("plans").unwrap();
    let plan = |n: u64| Quota::token_bucket(1 + n, Rate::per_day(1 + n)).unwrap();
    let refused = Key::new("refused");
    assert!(allowed(&store, Item::new(&rule, plan(0), &refused)));
    assert!(!allowed(&store, Item::new(&rule, plan(0), &refused)));
    for n in 1..=1_500 {
        let key = Key::new(format!("tenant-{n}"));
        assert!(allowed(&store, Item::new(&rule, plan(n), &key)));
    }
    assert!(
        !allowed(&store, Item::new(&rule, plan(0), &refused)),
        "the refused caller is kept (lossy evictions: {})",
        store.stats().lossy_evictions
    );
}

/// `max_keys` is a hard bound, however it divides among shards.
#[test]
fn max_keys_is_a_hard_bound() {
    for (max_keys, shards) in [(129, 2), (1_000, 7), (65, 64), (3, 1)] {
        let clock = start();
        let store = MemoryStore::builder()
            .clock(clock.clone())
            .shards(shards)
            .max_keys(max_keys)
            .build();
        let rule = RuleId::new("r").unwrap();
        let quota = Quota::token_bucket(2, Rate::per_day(1)).unwrap();
        for i in 0..5_000 {
            let key = Key::new(format!("k{i}"));
            allowed(&store, Item::new(&rule, quota, &key));
            assert!(
                store.stats().keys <= max_keys,
                "max_keys({max_keys}) over {shards} shards: {} held",
                store.stats().keys
            );
        }
    }
}

/// Receipts name the items they are made with, so a slice other than the one checked gets none
/// rather than receipts naming the wrong rule.
#[test]
fn receipts_need_the_items_that_were_checked() {
    let store = MemoryStore::new();
    let (first, second) = (RuleId::new("r1").unwrap(), RuleId::new("r2").unwrap());
    let quota = Quota::token_bucket(3, Rate::per_hour(3)).unwrap();
    let key = Key::new("k");
    let items = [
        Item::new(&first, quota, &key),
        Item::new(&second, quota, &key).with_cost(3),
    ];
    let batch = block_on(store.check(&items)).unwrap();
    assert!(batch.into_receipts(&items[1..]).is_empty());
    let batch = block_on(store.check(&[items[0]])).unwrap();
    let receipts = batch.into_receipts(&items[..1]);
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0].rule(), &first);
}

/// Each key is judged by its own quota: a day-long window exhausted by one caller is not swept
/// because another key of the same rule uses one-second windows.
#[test]
fn per_key_quotas_under_one_rule_are_swept_by_their_own_quota() {
    let clock = start();
    let store = store_with(&clock, 1_000);
    let rule = RuleId::new("plans").unwrap();
    let daily = Quota::fixed_window(3, Duration::from_secs(86_400)).unwrap();
    let per_second = Quota::fixed_window(100, Duration::from_secs(1)).unwrap();
    let (free, partner) = (Key::new("free-user"), Key::new("partner"));
    for _ in 0..3 {
        assert!(allowed(&store, Item::new(&rule, daily, &free)));
    }
    assert!(!allowed(&store, Item::new(&rule, daily, &free)));
    assert!(allowed(&store, Item::new(&rule, per_second, &partner)));
    clock.advance(Duration::from_secs(61));
    for i in 0..300 {
        let key = Key::new(format!("partner-{i}"));
        assert!(allowed(&store, Item::new(&rule, per_second, &key)));
    }
    store.sweep();
    assert!(
        !allowed(&store, Item::new(&rule, daily, &free)),
        "the daily caller is still refused"
    );
}

/// More distinct quotas under one rule than a shard numbers (1,024): the store keeps working,
/// frees numbers no state uses, and counts what it must drop.
#[test]
fn thousands_of_distinct_quotas_under_one_rule_stay_bounded_and_correct() {
    let clock = start();
    let store = store_with(&clock, 100_000);
    let rule = RuleId::new("contracts").unwrap();
    for plan in 1..=3_000u64 {
        let quota = Quota::token_bucket(plan, Rate::per_hour(plan)).unwrap();
        let key = Key::new(format!("partner-{plan}"));
        let item = Item::new(&rule, quota, &key).with_cost(plan);
        assert!(allowed(&store, item), "plan {plan}: a full bucket");
        assert!(
            !allowed(&store, item.with_cost(1)),
            "plan {plan}: then empty"
        );
    }
    let stats = store.stats();
    assert!(stats.keys <= 3_000);
    assert_eq!(
        stats.keys as u64 + stats.lossy_evictions,
        3_000,
        "every partner is either held or counted as evicted: {stats:?}"
    );
}

#[test]
fn idle_state_is_swept_without_being_asked() {
    let clock = start();
    let store = MemoryStore::builder()
        .clock(clock.clone())
        .shards(1)
        .build();
    let rule = RuleId::new("search").unwrap();
    let quota = Quota::fixed_window(5, Duration::from_secs(10)).unwrap();
    for i in 0..100 {
        let key = Key::new(format!("user-{i}"));
        assert!(allowed(&store, Item::new(&rule, quota, &key)));
    }
    assert_eq!(store.stats().keys, 100);
    clock.advance(Duration::from_secs(61));
    let newcomer = Key::new("newcomer");
    assert!(allowed(&store, Item::new(&rule, quota, &newcomer)));
    assert_eq!(
        store.stats().keys,
        1,
        "expired windows were swept on the next insert"
    );
    clock.advance(Duration::from_secs(20));
    store.sweep();
    assert_eq!(store.stats().keys, 0);
}

#[test]
fn refused_new_keys_and_peeks_store_nothing() {
    let clock = start();
    let store = store_with(&clock, 64);
    let rule = RuleId::new("export").unwrap();
    let quota = Quota::token_bucket(5, Rate::per_second(1)).unwrap();
    let key = Key::new("user77");
    assert!(!allowed(&store, Item::new(&rule, quota, &key).with_cost(6)));
    block_on(store.peek(&Item::new(&rule, quota, &key))).unwrap();
    assert_eq!(store.stats().keys, 0);
}

#[test]
fn concurrent_checks_on_one_key_are_exact_and_clones_share_state() {
    let store = MemoryStore::new();
    let rule = RuleId::new("follows").unwrap();
    let quota = Quota::sliding_window_counter(100, Duration::from_secs(86_400)).unwrap();
    let key = Key::new("user77");
    // Each thread works on its own clone: clones share state.
    let total = allowed_across_threads(8, 200, || {
        allowed(&store.clone(), Item::new(&rule, quota, &key))
    });
    assert_eq!(total, 100);
}

#[test]
fn concurrent_batches_are_all_or_nothing() {
    let store = MemoryStore::new();
    let (wide_rule, narrow_rule) = (RuleId::new("wide").unwrap(), RuleId::new("narrow").unwrap());
    let wide = Quota::fixed_window(1_000, Duration::from_secs(3_600)).unwrap();
    let narrow = Quota::fixed_window(50, Duration::from_secs(3_600)).unwrap();
    let (a, b) = (Key::new("a"), Key::new("b"));
    let passed = allowed_across_threads(4, 100, || {
        let items = [
            Item::new(&wide_rule, wide, &a),
            Item::new(&narrow_rule, narrow, &b),
        ];
        block_on(store.check(&items)).unwrap().is_allowed()
    });
    assert_eq!(passed, 50);
    let remaining = block_on(store.peek(&Item::new(&wide_rule, wide, &a).with_cost(0))).unwrap();
    assert_eq!(
        remaining.remaining(),
        950,
        "refused batches charged the wide rule nothing"
    );
}

#[test]
fn hostile_keys_are_distinct_and_bounded() {
    let clock = start();
    let store = store_with(&clock, 1_000);
    let rule = RuleId::new("api-key").unwrap();
    let quota = Quota::fixed_window(1, Duration::from_secs(60)).unwrap();
    let keys = [
        Key::new(vec![b'x'; 1 << 20]),
        Key::new(vec![b'y'; 1 << 20]),
        Key::new("{tag}"),
        Key::new("a:b"),
        Key::new([0u8, 255, 10, 13]),
        Key::new(""),
    ];
    for key in &keys {
        assert!(
            allowed(&store, Item::new(&rule, quota, key)),
            "{key:?} starts fresh"
        );
    }
    for key in &keys {
        assert!(
            !allowed(&store, Item::new(&rule, quota, key)),
            "{key:?} was counted"
        );
    }
}

#[test]
fn shared_path_checks_and_locked_batches_on_one_bucket_stay_exact() {
    let store = MemoryStore::new();
    let (bucket_rule, window_rule) = (
        RuleId::new("bucket").unwrap(),
        RuleId::new("window").unwrap(),
    );
    let bucket = Quota::token_bucket(100, Rate::per_day(1)).unwrap();
    let narrow = Quota::fixed_window(30, Duration::from_secs(3_600)).unwrap();
    let (key, other) = (Key::new("hot"), Key::new("other"));
    let single = Item::new(&bucket_rule, bucket, &key);
    let batch = [single, Item::new(&window_rule, narrow, &other)];
    assert!(
        allowed(&store, single),
        "the key exists, so later singles take the shared path"
    );
    let (singles, batches) = std::thread::scope(|scope| {
        let singles = scope.spawn(|| allowed_across_threads(2, 200, || allowed(&store, single)));
        let batches = scope.spawn(|| {
            allowed_across_threads(2, 200, || {
                block_on(store.check(&batch)).unwrap().is_allowed()
            })
        });
        (singles.join().unwrap(), batches.join().unwrap())
    });
    assert!(batches <= 30);
    assert_eq!(
        1 + singles + batches,
        100,
        "{singles} singles and {batches} batches"
    );
}

#[test]
fn the_store_answers_at_once_without_a_future() {
    let store = MemoryStore::new();
    let rule = RuleId::new("now").unwrap();
    let key = Key::new("user77");
    let items = [Item::new(
        &rule,
        Quota::fixed_window(1, Duration::from_secs(60)).unwrap(),
        &key,
    )];
    let first = store.check_now(&items).unwrap().unwrap();
    assert!(first.is_allowed());
    assert!(!store.check_now(&items).unwrap().unwrap().is_allowed());
    let receipt = first.into_receipts(&items).pop().unwrap();
    assert!(matches!(store.refund_now(receipt), RefundNow::Done(Ok(()))));
    assert!(
        store.check_now(&items).unwrap().unwrap().is_allowed(),
        "refunded at once"
    );
}

/// Held concurrency slots are never forgotten: not when the store is over its key bound, and
/// not when one rule sees more distinct quotas than a table has quota slots (1,024), where
/// other algorithms' states of the least used quota are dropped.
#[test]
fn held_slots_survive_a_full_store_and_more_quotas_than_slots() {
    let clock = ManualClock::new(Timestamp::from_secs(1_700_000_000));
    let store = store_with(&clock, 64);
    let rule = RuleId::new("exports").expect("a valid rule id");
    let keys: Vec<Key> = (0..1_100).map(|n| Key::new(format!("acct-{n}"))).collect();
    let quota = |n: usize| Quota::concurrency(n as u64 + 1).expect("valid");
    for (n, key) in keys.iter().enumerate() {
        assert!(
            allowed(&store, Item::new(&rule, quota(n), key)),
            "slot for {n}"
        );
    }
    assert_eq!(store.stats().lossy_evictions, 0);
    assert_eq!(
        store.stats().keys,
        1_100,
        "every hold is kept past the bound of 64"
    );
    for (n, key) in keys.iter().enumerate() {
        let free = block_on(store.peek(&Item::new(&rule, quota(n), key).with_cost(0)))
            .expect("answers")
            .remaining();
        assert_eq!(free, n as u64, "{n}: one of {} slots still held", n + 1);
    }
}
