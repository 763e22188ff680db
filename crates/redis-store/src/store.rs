//! [`RedisStore`]: the Store contract on Redis and Redis Cluster.

use std::sync::Arc;

use smallvec::SmallVec;
#[cfg(feature = "testing")]
use tollgate_core::Clock;
use tollgate_core::{
    BatchDecision, Decision, Item, ItemDecision, Key, Receipt, RuleId, Store, StoreError,
    StoreErrorKind,
};

use crate::error::store_error;
use crate::layout::{KeyLayout, StateFormat, StoredKey};
use crate::script::{self, Answer, KeyArgs, Operation, Timing};
use crate::split::{self, SlotGroups};
use crate::{RedisConnection, RedisStoreBuilder};
use redis::ScriptInvocation;

/// Extra key lifetime when tests pass "now" in: an hour, far longer than any test.
#[cfg(feature = "testing")]
const TEST_KEY_SLACK_MS: u64 = 3_600_000;

/// The shared count on Redis or Redis Cluster.
///
/// * **Atomic, one round trip**: a request's items go to one Lua script execution (`EVALSHA`)
///   that decides all-or-nothing. On a cluster, items are grouped by hash slot (one execution
///   per slot); if any group refuses or fails, the groups that charged are refunded by receipt
///   — never a group whose answer was lost, which may or may not have run.
/// * **The server's clock**: the script reads `TIME` itself; gateways never send time, so
///   their clocks may disagree. A `TIME` that steps back grants nothing.
/// * **Exact**: the script computes on whole µs with the same integer formulas as
///   `tollgate_core::algorithm`, so it passes the same conformance suite as the in-memory
///   store.
/// * **Compact, self-expiring keys** (see the crate docs for the layout): each key expires once
///   dropping it loses nothing.
///
/// A store error is never a refusal: wrap the store in `tollgate_core::FallbackStore` to give
/// every call a deadline and each rule its planned behaviour when Redis is down. Cloning is
/// cheap; clones share the connection.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tollgate_core::{Item, Key, Quota, Rate, RuleId, Store};
/// use tollgate_redis::RedisStore;
///
/// let store = RedisStore::connect("redis://127.0.0.1:6379/").await?;
/// let rule = RuleId::new("follows")?;
/// let key = Key::new("account-4821");
/// let quota = Quota::fixed_window(400, std::time::Duration::from_secs(86_400))?;
/// let decision = store.check(&[Item::new(&rule, quota, &key)]).await?;
/// assert!(decision.is_allowed());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) connection: RedisConnection,
    pub(crate) layout: KeyLayout,
    pub(crate) time: TimeSource,
}

/// Where the script's "now" comes from.
#[derive(Clone)]
pub(crate) enum TimeSource {
    /// Redis `TIME`, read inside the script.
    Server,
    /// A clock whose "now" is passed to the script (tests only).
    #[cfg(feature = "testing")]
    Client(Arc<dyn Clock>),
}

impl std::fmt::Debug for TimeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeSource::Server => f.write_str("Server"),
            #[cfg(feature = "testing")]
            TimeSource::Client(_) => f.write_str("Client"),
        }
    }
}

impl RedisStore {
    /// A builder (prefix, deadlines, and in tests a clock).
    pub fn builder() -> RedisStoreBuilder {
        RedisStoreBuilder::default()
    }

    /// Connects to one Redis server with default settings.
    pub async fn connect(url: &str) -> Result<RedisStore, crate::ConnectError> {
        RedisStore::builder().connect(url).await
    }

    /// The connection, to build other stores on it.
    pub fn connection(&self) -> &RedisConnection {
        &self.inner.connection
    }

