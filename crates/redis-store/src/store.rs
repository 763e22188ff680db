//! [`RedisStore`]: the Store contract on Redis and Redis Cluster.

use std::sync::Arc;

#[cfg(feature = "testing")]
use tollgate_core::Clock;
use tollgate_core::{
    Algorithm, BatchDecision, Charge, Decision, Item, ItemDecision, Key, Quota, Receipt,
    RefundError, RuleId, Store, StoreError, StoreErrorKind, Take,
};

use crate::error::store_error;
use crate::layout::{self, KeyLayout, StateFormat};
use crate::script::{self, Answer, KeyArgs, Operation, ScriptCall, Timing};
use crate::split;
use crate::{RedisConnection, RedisStoreBuilder};

/// Extra key lifetime when tests pass "now" in: an hour, far longer than any test.
#[cfg(feature = "testing")]
const TEST_KEY_SLACK_MS: u64 = 3_600_000;

/// The shared count on Redis or Redis Cluster.
///
/// * **Atomic, one round trip**: a request's items go to one Lua script execution (`EVALSHA`)
///   that decides all-or-nothing. On a cluster, items are grouped by hash slot (one execution
///   per slot); if any group refuses, the request is refused and the groups that charged take
///   those charges back — never a group whose answer was lost, which may or may not have run,
///   and no call is ever sent twice.
/// * **The server's clock**: the script reads `TIME` itself; gateways never send time, so
///   their clocks may disagree. A `TIME` that steps back grants nothing.
/// * **Exact**: the script computes on whole µs with the same integer formulas as
///   `tollgate_core::algorithm`, so it passes the same conformance suite as the in-memory
///   store.
/// * **Compact, self-expiring keys** (see the crate docs for the layout): each key expires once
///   dropping it loses nothing.
/// * **State that outlives its quota**: each state records the emission interval or window it
///   was written under and is read in the terms of the quota on the item, as
///   `tollgate_core::algorithm` describes.
/// * **Refunds that happen once**: a refund sets a marker for its receipt, and a retried refund
///   (after a lost answer) finds it and gives nothing more.
///
/// A store error is never a refusal: wrap the store in `tollgate_wrappers::FallbackStore` to give
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
    /// The server clock's offset, learned from each answer: turns a caller's deadline into
    /// the server's time.
    pub(crate) server_clock: crate::server_clock::ServerClock,
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
        Some(self.inner.layout.key(format, rule, key))
    }

    /// The key that marks receipt `id` (see [`Receipt::id`]) of `rule`'s charge to `key` as
    /// refunded, for inspection and tests. It shares the state's hash tag (and so its slot),
    /// and lives for as long as the charge could matter.
    pub fn refund_marker_key(&self, rule: &RuleId, key: &Key, id: u64) -> String {
        self.inner.layout.marker(rule, key, id)
    }

    /// The cluster slot a rule's state for a key lives in.
    pub fn slot(&self, rule: &RuleId, key: &Key) -> u16 {
        layout::slot_of(&self.inner.layout.key(StateFormat::Timestamp, rule, key))
    }

    fn timing(&self) -> Timing {
        match &self.inner.time {
            TimeSource::Server => Timing {
                now: None,
                slack_ms: 0,
                not_before: 0,
                deadline: self.deadline().unwrap_or(0),
                waited_until: self.local_deadline(),
            },
            #[cfg(feature = "testing")]
            TimeSource::Client(clock) => Timing {
                now: Some(clock.now()),
                slack_ms: TEST_KEY_SLACK_MS,
                not_before: 0,
                deadline: 0,
                waited_until: self.local_deadline(),
            },
        }
    }

    /// [`timing`](Self::timing) for a call that charges. On the server's clock, a store that
    /// has had no answer yet first asks the server its `TIME` (once; every answer after teaches
    /// the clock), so its first scripts carry a deadline too: a gateway just started whose
    /// checks stall behind a stopped server is not charged for them once it wakes. Should that
    /// `TIME` itself stall, the caller stops waiting before any script was sent.
    async fn charging_timing(&self) -> Timing {
        let timing = self.timing();
        if timing.deadline != 0 || !matches!(self.inner.time, TimeSource::Server) {
            return timing;
        }
        let asked = self
            .inner
            .connection
            .query::<(i64, i64)>(&redis::cmd("TIME"))
            .await;
        if let Ok((seconds, micros)) = asked {
            let now = seconds.saturating_mul(1_000_000).saturating_add(micros);
            self.inner
                .server_clock
                .observe(now, std::time::Instant::now());
        }
        self.timing()
    }

    /// When the script must have started to charge, on the server's clock: the caller's
    /// deadline ([`call_deadline`](tollgate_core::store_kit::call_deadline), a `FallbackStore`'s
    /// timeout), or the connection's response timeout if sooner, after which nothing waits for
    /// the answer. `None` until an answer (or [`charging_timing`](Self::charging_timing)'s
    /// `TIME`) has taught the server's clock.
    fn deadline(&self) -> Option<u64> {
        self.inner.server_clock.server_time(self.local_deadline())
    }

    /// When the caller stops waiting for a call starting now, on this gateway's clock: its own
    /// deadline, or the connection's response timeout if sooner.
    fn local_deadline(&self) -> std::time::Instant {
        let waited = std::time::Instant::now() + self.inner.connection.response_timeout();
        tollgate_core::store_kit::call_deadline().map_or(waited, |caller| caller.min(waited))
    }

    /// What the script needs of `item`: its stored key and slot, quota, cost and mode.
    fn plan(&self, item: &Item<'_>) -> Result<Planned, StoreError> {
        let algorithm = item.quota().algorithm();
        let format = StateFormat::of(algorithm).ok_or_else(|| script::unsupported(algorithm))?;
        Ok(Planned {
            key: self.inner.layout.key(format, item.rule(), item.key()),
            quota: *item.quota(),
            cost: item.cost(),
            enforcing: item.is_enforcing(),
            read_only: item.is_read_only(),
            take: item.take(),
            debt_key: (item.take() != Take::Exact)
                .then(|| self.inner.layout.debt(item.rule(), item.key())),
            replica_ack: item.fleet_modes().replica_ack(),
            hold: if algorithm == tollgate_core::Algorithm::Concurrency {
                crate::holds::fresh_hold_id()
            } else {
                0
            },
        })
    }

    /// Runs one script execution and reads its integer answer.
    async fn execute(&self, call: &ScriptCall) -> Result<Vec<i64>, StoreError> {
        let reply = self
            .inner
            .connection
            .invoke(call)
            .await
            .map_err(|error| self.failed(&error))?;
        Ok(self.learn_from(reply))
    }

    /// `error` as a store error; a call the script declined as late still teaches the server's
    /// clock (its "now" leads the message), so an offset learned too low from one slow answer,
    /// or a server clock that stepped forward, is corrected by the next call instead of
    /// declining every call after it.
    fn failed(&self, error: &redis::RedisError) -> StoreError {
        if let (TimeSource::Server, Some("TOLLGATE_LATE")) = (&self.inner.time, error.code()) {
            let now = error
                .detail()
                .and_then(|detail| detail.split_whitespace().next()?.parse::<i64>().ok());
            if let Some(now) = now {
                self.inner
                    .server_clock
                    .observe(now, std::time::Instant::now());
            }
        }
        store_error(error)
    }

    /// Learns the server clock's offset from `reply`'s "now" (every answer but `start`'s
    /// carries it), on the server's own clock only.
    fn learn_from(&self, reply: Vec<i64>) -> Vec<i64> {
        if let (TimeSource::Server, Some(&now)) = (&self.inner.time, reply.get(1)) {
            self.inner
                .server_clock
                .observe(now, std::time::Instant::now());
        }
        reply
    }

    /// Runs one script execution that writes the items at `positions`: when one of them asks
    /// for a replica's acknowledgement, on the connection kept for those, waiting for it (the
    /// longest wait any of them asks).
    async fn execute_writing(
        &self,
        call: &ScriptCall,
        planned: &[Planned],
        positions: &[usize],
        timing: Timing,
    ) -> Result<Vec<i64>, StoreError> {
        let wait = positions
            .iter()
            .filter_map(|&at| planned[at].replica_ack)
            .max();
        let (Some(wait), Some(&first)) = (wait, positions.first()) else {
            return self.execute(call).await;
        };
        let slot = layout::slot_of(&planned[first].key);
        let reply = self
            .inner
            .connection
            .invoke_acknowledged(call, slot, wait, timing.waited_until)
            .await
            .map_err(|error| self.failed(&error))?;
        Ok(self.learn_from(reply))
    }

    /// Runs `operation` (check or start) over the items at `positions`, in one execution.
    pub(crate) async fn execute_items(
        &self,
        operation: Operation,
        planned: &[Planned],
        positions: &[usize],
        timing: Timing,
    ) -> Result<Vec<i64>, StoreError> {
        let call = script::invocation(
            operation,
            timing,
            positions.iter().map(|&at| planned[at].check_args()),
        )?;
        match operation {
            Operation::Check | Operation::Enforce => {
                self.execute_writing(&call, planned, positions, timing)
                    .await
            }
            _ => self.execute(&call).await,
        }
    }

    /// Checks the items at `positions` in one script execution (`operation`: check, or
    /// enforce for one slot of a split request).
    pub(crate) async fn check_group(
        &self,
        operation: Operation,
        planned: &[Planned],
        positions: &[usize],
        timing: Timing,
    ) -> Result<Answer, StoreError> {
        let reply = self
            .execute_items(operation, planned, positions, timing)
            .await?;
        script::decode(&reply, positions.len())
    }

    /// Takes back the charges (if any) of the items at the given positions, in one script
    /// execution; answers each one's state afterwards (enforcing items at cost 0, shadow items
    /// at their cost, as a refused batch reports them).
    ///
    /// These are not receipts (a refused request's own charges, taken back at once): they carry
    /// no refund marker and apply once, as sent — a bucket's by a rule that does not depend on
    /// the order in which concurrent requests take theirs back (see `src/lua/algorithms.lua`).
    pub(crate) async fn refund_group(
        &self,
        planned: &[Planned],
        charged: &[(usize, Option<Charge>)],
        timing: Timing,
    ) -> Result<Answer, StoreError> {
        let call = script::invocation(
            Operation::Refund,
            timing,
            charged
                .iter()
                .map(|(at, charge)| planned[*at].refund_args(charge.as_ref())),
        )?;
        let reply = self.execute(&call).await?;
        script::decode(&reply, charged.len())
    }

    /// Refunds one receipt, once: the script applies it only if it can set the receipt's
    /// marker (for as long as the charge could matter), so sending it again is a no-op.
    async fn refund_receipt(&self, receipt: &Receipt) -> Result<(), StoreError> {
        let item = Item::new(receipt.rule(), *receipt.quota(), receipt.key()).with_cost(0);
        let planned = self.plan(&item)?;
        let marker = self
            .inner
            .layout
            .marker(receipt.rule(), receipt.key(), receipt.id());
        let call = script::invocation(
            Operation::Refund,
            self.timing(),
            [planned.refund_args(Some(receipt.charge()))],
        )?
        .with_marker(marker);
        let reply = self.execute(&call).await?;
        script::decode(&reply, 1).map(drop)
    }
}

