//! The Lua script decides exactly like the in-memory store: the same random sequences of
//! checks, costs, refunds (and refunds sent twice), peeks, clock moves — forward and back by up
//! to an hour — and quota changes (among quotas of one algorithm family with other intervals,
//! windows and limits, and token bucket <-> pacing) give identical decisions and charges, for
//! every algorithm, including limits and windows large enough that the sliding counter's
//! products pass 2^53 (where Lua doubles would round).
//!
//! **Idle state.** A store may drop a caller's state once dropping it loses nothing at the
//! current time (the in-memory store sweeps it now and then, Redis expires it). Under one
//! quota and a clock that only moves forward, a dropped state and a kept idle one answer alike.
//! They need not after the clock steps back or the quota changes: an idle bucket read an hour
//! earlier is exhausted again, an ended window read under a longer one may overlap it. Before
//! each rewind, and before a check or peek that reads a state under another quota than it was
//! last checked under, both stores therefore drop every idle state (the memory store by
//! `sweep`, Redis by a script that deletes the keys idle by the same rule), so they start from
//! the same states and every answer after it is compared exactly.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use tollgate_core::{
    Algorithm, Charge, Clock, Item, Key, MemoryStore, Mode, Quota, Rate, Receipt, RuleId, Store,
    Timestamp,
};
use tollgate_redis::RedisStore;
use tollgate_testing::conformance::START;
use tollgate_testing::{ManualClock, replay};

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

const YEAR: Duration = Duration::from_secs(366 * 86_400);
const HOUR_MICROS: u64 = 3_600_000_000;

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

/// Quotas of one algorithm family (one stored state shape), which a key can switch among.
fn families() -> Vec<Vec<Quota>> {
    let valid = |quota: Result<Quota, _>| quota.expect("valid");
    vec![
        [
            Quota::token_bucket(20, Rate::per_second(2)),
            Quota::gcra(Rate::per_second(10), 5),
            Quota::token_bucket(5, Rate::per_minute(1)),
            Quota::leaky_bucket(Rate::per_second(5), secs(2)),
            Quota::leaky_bucket(Rate::per_minute(30), secs(10)),
            Quota::token_bucket(1 << 40, Rate::per(1 << 40, YEAR)),
        ]
        .map(valid)
        .to_vec(),
        [
            Quota::fixed_window(60, secs(60)),
            Quota::fixed_window(10, secs(1)),
            Quota::fixed_window(7, Duration::from_millis(1_300)),
            Quota::fixed_window(5, secs(3_600)),
            Quota::fixed_window(1 << 40, YEAR),
        ]
        .map(valid)
        .to_vec(),
        [
            Quota::sliding_window_counter(100, secs(60)),
            Quota::sliding_window_counter(7, Duration::from_millis(1_300)),
            Quota::sliding_window_counter(10, secs(1)),
            Quota::sliding_window_counter(5, secs(3_600)),
            Quota::sliding_window_counter(1 << 40, YEAR),
            Quota::sliding_window_counter((1 << 40) - 3, secs(86_400 * 365)),
        ]
        .map(valid)
        .to_vec(),
        [
            Quota::sliding_window_log(10, secs(10)),
            Quota::sliding_window_log(3, secs(1)),
            Quota::sliding_window_log(20, secs(60)),
            Quota::sliding_window_log(5, secs(3_600)),
        ]
        .map(valid)
        .to_vec(),
    ]
}

/// Deletes the state in `KEYS[1]` (shape `ARGV[1]`: t, w, s or l) if it is idle at `ARGV[2]`
/// µs, by the rule of `AlgorithmState::idle_at` (a log: its newest entry plus `ARGV[3]`, the
/// window of the quota it was last checked under). Reads the packed values of `state.lua` with a
/// decoder of its own: a bucket's TAT is its first 7 bytes, most significant first; a window's
/// value is a form byte (1: the start counted in lengths, 2: in µs), the start, the length (m × 4
/// + u for m units of µs, ms, s or min) and the counts, each a varint (7 bits a byte, low first).
const DROP_IF_IDLE: &str = r"
local key, shape, now, window = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if shape == 'l' then
  local newest = redis.call('ZRANGE', key, -1, -1)[1]
  if newest and tonumber(string.match(newest, '^(%d+):')) + window <= now then
    redis.call('DEL', key)
  end
  return 0
