//! What is checked: one rule, one quota, and either one hot key or many keys — as tollgate
//! items, and as the very same `EVALSHA` for `redis-benchmark`.

use std::sync::Arc;

use tollgate_core::{Algorithm, Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::RedisStore;

/// The rule every check belongs to.
const RULE: &str = "bench";

/// The hot key's caller number.
const HOT_CALLER: usize = 42;

/// `redis-benchmark` replaces this with 12 random digits (with `-r N`: 0 to N-1, zero-padded),
/// so `"user" + RANDOM` has the length of every caller key below: the stored keys
/// `redis-benchmark` writes are the ones tollgate writes.
const RANDOM: &str = "__rand_int__";

/// Which keys a workload checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keys {
    /// Every check on one key.
    Hot,
    /// Each check on a key drawn at random from this many.
    Many(usize),
}

/// One rule's checks, ready to run through tollgate or `redis-benchmark`.
pub(crate) struct Workload {
    keys: Keys,
    rule: RuleId,
    quota: Quota,
    callers: Vec<Key>,
}

impl Workload {
    /// The workload; builds every caller key up front, so the timed loop only picks one.
    pub(crate) fn new(keys: Keys) -> Arc<Workload> {
        let callers = match keys {
            Keys::Hot => vec![Key::new(caller(HOT_CALLER))],
            Keys::Many(count) => (0..count).map(|i| Key::new(caller(i))).collect(),
        };
        Arc::new(Workload {
            keys,
            rule: RuleId::new(RULE).expect("a valid rule id"),
            quota: quota(),
            callers,
        })
    }

    /// Its name in the tables.
    pub(crate) fn name(&self) -> String {
        match self.keys {
            Keys::Hot => "hot key".to_owned(),
            Keys::Many(count) => format!("{count} keys"),
        }
    }

    /// The item for the `pick`-th random number (any `u64`).
    pub(crate) fn item(&self, pick: u64) -> Item<'_> {
        // The remainder is below the number of callers, which is a `usize`.
        let at = (pick % self.callers.len() as u64) as usize;
        Item::new(&self.rule, self.quota, &self.callers[at])
    }

    /// Clears the hot key's state (a many-keys workload spreads its checks too thin to
    /// exhaust any key, and keeps its state).
    pub(crate) async fn reset(&self, store: &RedisStore) {
        if self.keys == Keys::Hot {
            store
                .reset(&self.rule, &self.callers[0])
                .await
                .unwrap_or_else(|error| panic!("could not reset the hot key: {error}"));
        }
    }

    /// The stored key the random number `pick` selects (as [`item`](Self::item) does).
    pub(crate) fn stored_key(&self, store: &RedisStore, pick: u64) -> String {
        let item = self.item(pick);
        stored(store, &self.rule, item.key())
    }

    /// `EVALSHA`'s arguments for `key`: those `store.check_one` sends, argument for argument
    /// (see `src/lua/main.lua` and `src/script.rs`): the script's SHA, one key, operation
    /// `check`, `''` for the server's clock, no key-lifetime slack, no pacing constraint, then
    /// kind `g` (token bucket), limit, interval µs, span µs, cost 1, enforcing 1, 0, 0.
    pub(crate) fn eval_args(&self, key: &str) -> Vec<String> {
        let quota = &self.quota;
        let (limit, interval, span) = (quota.limit(), quota.interval_micros(), quota.span_micros());
        let sha = RedisStore::script_sha();
        [sha, "1", key, "check", "", "0", "0", "g"]
            .iter()
            .map(|arg| (*arg).to_owned())
            .chain(
                [limit, interval, span, 1, 1, 0, 0]
                    .iter()
                    .map(u64::to_string),
            )
            .collect()
    }

    /// `redis-benchmark`'s arguments after its options: `-r N` for many keys, then
    /// `EVALSHA` and its [arguments](Self::eval_args), on a key name in which
    /// `redis-benchmark` writes the random digits.
    ///
    /// # Panics
    ///
    /// If the random key template does not name the keys tollgate checks (a layout change
    /// that needs this bench updated).
    pub(crate) fn benchmark_args(&self, store: &RedisStore) -> Vec<String> {
        let mut args = Vec::new();
        let key = match self.keys {
            Keys::Hot => stored(store, &self.rule, &self.callers[0]),
            Keys::Many(count) => {
                let template = stored(store, &self.rule, &Key::new(format!("user{RANDOM}")));
                assert_eq!(
                    template.replace(RANDOM, &format!("{:012}", count - 1)),
                    stored(store, &self.rule, &Key::new(caller(count - 1))),
                    "redis-benchmark's random keys must be tollgate's keys"
                );
                args.extend(["-r".to_owned(), count.to_string()]);
                template
            }
        };
        args.push("EVALSHA".to_owned());
        args.extend(self.eval_args(&key));
        args
    }
}

/// The stored key of the token bucket `rule` keeps for `caller`.
fn stored(store: &RedisStore, rule: &RuleId, caller: &Key) -> String {
    store
        .stored_key(rule, caller, Algorithm::TokenBucket)
        .expect("the redis store knows the token bucket")
}

/// The `i`-th caller of the many-keys workload: `user` and 12 digits, like `redis-benchmark`'s.
fn caller(i: usize) -> String {
    format!("user{i:012}")
}

/// A token bucket that allows every check of a run and is charged by each: 50 million tokens,
/// one back a minute. Every check writes its key (the theoretical arrival time moves a minute
/// on, so the key lives a minute longer). A caller of the many-keys workload is checked every
/// few seconds, so once warmed up nearly every check finds its key, as a busy gateway's would;
/// the hot key is [reset](Workload::reset) before each run, so no run can exhaust it.
fn quota() -> Quota {
    Quota::token_bucket(50_000_000, Rate::per_minute(1)).expect("a valid quota")
}