/// One item as the script sees it, owned so that a cross-slot check can finish (and refund)
/// in a task of its own even when its caller stops waiting.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    pub(crate) key: String,
    pub(crate) quota: Quota,
    pub(crate) cost: u64,
    /// Whether a refusal stops the request (an enforcing or a read-only item).
    pub(crate) enforcing: bool,
    /// Whether the item is only read, never charged.
    pub(crate) read_only: bool,
    /// How it takes its cost (exact, up to, as debt).
    pub(crate) take: Take,
    /// The caller's debt key, for an up-to or debt item.
    pub(crate) debt_key: Option<String>,
    /// How long to wait for a replica to hold the item's count, if asked.
    pub(crate) replica_ack: Option<std::time::Duration>,
    /// The id a concurrency item's slots are held under if it is allowed (0 for others).
    pub(crate) hold: u64,
}

impl Planned {
    fn check_args(&self) -> KeyArgs<'_> {
        KeyArgs {
            key: &self.key,
            quota: &self.quota,
            extra: [self.cost, self.mode_arg(), self.take_arg(), self.hold],
            debt_key: self.debt_key.as_deref(),
        }
    }

    fn renew_args(&self, id: u64, slots: u64) -> KeyArgs<'_> {
        KeyArgs {
            key: &self.key,
            quota: &self.quota,
            extra: [id, slots, 0, 0],
            debt_key: None,
        }
    }

    /// The script's take argument: 0 exact, 1 up to, 2 as debt, 3 after debt.
    fn take_arg(&self) -> u64 {
        match self.take {
            Take::UpTo => 1,
            Take::AsDebt => 2,
            Take::AfterDebt => 3,
            _ => 0,
        }
    }

    fn refund_args(&self, charge: Option<&Charge>) -> KeyArgs<'_> {
        let [kind, a, b] = charge.map_or([0; 3], script::charge_args);
        // As a refused batch reports them: charged items at cost 0, shadow and read-only items
        // at their cost.
        let report_at = if self.enforcing && !self.read_only {
            0
        } else {
            self.cost
        };
        KeyArgs {
            key: &self.key,
            quota: &self.quota,
            extra: [kind, a, b, report_at],
            debt_key: None,
        }
    }

    /// The script's mode argument: 1 enforcing, 0 shadow, 2 read-only.
    fn mode_arg(&self) -> u64 {
        match (self.read_only, self.enforcing) {
            (true, _) => 2,
            (false, true) => 1,
            (false, false) => 0,
        }
    }

    /// Whether this is an enforcing pacing item that takes a slot.
    pub(crate) fn paces(&self) -> bool {
        self.enforcing
            && !self.read_only
            && self.cost > 0
            && self.quota.algorithm() == Algorithm::LeakyBucket
    }
}