end
local value = redis.call('GET', key)
if not value then return 0 end
local function varint(at)
  local n, scale = 0, 1
  while true do
    local byte = string.byte(value, at)
    at = at + 1
    if byte < 128 then return n + byte * scale, at end
    n, scale = n + (byte - 128) * scale, scale * 128
  end
end
local n = {}
if shape == 't' then
  n[1] = 0
  for i = 1, 7 do n[1] = n[1] * 256 + string.byte(value, i) end
else
  local start, at = varint(2)
  local code
  code, at = varint(at)
  local length = math.floor(code / 4) * ({1, 1000, 1000000, 60000000})[code % 4 + 1]
  if string.byte(value, 1) == 1 then start = start * length end
  n[1], n[2] = start, length
  while at <= #value do n[#n + 1], at = varint(at) end
end
local idle = 0
if shape == 't' then
  idle = n[1]
elseif shape == 'w' then
  if n[3] > 0 then idle = n[1] + n[2] end
elseif n[4] > 0 then
  idle = n[1] + 2 * n[2]
elseif n[3] > 0 then
  idle = n[1] + n[2]
end
if idle <= now then redis.call('DEL', key) end
return 0
";

/// A connection of the test's own to the store's Redis, to drop idle state.
enum Direct {
    Standalone(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Direct {
    async fn standalone() -> Direct {
        let client = redis::Client::open(common::server().url()).expect("url");
        let connection = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        Direct::Standalone(connection)
    }

    async fn cluster() -> Direct {
        let client = redis::cluster::ClusterClient::new(common::cluster().urls()).expect("urls");
        Direct::Cluster(client.get_async_connection().await.expect("connect"))
    }

    async fn drop_if_idle(&mut self, key: &str, shape: &str, now: u64, window: u64) {
        let script = redis::Script::new(DROP_IF_IDLE);
        let mut invocation = script.key(key);
        invocation.arg(shape).arg(now).arg(window);
        let done: redis::RedisResult<i64> = match self {
            Direct::Standalone(connection) => invocation.invoke_async(connection).await,
            Direct::Cluster(connection) => invocation.invoke_async(connection).await,
        };
        done.expect("the idle probe runs");
    }
}

/// The two stores, side by side, with what each (rule, key) was last checked under.
struct Pair {
    memory: MemoryStore<ManualClock>,
    memory_clock: ManualClock,
    redis: RedisStore,
    redis_clock: ManualClock,
    direct: Direct,
    last_checked: HashMap<(RuleId, Key), Quota>,
}

impl Pair {
    fn new(redis: RedisStore, redis_clock: ManualClock, direct: Direct) -> Pair {
        let memory_clock = ManualClock::new(redis_clock.now());
        Pair {
            memory: MemoryStore::builder().clock(memory_clock.clone()).build(),
            memory_clock,
            redis,
            redis_clock,
            direct,
            last_checked: HashMap::new(),
        }
    }

    fn advance(&self, micros: u64) {
        self.memory_clock.advance(Duration::from_micros(micros));
        self.redis_clock.advance(Duration::from_micros(micros));
    }

    /// Drops every idle state in both stores, then steps both clocks back.
    async fn rewind(&mut self, micros: u64) {
        self.drop_idle().await;
        self.memory_clock.rewind(Duration::from_micros(micros));
        self.redis_clock.rewind(Duration::from_micros(micros));
    }

    /// Drops every state that is idle now, in both stores (see the module docs).
    async fn drop_idle(&mut self) {
        self.memory.sweep();
        let now = self.redis_clock.now().as_micros();
        for ((rule, key), quota) in &self.last_checked {
            for (algorithm, shape) in [
                (Algorithm::TokenBucket, "t"),
                (Algorithm::FixedWindow, "w"),
                (Algorithm::SlidingWindowCounter, "s"),
                (Algorithm::SlidingWindowLog, "l"),
            ] {
                let name = self.redis.stored_key(rule, key, algorithm).expect("known");
                let window = quota.interval_micros();
                self.direct.drop_if_idle(&name, shape, now, window).await;
            }
        }
    }

    /// Drops idle state first if any item reads its state under another quota than it was
    /// last checked under (see the module docs).
    async fn align(&mut self, items: &[Item<'_>]) {
        let changed = items.iter().any(|item| {
            let at = (item.rule().clone(), item.key().clone());
            self.last_checked
                .get(&at)
                .is_some_and(|last| last != item.quota())
        });
        if changed {
            self.drop_idle().await;
        }
    }

    /// Records the quotas a check evaluated: every enforcing item, and the shadow items of a
    /// request that goes ahead (or of a request of one item), in that order.
    fn note_checked(&mut self, items: &[Item<'_>], allowed: bool) {
        let enforcing = items.iter().filter(|item| item.is_enforcing());
        let shadow = items.iter().filter(|item| !item.is_enforcing());
        let shadow_evaluated = allowed || items.len() == 1;
        for item in enforcing.chain(shadow.filter(|_| shadow_evaluated)) {
            let at = (item.rule().clone(), item.key().clone());
            self.last_checked.insert(at, *item.quota());
        }
    }

    /// Checks `items` in both stores, compares, and answers the receipts (memory's, Redis's).
    async fn check(&mut self, items: &[Item<'_>], context: &str) -> Vec<(Receipt, Receipt)> {
        self.align(items).await;
        let m = self.memory.check(items).await.expect("memory answers");
        let r = self.redis.check(items).await.expect("redis answers");
        assert_eq!(m, r, "{context}: check {items:#?}");
        self.note_checked(items, m.is_allowed());
        m.into_receipts(items)
            .into_iter()
            .zip(r.into_receipts(items))
            .collect()
    }

    async fn peek(&mut self, item: &Item<'_>, context: &str) {
        self.align(std::slice::from_ref(item)).await;
        let m = self.memory.peek(item).await.expect("memory");
        let r = self.redis.peek(item).await.expect("redis");
        assert_eq!(m, r, "{context}: peek {item:?}");
    }

    /// Refunds a receipt in both stores; `first` when it is not a replay.
    ///
    /// A sliding counter's refund into the previous window once that window has slid out
    /// entirely (its charge no longer matters) is not sent: the memory store still takes it
    /// out of the previous count, where it weighs again only if the clock then steps back into
    /// the current window before the next check; Redis gives nothing, as for every charge that
    /// no longer matters.
    async fn refund(&self, (m, r): (Receipt, Receipt), first: bool) {
        let now = self.redis_clock.now();
        if first
            && r.quota().algorithm() == Algorithm::SlidingWindowCounter
            && !still_matters(&r, now)
        {
            return;
        }
        self.memory.refund(m).await.expect("memory refunds");
        self.redis.refund(r).await.expect("redis refunds");
    }
}

/// Whether the charge `receipt` describes can still matter at `now`, by the rule the script
/// sets a refund's marker by (see the crate docs). A refund that arrives later gives nothing and
/// leaves no marker; if the clock then steps back far enough for the charge to matter again, a
/// replay of it gives back once (the memory store, which remembers every spent receipt, gives
/// nothing): never twice, but not the memory store's answer, so such receipts are not replayed.
fn still_matters(receipt: &Receipt, now: tollgate_core::Timestamp) -> bool {
    let length = receipt.quota().interval_micros();
    let end = match *receipt.charge() {
        Charge::Scheduled { until, .. } => until.as_micros(),
        Charge::Window { start, .. } if receipt.quota().algorithm() == Algorithm::FixedWindow => {
            start.as_micros() + length
        }
        Charge::Window { start, .. } => start.as_micros() + 2 * length,
        Charge::Logged { at, .. } => at.as_micros() + length,
        _ => 0,
    };
    end > now.as_micros()
}

/// Runs one random sequence against both stores and compares every answer; a key's quota
/// switches among `quotas` now and then.
fn compare(quotas: &[Quota], seed: u64) {
    compare_from(quotas, seed, START, 300);
}

/// [`compare`] for `steps` steps from `start`, the clock never passing the end of the
/// supported range ([`Timestamp::MAX_SUPPORTED`]).
fn compare_from(quotas: &[Quota], seed: u64, start: Timestamp, steps: u64) {
    let rule = RuleId::new("differential").expect("id");
    let keys = [Key::new("a"), Key::new("b")];
    let mut random = Sequence(seed);
    let mut receipts = Vec::new();
    let mut replays = Vec::new();
    let mut current = [0usize; 2];
    common::block_on(async {
        let clock = ManualClock::new(start);
        let redis = common::standalone_store(clock.clone());
        let mut pair = Pair::new(redis, clock, Direct::standalone().await);
        for step in 0..steps {
            let k = random.next(2) as usize;
            let key = &keys[k];
            let quota = quotas[current[k]];
            let context = format!("{quota:?} seed {seed} step {step}");
            let big = quota.limit() > 1_000_000;
            let cost = match random.next(10) {
                0 => 0,
                1 if big => random.next(quota.limit()),
                1 => random.next(quota.limit() + 2),
                _ if big => random.next(1 << 39) + 1,
                _ => 1 + random.next(3),
            };
            let item = Item::new(&rule, quota, key).with_cost(cost);
            match random.next(100) {
                0..5 if quotas.len() > 1 => {
                    current[k] = random.next(quotas.len() as u64) as usize;
                }
                5..8 => pair.rewind(random.next(HOUR_MICROS + 1)).await,
                8..18 if !receipts.is_empty() => {
                    let at = random.next(receipts.len() as u64) as usize;
                    let (m, r): (Receipt, Receipt) = receipts.swap_remove(at);
                    if random.next(3) == 0 && still_matters(&r, pair.redis_clock.now()) {
                        replays.push((replay(&m), replay(&r)));
                    }
                    pair.refund((m, r), true).await;
                }
                18..21 if !replays.is_empty() => {
                    let at = random.next(replays.len() as u64) as usize;
                    pair.refund(replays.swap_remove(at), false).await;
                }
                21..31 => pair.peek(&item, &context).await,
                _ => receipts.extend(pair.check(&[item], &context).await),
            }
            let span = quotas[current[k]]
                .interval_micros()
                .saturating_mul(3)
                .max(1);
            let advance = match random.next(4) {
                0 => 0,
                1 => random.next(1_000),
                _ => random.next(span),
            };
            let left = Timestamp::MAX_SUPPORTED.as_micros() - pair.redis_clock.now().as_micros();
            pair.advance(advance.min(left));
        }
    });
}

#[test]
fn random_sequences_decide_exactly_like_the_memory_store() {
    for (family, quotas) in families().into_iter().enumerate() {
        for (index, quota) in quotas.into_iter().enumerate() {
            for seed in 0..3 {
                compare(&[quota], seed * 1_000 + (family * 10 + index) as u64);
            }
        }
    }
}

/// Across the whole supported clock range, up to its last microsecond, with every quota of
/// every family (spans up to a year, and limits up to 2^40): the same answers, and no state
/// either store cannot read back.
#[test]
fn random_sequences_agree_across_the_whole_supported_clock_range() {
    let end = Timestamp::MAX_SUPPORTED.as_micros();
    let mut starts = Sequence(7);
    for (family, quotas) in families().into_iter().enumerate() {
        for seed in 0..4 {
            let start = match seed {
                0 => end,
                1 => end - HOUR_MICROS,
                _ => starts.next(end),
            };
            let seed = 50_000 + (family as u64) * 10 + seed;
            compare_from(&quotas, seed, Timestamp::from_micros(start), 60);
        }
    }
}

#[test]
fn random_sequences_with_quota_changes_decide_exactly_like_the_memory_store() {
    for (family, quotas) in families().into_iter().enumerate() {
        for seed in 0..8 {
            compare(&quotas, 50_000 + seed * 100 + family as u64);
        }
    }
}

/// Rules of every algorithm, each with the quotas its items switch among (token bucket and
/// pacing share a state, so two rules switch between them).
fn batch_rules() -> Vec<(RuleId, Vec<Quota>)> {
    let minute = secs(60);
    let valid = |quota: Result<Quota, _>| quota.expect("valid");
    let rules = [
        (
            "bucket",
            vec![
                Quota::token_bucket(4, Rate::per_second(1)),
                Quota::gcra(Rate::per_second(2), 3),
                Quota::leaky_bucket(Rate::per_second(2), secs(2)),
            ],
        ),
        (
            "window",
            vec![
                Quota::fixed_window(5, minute),
                Quota::fixed_window(3, secs(10)),
            ],
        ),
        (
            "counter",
            vec![
                Quota::sliding_window_counter(6, minute),
                Quota::sliding_window_counter(4, secs(7)),
            ],
        ),
        (
            "log",
            vec![
                Quota::sliding_window_log(4, secs(5)),
                Quota::sliding_window_log(6, secs(20)),
            ],
        ),
        (
            "pace",
            vec![
                Quota::leaky_bucket(Rate::per_second(2), secs(2)),
                Quota::leaky_bucket(Rate::per_second(4), secs(1)),
                Quota::token_bucket(3, Rate::per_second(1)),
            ],
        ),
    ];
    rules
        .into_iter()
        .map(|(id, quotas)| {
            let quotas = quotas.into_iter().map(valid).collect();
            (RuleId::new(id).expect("id"), quotas)
        })
        .collect()
}

/// Random batches of one to four items — several rules, repeated keys, the same rule and key
/// twice (now and then under two quotas), shadow items, pacing together — with the clock now
/// and then stepping back, answered identically by both stores.
fn compare_batches(mut pair: Pair, seed: u64) {
    let rules = batch_rules();
    let keys = [Key::new("a"), Key::new("b")];
    let mut random = Sequence(seed);
    // The quota each (rule, key) is on, as indexes.
    let mut current: HashMap<(usize, usize), usize> = HashMap::new();
    let mut receipts = Vec::new();
    common::block_on(async {
        for step in 0..200 {
            let size = 1 + random.next(4) as usize;
            let picks: Vec<(usize, usize, usize)> = (0..size)
                .map(|_| {
                    let rule = random.next(rules.len() as u64) as usize;
                    let key = random.next(2) as usize;
                    let on = current.entry((rule, key)).or_insert(0);
                    if random.next(12) == 0 {
                        *on = random.next(rules[rule].1.len() as u64) as usize;
                    }
                    // Now and then one item of a batch on another quota than the rest.
                    let quota = if random.next(25) == 0 {
                        random.next(rules[rule].1.len() as u64) as usize
                    } else {
                        *on
                    };
                    (rule, key, quota)
                })
                .collect();
            let items: Vec<Item<'_>> = picks
                .iter()
                .map(|&(rule, key, quota)| {
                    let mode = if random.next(5) == 0 {
                        Mode::Shadow
                    } else {
                        Mode::Enforce
                    };
                    Item::new(&rules[rule].0, rules[rule].1[quota], &keys[key])
                        .with_cost(random.next(3))
                        .with_mode(mode)
                })
                .collect();
            match random.next(10) {
                0 if !receipts.is_empty() => {
                    let at = random.next(receipts.len() as u64) as usize;
                    pair.refund(receipts.swap_remove(at), true).await;
                }
                _ => {
                    let context = format!("seed {seed} step {step}");
                    receipts.extend(pair.check(&items, &context).await);
                }
            }
            if random.next(30) == 0 {
                pair.rewind(random.next(HOUR_MICROS + 1)).await;
            }
            let advance = match random.next(20) {
                0 => random.next(60_000_000),
                _ => random.next(1_500_000),
            };
            pair.advance(advance);
        }
    });
}

#[test]
fn random_batches_decide_exactly_like_the_memory_store_on_one_server() {
    for seed in 0..6 {
        let clock = ManualClock::new(START);
        let redis = common::standalone_store(clock.clone());
        let direct = common::block_on(Direct::standalone());
        compare_batches(Pair::new(redis, clock, direct), seed);
    }
}

#[test]
fn random_batches_decide_exactly_like_the_memory_store_on_a_cluster() {
    for seed in 0..6 {
        let clock = ManualClock::new(START);
        let redis = common::cluster_store(clock.clone());
        let direct = common::block_on(Direct::cluster());
        compare_batches(Pair::new(redis, clock, direct), 100 + seed);
    }
}