    /// The Lua script every operation runs (for tools such as `redis-benchmark`).
    pub fn script_source() -> &'static str {
        script::source()
    }

    /// The script's SHA-1, as `EVALSHA` names it.
    pub fn script_sha() -> &'static str {
        script::sha()
    }

    /// The stored key that holds `rule`'s state for `key` under `quota`'s algorithm, for
    /// inspection (`MEMORY USAGE`, `TTL`) and tests. `None` for an algorithm this store does
    /// not know.
    pub fn stored_key(
        &self,
        rule: &RuleId,
        key: &Key,
        algorithm: tollgate_core::Algorithm,
    ) -> Option<String> {
        let format = StateFormat::of(algorithm)?;
        Some(self.inner.layout.key(format, rule, key).name)
    }

    /// The cluster slot a rule's state for a key lives in.
    pub fn slot(&self, rule: &RuleId, key: &Key) -> u16 {
        self.inner
            .layout
            .key(StateFormat::Timestamp, rule, key)
            .slot
    }

    fn timing(&self) -> Timing {
        match &self.inner.time {
            TimeSource::Server => Timing {
                now: None,
                slack_ms: 0,
                not_before: 0,
            },
            #[cfg(feature = "testing")]
            TimeSource::Client(clock) => Timing {
                now: Some(clock.now()),
                slack_ms: TEST_KEY_SLACK_MS,
                not_before: 0,
            },
        }
    }

    fn stored(&self, item: &Item<'_>) -> Result<StoredKey, StoreError> {
        let algorithm = item.quota().algorithm();
        let format = StateFormat::of(algorithm).ok_or_else(|| script::unsupported(algorithm))?;
        Ok(self.inner.layout.key(format, item.rule(), item.key()))
    }

    /// Runs one script execution and reads its integer answer.
    async fn execute(&self, call: &ScriptInvocation<'_>) -> Result<Vec<i64>, StoreError> {
        self.inner
            .connection
            .invoke(call)
            .await
            .map_err(|error| store_error(&error))
    }

    /// Runs `operation` (check or start) over the items at `positions`, in one execution.
    async fn execute_items(
        &self,
        operation: Operation,
        items: &[Item<'_>],
        keys: &[StoredKey],
        positions: &[usize],
        timing: Timing,
    ) -> Result<Vec<i64>, StoreError> {
        let call = script::invocation(
            operation,
            timing,
            positions.iter().map(|&at| KeyArgs {
                key: &keys[at].name,
                quota: items[at].quota(),
                extra: [items[at].cost(), u64::from(items[at].is_enforcing()), 0],
            }),
        )?;
        self.execute(&call).await
    }

    /// Checks the items at `positions` in one script execution.
    async fn check_group(
        &self,
        items: &[Item<'_>],
        keys: &[StoredKey],
        positions: &[usize],
        timing: Timing,
    ) -> Result<Answer, StoreError> {
        let reply = self
            .execute_items(Operation::Check, items, keys, positions, timing)
            .await?;
        script::decode(&reply, positions.len())
    }

    /// Takes back the charges of the items at the given positions, in one script execution;
    /// answers each one's state afterwards.
    async fn refund_group(
        &self,
        items: &[Item<'_>],
        keys: &[StoredKey],
        charged: &[(usize, tollgate_core::Charge)],
        timing: Timing,
    ) -> Result<Answer, StoreError> {
        let call = script::invocation(
            Operation::Refund,
            timing,
            charged.iter().map(|(at, charge)| KeyArgs {
                key: &keys[*at].name,
                quota: items[*at].quota(),
                extra: script::charge_args(charge),
            }),
        )?;
        let reply = self.execute(&call).await?;
        script::decode(&reply, charged.len())
    }

    /// The latest earliest start of the enforcing pacing items at `positions`.
    async fn pacing_start(
        &self,
        items: &[Item<'_>],
        keys: &[StoredKey],
        positions: &[usize],
        timing: Timing,
    ) -> Result<u64, StoreError> {
        let reply = self
            .execute_items(Operation::Start, items, keys, positions, timing)
            .await?;
        reply
            .first()
            .and_then(|start| u64::try_from(*start).ok())
            .ok_or_else(|| StoreError::new(StoreErrorKind::Protocol, "no pacing start"))
    }

    /// Pacing items in several slots must start together: read each slot's earliest start
    /// first (one more round trip, only for such batches) and pass the latest to every slot.
    /// A concurrent request may move a slot in between; its item then starts later, and the
    /// request still waits for the longest delay.
    async fn align_pacing(
        &self,
        items: &[Item<'_>],
        keys: &[StoredKey],
        groups: &SlotGroups,
        timing: Timing,
    ) -> Result<Timing, StoreError> {
        let paces = |positions: &&SmallVec<[usize; 3]>| {
            positions.iter().any(|&at| {
                let item = &items[at];
                item.is_enforcing()
                    && item.cost() > 0
                    && item.quota().algorithm() == tollgate_core::Algorithm::LeakyBucket
            })
        };
        let pacing: SmallVec<[&SmallVec<[usize; 3]>; 2]> = groups.iter().filter(paces).collect();
        if pacing.len() < 2 {
            return Ok(timing);
        }
        let starts = futures_util::future::join_all(
            pacing
                .iter()
                .map(|positions| self.pacing_start(items, keys, positions, timing)),
        )
        .await;
        let mut latest = 0;
        for start in starts {
            latest = latest.max(start?);
        }
        Ok(Timing {
            not_before: latest,
            ..timing
        })
    }

    /// A batch whose items live in several slots: one execution per slot, side by side, then
    /// all-or-nothing by compensation.
    async fn check_split(
        &self,
        items: &[Item<'_>],
        keys: &[StoredKey],
        groups: SlotGroups,
        timing: Timing,
    ) -> Result<BatchDecision, StoreError> {
        let timing = self.align_pacing(items, keys, &groups, timing).await?;
        let answers = futures_util::future::join_all(
            groups
                .iter()
                .map(|positions| self.check_group(items, keys, positions, timing)),
        )
        .await;
        let go_ahead = answers
            .iter()
            .all(|answer| answer.as_ref().is_ok_and(|answer| answer.allowed));
        let mut merged: SmallVec<[Option<ItemDecision>; 3]> =
            SmallVec::from_elem(None, items.len());
        let mut failure = None;
        for (positions, answer) in groups.iter().zip(answers) {
            let answer = match answer {
                Ok(answer) => answer,
                Err(error) => {
                    failure.get_or_insert(error);
                    continue;
                }
            };
            let mut answer = answer;
            if !go_ahead && answer.allowed {
                // This group charged but the request will not go ahead: take its charges back.
                let charged: SmallVec<[_; 3]> = positions
                    .iter()
                    .zip(&answer.items)
                    .filter_map(|(&at, item)| item.charge().map(|charge| (at, *charge)))
                    .collect();
                for item in &mut answer.items {
                    *item = ItemDecision::new(*item.decision(), None);
                }
                if !charged.is_empty() {
                    match self.refund_group(items, keys, &charged, timing).await {
                        // Report the refunded items as they now stand, like a single slot.
                        Ok(after) => {
                            for ((at, _), item) in charged.iter().zip(after.items) {
                                if let Some(slot) = positions.iter().position(|p| p == at) {
                                    answer.items[slot] = item;
                                }
                            }
                        }
                        Err(error) => tracing::warn!(
                            target: "tollgate::store",
                            %error,
                            "could not refund a slot group of a refused cross-slot batch"
                        ),
                    }
                }
            }
            for (&at, item) in positions.iter().zip(answer.items) {
                merged[at] = Some(item);
            }
        }
        if let Some(error) = failure {
            return Err(error);
        }
        let decisions = merged.into_iter().map(|item| {
            item.ok_or_else(|| {
                StoreError::new(StoreErrorKind::Protocol, "a slot group answered no item")
            })
        });
        let decisions: Result<SmallVec<[ItemDecision; 3]>, StoreError> = decisions.collect();
        Ok(BatchDecision::new(go_ahead, decisions?))
    }
}

impl Store for RedisStore {
    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        if items.is_empty() {
            return Ok(BatchDecision::new(true, []));
        }
        let keys: SmallVec<[StoredKey; 3]> = items
            .iter()
            .map(|item| self.stored(item))
            .collect::<Result<_, _>>()?;
        let timing = self.timing();
        let groups = split::by_slot(&keys, self.inner.connection.is_cluster());
        if groups.len() == 1 {
            let answer = self.check_group(items, &keys, &groups[0], timing).await?;
            return Ok(BatchDecision::new(answer.allowed, answer.items));
        }
        self.check_split(items, &keys, groups, timing).await
    }

    async fn check_one(&self, item: &Item<'_>) -> Result<ItemDecision, StoreError> {
        let keys = [self.stored(item)?];
        let answer = self
            .check_group(std::slice::from_ref(item), &keys, &[0], self.timing())
            .await?;
        answer.items.into_iter().next().ok_or_else(|| {
            StoreError::new(
                StoreErrorKind::Protocol,
                "the redis script answered no item",
            )
        })
    }

    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        let stored = self.stored(item)?;
        let call = script::invocation(
            Operation::Peek,
            self.timing(),
            [KeyArgs {
                key: &stored.name,
                quota: item.quota(),
                extra: [item.cost(), 1, 0],
            }],
        )?;
        let reply = self.execute(&call).await?;
        let answer = script::decode(&reply, 1)?;
        answer
            .items
            .first()
            .map(|item| *item.decision())
            .ok_or_else(|| StoreError::new(StoreErrorKind::Protocol, "peek answered no item"))
    }

    async fn refund(&self, receipt: &Receipt) -> Result<(), StoreError> {
        let item = Item::new(receipt.rule(), *receipt.quota(), receipt.key());
        let keys = [self.stored(&item)?];
        self.refund_group(
            std::slice::from_ref(&item),
            &keys,
            &[(0, *receipt.charge())],
            self.timing(),
        )
        .await
        .map(drop)
    }

    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        let mut command = redis::cmd("DEL");
        for format in StateFormat::ALL {
            command.arg(self.inner.layout.key(format, rule, key).name);
        }
        self.inner
            .connection
            .query::<i64>(&command)
            .await
            .map(drop)
            .map_err(|error| store_error(&error))
    }
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("connection", &self.inner.connection)
            .field("layout", &self.inner.layout)
            .field("time", &self.inner.time)
            .finish()
    }
}