impl Store for RedisStore {
    /// A plain shared store's, and it waits for a replica when an item asks
    /// ([`FleetModes::with_replica_ack`](tollgate_core::FleetModes::with_replica_ack)).
    fn capabilities(&self) -> tollgate_core::Capabilities {
        tollgate_core::Capabilities::default().with_replica_ack()
    }

    /// On a cluster, the master serving the slot of `item`'s key (by the slot map read every
    /// second), so a `FallbackStore` keeps a breaker per master; `None` on one server.
    fn node_of(&self, item: &Item<'_>) -> Option<std::sync::Arc<str>> {
        let connection = &self.inner.connection;
        if !connection.is_cluster() {
            return None;
        }
        let format = StateFormat::of(item.quota().algorithm())?;
        let stored = self.inner.layout.key(format, item.rule(), item.key());
        connection.node_serving(layout::slot_of(&stored))
    }

    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        if items.is_empty() {
            return Ok(BatchDecision::new(true, []));
        }
        let planned: Vec<Planned> = items
            .iter()
            .map(|item| self.plan(item))
            .collect::<Result<_, _>>()?;
        let timing = self.charging_timing().await;
        let groups = if self.inner.connection.is_cluster() {
            split::by_slot(planned.iter().map(|item| layout::slot_of(&item.key)))
        } else {
            split::together(planned.len())
        };
        if groups.len() == 1 {
            let answer = self
                .check_group(Operation::Check, &planned, &groups[0], timing)
                .await?;
            return Ok(BatchDecision::new(answer.allowed, answer.items));
        }
        // Its own task: if the caller stops waiting (a deadline, a client gone), the groups
        // that charged are still refunded.
        let task = tokio::spawn(self.clone().check_split(planned, groups, timing));
        task.await.map_err(|error| {
            StoreError::new(
                StoreErrorKind::Protocol,
                format!("the cross-slot check stopped: {error}"),
            )
        })?
    }

    async fn check_one(&self, item: &Item<'_>) -> Result<ItemDecision, StoreError> {
        let planned = [self.plan(item)?];
        let timing = self.charging_timing().await;
        let answer = self
            .check_group(Operation::Check, &planned, &[0], timing)
            .await?;
        answer.items.into_iter().next().ok_or_else(|| {
            StoreError::new(
                StoreErrorKind::Protocol,
                "the redis script answered no item",
            )
        })
    }

    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        let planned = [self.plan(item)?];
        let reply = self
            .execute_items(Operation::Peek, &planned, &[0], self.timing())
            .await?;
        let answer = script::decode(&reply, 1)?;
        answer
            .items
            .first()
            .map(|item| *item.decision())
            .ok_or_else(|| StoreError::new(StoreErrorKind::Protocol, "peek answered no item"))
    }

    /// Refunds `receipt` once. On failure the receipt comes back in the error: retrying it is
    /// safe even when the first attempt did reach Redis (its answer lost), since the script
    /// skips a receipt whose refund marker is already set.
    async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
        match self.refund_receipt(&receipt).await {
            Ok(()) => Ok(()),
            Err(error) => Err(RefundError::new(error, receipt)),
        }
    }

    /// Extends a concurrency hold by its quota's slot ttl from now (on the server's clock), in
    /// one script call; a hold that lapsed or was given back is left as it is.
    async fn renew(&self, receipt: &Receipt) -> Result<(), StoreError> {
        let &Charge::Held { id, slots, .. } = receipt.charge() else {
            return Ok(());
        };
        let item = Item::new(receipt.rule(), *receipt.quota(), receipt.key()).with_cost(0);
        let planned = self.plan(&item)?;
        let call = script::invocation(
            Operation::Renew,
            self.timing(),
            [planned.renew_args(id, slots)],
        )?;
        self.execute(&call).await.map(drop)
    }

    /// Deletes the caller's state, then announces the reset on `<prefix>:resets` for every
    /// gateway's [`ResetFollower`](crate::ResetFollower). The reset stands even if the
    /// announcement fails (logged at `warn`: other gateways' caches then hold the caller until
    /// their entries end).
    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        let mut command = redis::cmd("DEL");
        for format in StateFormat::ALL {
            command.arg(self.inner.layout.key(format, rule, key));
        }
        command.arg(self.inner.layout.debt(rule, key));
        self.inner
            .connection
            .query::<i64>(&command)
            .await
            .map_err(|error| store_error(&error))?;
        let mut announce = redis::cmd("PUBLISH");
        announce
            .arg(self.inner.layout.resets_channel())
            .arg(crate::resets::message(rule, key));
        if let Err(error) = self.inner.connection.query::<i64>(&announce).await {
            tracing::warn!(
                target: "tollgate::store",
                rule = rule.as_str(),
                %error,
                "a reset was not announced; other gateways' caches of blocked callers keep the caller until their entries end"
            );
        }
        Ok(())
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
