//! The Lua script decides exactly like the in-memory store: the same random sequences of
//! checks, costs, refunds, peeks and clock moves give identical decisions and charges, for
//! every algorithm, including limits and windows large enough that the sliding counter's
//! products pass 2^53 (where Lua doubles would round).

mod common;

use std::time::Duration;

use tollgate_core::testing::ManualClock;
use tollgate_core::testing::conformance::START;
use tollgate_core::{Item, Key, MemoryStore, Mode, Quota, Rate, RuleId, Store};
use tollgate_redis::RedisStore;

/// A small deterministic generator (no dependency, the same sequence every run).
struct Sequence(u64);

impl Sequence {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below.max(1)
    }
}

fn quotas() -> Vec<Quota> {
    let year = Duration::from_secs(366 * 86_400);
    vec![
        Quota::token_bucket(20, Rate::per_second(2)).expect("valid"),
        Quota::gcra(Rate::per_second(10), 5).expect("valid"),
        Quota::token_bucket(1 << 40, Rate::per(1 << 40, year)).expect("valid"),
        Quota::fixed_window(60, Duration::from_secs(60)).expect("valid"),
        Quota::fixed_window(1 << 40, year).expect("valid"),
        Quota::sliding_window_counter(100, Duration::from_secs(60)).expect("valid"),
        Quota::sliding_window_counter(7, Duration::from_millis(1_300)).expect("valid"),
        Quota::sliding_window_counter(1 << 40, year).expect("valid"),
        Quota::sliding_window_counter((1 << 40) - 3, Duration::from_secs(86_400 * 365))
            .expect("valid"),
        Quota::sliding_window_log(10, Duration::from_secs(10)).expect("valid"),
        Quota::leaky_bucket(Rate::per_second(5), Duration::from_secs(2)).expect("valid"),
    ]
}

/// Runs one random sequence against both stores and compares every answer.
fn compare(quota: Quota, seed: u64) {
    let memory_clock = ManualClock::new(START);
    let redis_clock = ManualClock::new(START);
    let memory = MemoryStore::builder().clock(memory_clock.clone()).build();
    let redis = common::standalone_store(redis_clock.clone());
    let rule = RuleId::new("differential").expect("id");
    let keys = [Key::new("a"), Key::new("b")];
    let mut random = Sequence(seed);
    let mut receipts = Vec::new();
    let big = quota.limit() > 1_000_000;
    common::block_on(async {
        for step in 0..300 {
            let key = &keys[random.next(2) as usize];
            let cost = match random.next(10) {
                0 => 0,
                1 if big => random.next(quota.limit()),
                1 => random.next(quota.limit() + 2),
                _ if big => random.next(1 << 39) + 1,
                _ => 1 + random.next(3),
            };
            let item = Item::new(&rule, quota, key).with_cost(cost);
            match random.next(10) {
                0 if !receipts.is_empty() => {
                    let receipt = receipts.swap_remove(random.next(receipts.len() as u64) as usize);
                    memory.refund(&receipt).await.expect("memory refunds");
                    redis.refund(&receipt).await.expect("redis refunds");
                }
                1 => {
                    let (m, r) = (memory.peek(&item).await, redis.peek(&item).await);
                    assert_eq!(
                        m.expect("memory"),
                        r.expect("redis"),
                        "{quota:?} step {step}: peek"
                    );
                }
                _ => {
                    let m = memory.check(&[item]).await.expect("memory answers");
                    let r = redis.check(&[item]).await.expect("redis answers");
                    assert_eq!(m, r, "{quota:?} step {step}: check cost {cost}");
                    receipts.extend(m.receipts(&[item]));
                }
            }
            let span = quota.interval_micros().saturating_mul(3).max(1);
            let advance = match random.next(4) {
                0 => 0,
                1 => random.next(1_000),
                _ => random.next(span),
            };
            memory_clock.advance(Duration::from_micros(advance));
            redis_clock.advance(Duration::from_micros(advance));
        }
    });
}

#[test]
fn random_sequences_decide_exactly_like_the_memory_store() {
    for (index, quota) in quotas().into_iter().enumerate() {
        for seed in 0..3 {
            compare(quota, seed * 1_000 + index as u64);
        }
    }
}

/// Rules of every algorithm, for batches.
fn batch_rules() -> Vec<(RuleId, Quota)> {
    let minute = Duration::from_secs(60);
    let rules = [
        (
            "bucket",
            Quota::token_bucket(4, Rate::per_second(1)).expect("valid"),
        ),
        ("window", Quota::fixed_window(5, minute).expect("valid")),
        (
            "counter",
            Quota::sliding_window_counter(6, minute).expect("valid"),
        ),
        (
            "log",
            Quota::sliding_window_log(4, Duration::from_secs(5)).expect("valid"),
        ),
        (
            "pace",
            Quota::leaky_bucket(Rate::per_second(2), Duration::from_secs(2)).expect("valid"),
        ),
    ];
    rules
        .into_iter()
        .map(|(id, quota)| (RuleId::new(id).expect("id"), quota))
        .collect()
}

/// Random batches of one to four items — several rules, repeated keys, the same rule and key
/// twice, shadow items, pacing together — answered identically by both stores.
fn compare_batches(redis: RedisStore, redis_clock: ManualClock, seed: u64) {
    let memory_clock = ManualClock::new(START);
    let memory = MemoryStore::builder().clock(memory_clock.clone()).build();
    let rules = batch_rules();
    let keys = [Key::new("a"), Key::new("b")];
    let mut random = Sequence(seed);
    common::block_on(async {
        for step in 0..200 {
            let size = 1 + random.next(4) as usize;
            let items: Vec<Item<'_>> = (0..size)
                .map(|_| {
                    let (rule, quota) = &rules[random.next(rules.len() as u64) as usize];
                    let mode = if random.next(5) == 0 {
                        Mode::Shadow
                    } else {
                        Mode::Enforce
                    };
                    Item::new(rule, *quota, &keys[random.next(2) as usize])
                        .with_cost(random.next(3))
                        .with_mode(mode)
                })
                .collect();
            let m = memory.check(&items).await.expect("memory answers");
            let r = redis.check(&items).await.expect("redis answers");
            assert_eq!(m, r, "seed {seed} step {step}: {items:#?}");
            let advance = Duration::from_millis(random.next(1_500));
            memory_clock.advance(advance);
            redis_clock.advance(advance);
        }
    });
}

#[test]
fn random_batches_decide_exactly_like_the_memory_store_on_one_server() {
    for seed in 0..4 {
        let clock = ManualClock::new(START);
        compare_batches(common::standalone_store(clock.clone()), clock, seed);
    }
}

#[test]
fn random_batches_decide_exactly_like_the_memory_store_on_a_cluster() {
    for seed in 0..4 {
        let clock = ManualClock::new(START);
        compare_batches(common::cluster_store(clock.clone()), clock, 100 + seed);
    }
}
