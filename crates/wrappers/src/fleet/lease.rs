//! Leases: units taken from the shared store in batches, spent here, the rest given back.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::table::{ByKey, Lookup, entry};

use tollgate_core::store_kit::ReceiptKit;
use tollgate_core::{
    Algorithm, Charge, Decision, Item, ItemDecision, Key, LeaseSettings, Quota, Receipt,
    RefusalReason, RuleId, StoreError, Timestamp,
};

/// The most keys one gateway leases for at once: past it, leases not used this instant end.
const MAX_KEYS: usize = 1 << 16;

/// Every lease this gateway holds, by rule and key.
#[derive(Default)]
pub(crate) struct Leases {
    table: Mutex<Table>,
}

/// The leases, and how many checks they decided here: counted under the lock a check already
/// holds, because a shared atomic counter bumped by every check cost as much as the rest of a
/// local spend (measured: 18 % of a leased check on the `check` bench).
#[derive(Default)]
struct Table {
    leases: ByKey<Lease>,
    decided_here: u64,
}

/// One key's leases: the parts it still holds, oldest first, the one store call on its way for
/// the key (if any), and what sizes the next lease.
///
/// One call at a time per key (single-flight): a check that finds too little held while a call
/// is on its way waits for that call rather than making another, so a busy key costs about one
/// store call per top-up period however many tasks check it. After the store refused, or ran
/// short, the key asks again no sooner than the refusal's `Retry-After` and one top-up period,
/// and checks that find too little meanwhile are refused here.
///
/// A call that fails ends the wait of every check waiting for it with the call's outcome
/// ([`Failure`]): the store's error, or the rule's failure policy (each waiter asks for itself,
/// as the caller did, and the policy answers it). While the key's calls are answered by the
/// policy, each asks for its check's cost alone, so a policy that counts locally (`open_within`)
/// counts each check's cost, not a lease's.
struct Lease {
    parts: VecDeque<Part>,
    /// The units `parts` hold together, kept as they change (read several times a check).
    held: u64,
    settings: LeaseSettings,
    /// A store call for the key is on its way.
    calling: bool,
    /// How many calls have landed, so a waiter can tell whether the one it waits for has.
    landed: u64,
    /// The count of calls landed when the last one that failed did (the store did not answer).
    failed_at: u64,
    /// How the last call that failed ended, for the checks that waited for it.
    failure: Option<Failure>,
    /// Woken each time a call lands.
    notify: Arc<Notify>,
    /// Units checks asked for (spent here or refused here) since `window_start`: the key's
    /// demand in this top-up period so far.
    demand: u64,
    window_start: Timestamp,
    /// The key's demand per top-up period over the last whole window.
    last_rate: u64,
    /// When the last call started.
    last_call: Timestamp,
    /// The last lease's size.
    size: u64,
    /// No call for the key before this instant: the store refused (until its `Retry-After`, and
    /// at least a top-up period) or had no more to give (a top-up period).
    next_call_at: Timestamp,
    last_spend: Timestamp,
    /// The store's last answer for the key, to report with local spends.
    view: Decision,
}

/// How a key's call failed, as the checks that waited for it are answered.
#[derive(Clone)]
pub(crate) enum Failure {
    /// The shared store answered an error (the rule fails closed, or no failure policy stands
    /// between the fleet store and a store that is down): each waiter answers that error.
    Error(StoreError),
    /// The rule's failure policy let the call through without leasing anything (`open`,
    /// `open_within`): each waiter asks the shared store for its own cost, and the policy
    /// answers it as it answered the caller.
    Policy,
}

/// Units of one lease still unspent, its receipt, and when it ends.
struct Part {
    receipt: Receipt,
    units: u64,
    ends_at: Timestamp,
}

/// What a local spend found.
pub(crate) enum Spend {
    /// Spent from the lease; with a top-up to ask for in the background (marked on its way).
    Spent(Decision, Option<TopUp>),
    /// Refused here: the store refused or ran short a moment ago, and it is not time to ask
    /// again.
    Refused(Decision),
    /// Too little held and a call is on its way: wait for it to land (`landed`: the count of
    /// calls landed when this was answered).
    Wait { notify: Arc<Notify>, landed: u64 },
    /// Too little held: this check asks the store for `want` units (marked on its way).
    Call { want: u64 },
    /// Too little held, and this check may not ask (a check that must not wait).
    Short,
}

/// A top-up to ask the store for in the background: up to `units`.
pub(crate) struct TopUp {
    pub(crate) units: u64,
}

/// What a call that landed brought the check that made it.
pub(crate) enum Landed {
    /// Its cost was spent from what the call brought.
    Spent(Decision),
    /// The store refused, or brought too little for its cost.
    Refused(Decision),
}

impl Leases {
    /// Spends `item`'s cost from the key's lease at `now`, or says what to do instead: wait for
    /// the call on its way, ask the store (only when `may_call`), or refuse here. `first`: this
    /// check's first look (its cost counts toward the key's demand once). Also answers the
    /// unspent units of leases that ended, to give back.
    ///
    /// A check that may not call (one decided now, without awaiting) starts background work —
    /// a top-up, a give-back — only on a Tokio runtime: with none, it answers `Short` before
    /// changing anything, and the async check that follows does the work inline. The runtime is
    /// looked up only then (once a lease, not once a check).
    #[inline]
    pub(crate) fn spend(
        &self,
        item: &Item<'_>,
        settings: LeaseSettings,
        now: Timestamp,
        first: bool,
        may_call: bool,
    ) -> (Spend, Vec<Receipt>) {
        let mut guard = self.table.lock();
        let Table {
            leases: table,
            decided_here,
        } = &mut *guard;
        let mut ended = Vec::new();
        let no_runtime = || !may_call && tokio::runtime::Handle::try_current().is_err();
        if table.len() >= MAX_KEYS && !table.contains_key(&Lookup(item.rule(), item.key())) {
            if no_runtime() {
                return (Spend::Short, ended);
            }
            // A flood of keys: end every lease not used this very moment (its units go back),
            // so the table stays bounded; busy keys simply lease again.
            ended = end_leases(table, now, true);
        }
        let lease = entry(table, item.rule(), item.key(), || {
            Lease::new(settings, *item.quota(), now)
        });
        lease.settings = settings;
        if lease.any_ended(now) {
            if no_runtime() {
                return (Spend::Short, ended);
            }
            ended.extend(lease.drop_ended(now));
        }
        let cost = item.cost();
        lease.roll(now);
        if first {
            lease.demand = lease.demand.saturating_add(cost);
        }
        if lease.held() >= cost {
            if lease.top_up_wanted(now, lease.held() - cost) && no_runtime() {
                if first {
                    // Counted again when the check asks.
                    lease.demand = lease.demand.saturating_sub(cost);
                }
                return (Spend::Short, ended);
            }
            lease.take(cost);
            lease.last_spend = now;
            let top_up = lease.top_up_due(now);
            *decided_here += 1;
            return (Spend::Spent(lease.report(item.quota()), top_up), ended);
        }
        if lease.calling {
            let wait = Spend::Wait {
                notify: Arc::clone(&lease.notify),
                landed: lease.landed,
            };
            return (if may_call { wait } else { Spend::Short }, ended);
        }
        if now < lease.next_call_at {
            let wait = Duration::from_micros(lease.next_call_at.micros_since(now));
            *decided_here += 1;
            return (Spend::Refused(lease.refused_here(item, wait)), ended);
        }
        if !may_call {
            if first {
                // Counted again when the check asks.
                lease.demand = lease.demand.saturating_sub(cost);
            }
            return (Spend::Short, ended);
        }
        // While the policy answers the key's calls, a call asks for this check's cost alone.
        let want = if lease.answered_by_policy() {
            cost
        } else {
            lease.next_size().max(cost)
        };
        lease.start_call(want, now);
        (Spend::Call { want }, ended)
    }

    /// How many calls for `item`'s key have landed.
    pub(crate) fn landed(&self, item: &Item<'_>) -> u64 {
        self.table
            .lock()
            .leases
            .get(&Lookup(item.rule(), item.key()))
            .map_or(u64::MAX, |lease| lease.landed)
    }

    /// How a call for `item`'s key failed since `landed` calls had landed, if one did: a check
    /// that waited for it is answered as that call's caller was (the same error, or the rule's
    /// policy), rather than wait for a call of its own.
    pub(crate) fn failed_since(&self, item: &Item<'_>, landed: u64) -> Option<Failure> {
        self.table
            .lock()
            .leases
            .get(&Lookup(item.rule(), item.key()))
            .filter(|lease| lease.failed_at > landed)
            .and_then(|lease| lease.failure.clone())
    }

    /// Lands a call for `asked`'s rule and key (an up-to item) that the store answered: its
    /// units become a new part, the key's next call is timed from the answer, and waiters wake.
    /// With `cost`, the check that made the call is decided first, on what it brought. Also
    /// answers units to give back at once (too few for that check, or a key forgotten
    /// meanwhile).
    pub(crate) fn land(
        &self,
        asked: &Item<'_>,
        answer: ItemDecision,
        cost: Option<u64>,
        now: Timestamp,
    ) -> (Option<Landed>, Option<Receipt>) {
        let want = asked.cost();
        let granted = answer.granted(asked);
        let view = *answer.decision();
        let receipt = answer.into_receipt(asked);
        let mut table = self.table.lock();
        let Some(lease) = table.leases.get_mut(&Lookup(asked.rule(), asked.key())) else {
            // Forgotten meanwhile (a reset): the units go back.
            let refused = cost.map(|_| Landed::Refused(view));
            return (refused, receipt.filter(|_| granted > 0));
        };
        lease.view = view;
        let period = micros(lease.settings.top_up_period());
        if granted == 0 {
            // Refused: remembered until its Retry-After, and at least a top-up period.
            let wait = micros(view.retry_after()).max(period);
            lease.next_call_at = now.saturating_add_micros(wait);
        } else if granted < want || view.remaining() < want {
            // The store had no more (or will not have a whole lease) to give: it refills
            // while the gateway spends what it has.
            lease.next_call_at = lease.last_call.saturating_add_micros(period);
        }
        let mut part = receipt.filter(|_| granted > 0).map(|receipt| Part {
            ends_at: ends_at(&receipt, &view, lease.settings.lease_lifetime(), now),
            receipt,
            units: granted,
        });
        let mut give_back = None;
        let decided = cost.map(|cost| {
            let held = lease.held().saturating_add(granted);
            if granted == 0 {
                Landed::Refused(view)
            } else if held < cost {
                // Too little for this request: the units go straight back rather than sit
                // here, so no gateway holds more than H.
                give_back = part.take().map(|part| part.receipt);
                Landed::Refused(refusal(asked, &view, lease.held(), cost))
            } else {
                if let Some(part) = part.take() {
                    lease.add(part);
                }
                lease.take(cost);
                lease.last_spend = now;
                Landed::Spent(lease.report(asked.quota()))
            }
        });
        if let Some(part) = part {
            lease.add(part);
        }
        lease.finish_call();
        (decided, give_back)
    }

    /// Ends the key's call without an answer to keep (the store failed, or the rule's failure
    /// policy decided): the next check may ask again; waiters wake and are answered by
    /// `failure`.
    pub(crate) fn call_failed(&self, rule: &RuleId, key: &Key, failure: Failure) {
        if let Some(lease) = self.table.lock().leases.get_mut(&Lookup(rule, key)) {
            lease.finish_call();
            lease.failed_at = lease.landed;
            lease.failure = Some(failure);
        }
    }

    /// Ends the key's call without an answer and without a failure (the check that made it
    /// stopped waiting): the next check may ask again; waiters wake and ask themselves.
    pub(crate) fn call_abandoned(&self, rule: &RuleId, key: &Key) {
        if let Some(lease) = self.table.lock().leases.get_mut(&Lookup(rule, key)) {
            lease.finish_call();
        }
    }

    /// Puts `cost` back into the key's newest lease (a spend undone because the rest of its
    /// request was refused).
    pub(crate) fn unspend(&self, item: &Item<'_>) {
        let mut table = self.table.lock();
        if let Some(lease) = table.leases.get_mut(&Lookup(item.rule(), item.key()))
            && let Some(part) = lease.parts.back_mut()
        {
            part.units = part.units.saturating_add(item.cost());
            lease.held = lease.held.saturating_add(item.cost());
        }
    }

    /// Ends leases at `now`: every part whose time is up, and every lease of a key quiet for two
    /// top-up periods. Answers the receipts of their unspent units, to give back.
    pub(crate) fn end_quiet(&self, now: Timestamp) -> Vec<Receipt> {
        end_leases(&mut self.table.lock().leases, now, false)
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.table.lock().leases.len()
    }

    /// Checks decided here, from a lease or refused while the store's refusal was remembered.
    pub(crate) fn decided_here(&self) -> u64 {
        self.table.lock().decided_here
    }

    /// Ends every lease now (a gateway settling before it stops): the receipts of all unspent
    /// units, to give back.
    pub(crate) fn end_all(&self) -> Vec<Receipt> {
        let mut give_back: Vec<Receipt> = self
            .table
            .lock()
            .leases
            .drain()
            .flat_map(|(_, mut lease)| {
                lease.finish_call();
                lease.parts.into_iter().map(Part::unspent)
            })
            .collect();
        give_back.retain(|receipt| units_of(receipt) > 0);
        give_back
    }

    /// Forgets the key's leases (an operator's reset: the shared state is cleared too).
    pub(crate) fn forget(&self, rule: &RuleId, key: &Key) {
        if let Some(mut lease) = self.table.lock().leases.remove(&Lookup(rule, key)) {
            lease.finish_call();
        }
    }

    /// Units held now for `rule` and `key` (for tests and stats).
    pub(crate) fn held(&self, rule: &RuleId, key: &Key) -> u64 {
        self.table
            .lock()
            .leases
            .get(&Lookup(rule, key))
            .map_or(0, Lease::held)
    }
}

/// The refusal for a request of `cost` when the store granted too little to cover it, `held`
/// being what stays leased: a retry fits once the missing units are back.
fn refusal(asked: &Item<'_>, answer: &Decision, held: u64, cost: u64) -> Decision {
    let missing = cost.saturating_sub(held);
    let quota = asked.quota();
    let retry = match quota.algorithm() {
        Algorithm::TokenBucket => {
            Duration::from_micros(missing.saturating_mul(quota.interval_micros()))
        }
        _ => answer.reset_after(),
    };
    Decision::refused(
        RefusalReason::LimitReached,
        quota.limit(),
        held,
        answer.reset_after(),
        retry,
    )
}

impl Lease {
    fn new(settings: LeaseSettings, quota: Quota, now: Timestamp) -> Self {
        Lease {
            parts: VecDeque::new(),
            held: 0,
            settings,
            calling: false,
            landed: 0,
            failed_at: 0,
            failure: None,
            notify: Arc::new(Notify::new()),
            demand: 0,
            window_start: now,
            last_rate: 0,
            last_call: now,
            size: 1,
            next_call_at: Timestamp::EPOCH,
            last_spend: now,
            view: Decision::allowed(quota.limit(), quota.limit(), Duration::ZERO),
        }
    }

    fn held(&self) -> u64 {
        self.held
    }

    /// Holds a new part, the newest.
    fn add(&mut self, part: Part) {
        self.held = self.held.saturating_add(part.units);
        self.parts.push_back(part);
    }

    /// Lets go of every part (their receipts, to give back).
    fn release_all(&mut self) -> impl Iterator<Item = Part> + '_ {
        self.held = 0;
        self.parts.drain(..)
    }

    /// Starts a new demand window once a top-up period has passed, keeping the last one's
    /// demand per period.
    fn roll(&mut self, now: Timestamp) {
        let period = micros(self.settings.top_up_period()).max(1);
        let elapsed = now.micros_since(self.window_start);
        if elapsed >= period {
            let per_period = u128::from(self.demand) * u128::from(period) / u128::from(elapsed);
            self.last_rate = u64::try_from(per_period).unwrap_or(u64::MAX);
            self.demand = 0;
            self.window_start = now;
        }
    }

    /// The next lease's size: the key's demand per top-up period — the last whole period's, or
    /// this one's so far if more — at least 1, at most the cap. A first check, or the first after
    /// a quiet spell, takes what it needs: one unit.
    fn next_size(&self) -> u64 {
        self.last_rate
            .max(self.demand)
            .clamp(1, self.settings.max_lease())
    }

    /// Whether the key's last call was answered by the rule's failure policy (no call has
    /// landed since).
    fn answered_by_policy(&self) -> bool {
        self.failed_at == self.landed && matches!(self.failure, Some(Failure::Policy))
    }

    /// Marks a call of `want` units on its way from `now`.
    fn start_call(&mut self, want: u64, now: Timestamp) {
        self.calling = true;
        self.size = want;
        self.last_call = now;
    }

    /// Marks the key's call landed, and wakes whoever waits for it.
    fn finish_call(&mut self) {
        if self.calling {
            self.calling = false;
            self.landed = self.landed.wrapping_add(1);
            self.notify.notify_waiters();
        }
    }

    /// Takes `cost` from the oldest parts. A part spent to the last unit goes (its charge used),
    /// but the newest stays, so a spend undone ([`Leases::unspend`]) has a receipt to go back to.
    fn take(&mut self, mut cost: u64) {
        self.held = self.held.saturating_sub(cost);
        // The common case, every check of a busy key: the oldest part covers the cost and keeps
        // a unit (or is the only part), so no part goes.
        let only = self.parts.len() == 1;
        if let Some(oldest) = self.parts.front_mut()
            && (oldest.units > cost || (only && oldest.units == cost))
        {
            oldest.units -= cost;
            return;
        }
        for part in &mut self.parts {
            if cost == 0 {
                break;
            }
            let taken = part.units.min(cost);
            part.units -= taken;
            cost -= taken;
        }
        let newest = self.parts.len().saturating_sub(1);
        let mut index = 0;
        self.parts.retain(|part| {
            let keep = part.units > 0 || index == newest;
            index += 1;
            keep
        });
    }

    /// Whether a part's time is up at `now`.
    fn any_ended(&self, now: Timestamp) -> bool {
        self.parts.iter().any(|part| part.ends_at <= now)
    }

    /// Parts whose time is up at `now`, as receipts for their unspent units.
    fn drop_ended(&mut self, now: Timestamp) -> Vec<Receipt> {
        if !self.any_ended(now) {
            return Vec::new();
        }
        // Any part may end first (a later lease can end at its window's end): look at each.
        let (live, gone): (VecDeque<Part>, VecDeque<Part>) =
            self.parts.drain(..).partition(|part| part.ends_at > now);
        self.parts = live;
        self.held = self.parts.iter().map(|part| part.units).sum();
        gone.into_iter().map(Part::unspent).collect()
    }

    /// A top-up to ask for in the background, so a busy key never waits on the store: when half
    /// a lease or less is left, no call is on its way, it is time to ask again, and the key is
    /// busy enough to lease more than one unit at a time (a quiet key holds nothing).
    fn top_up_due(&mut self, now: Timestamp) -> Option<TopUp> {
        if !self.top_up_wanted(now, self.held()) {
            return None;
        }
        let size = self.next_size();
        self.start_call(size, now);
        Some(TopUp { units: size })
    }

    /// Whether a top-up is due at `now` with `held` units left (see
    /// [`top_up_due`](Self::top_up_due)).
    fn top_up_wanted(&self, now: Timestamp, held: u64) -> bool {
        !self.calling && now >= self.next_call_at && held <= self.size / 2 && self.next_size() >= 2
    }

    /// A refusal answered here, with too little held: retry after `wait`.
    fn refused_here(&self, item: &Item<'_>, wait: Duration) -> Decision {
        Decision::refused(
            RefusalReason::LimitReached,
            item.quota().limit(),
            self.held(),
            self.view.reset_after().max(wait),
            wait,
        )
    }

    /// The decision a local spend reports: the store's last view and what this gateway holds.
    fn report(&self, quota: &Quota) -> Decision {
        let remaining = self
            .view
            .remaining()
            .saturating_add(self.held())
            .min(quota.limit());
        Decision::allowed(quota.limit(), remaining, self.view.reset_after())
    }
}

impl Part {
    fn unspent(self) -> Receipt {
        self.receipt.narrowed(self.units)
    }
}

/// When a lease taken at `now` ends: after `lifetime`, and never after the window it was
/// charged to. A fixed window's end comes from the store's answer (`view`: the time left in the
/// window, on the store's clock), so a gateway clock that disagrees with the store's does not
/// stretch the lease into the next window; a sliding counter's from its window's start.
fn ends_at(receipt: &Receipt, view: &Decision, lifetime: Duration, now: Timestamp) -> Timestamp {
    let by_lifetime = now.saturating_add_micros(micros(lifetime));
    match receipt.charge() {
        Charge::Window { .. } if receipt.quota().algorithm() == Algorithm::FixedWindow => {
            by_lifetime.min(now.saturating_add_micros(micros(view.reset_after())))
        }
        Charge::Window { start, .. } => {
            by_lifetime.min(start.saturating_add_micros(receipt.quota().interval_micros()))
        }
        _ => by_lifetime,
    }
}

/// The units a (narrowed) receipt gives back.
fn units_of(receipt: &Receipt) -> u64 {
    match receipt.charge() {
        Charge::Scheduled { micros, .. } => micros / receipt.quota().interval_micros().max(1),
        Charge::Window { cost, .. }
        | Charge::Logged { cost, .. }
        | Charge::Held { slots: cost, .. } => *cost,
        // A charge of a kind added to core later: nothing is given back, so nothing is granted.
        _ => 0,
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// Ends leases in `table` at `now`: parts whose time is up, and every lease of a key quiet for two
/// top-up periods (`all_idle`: every lease not spent from at `now` itself). Answers the receipts
/// of their unspent units, to give back.
fn end_leases(table: &mut ByKey<Lease>, now: Timestamp, all_idle: bool) -> Vec<Receipt> {
    let mut give_back = Vec::new();
    table.retain(|_, lease| {
        give_back.extend(lease.drop_ended(now));
        let quiet_for = now.micros_since(lease.last_spend);
        let quiet = if all_idle {
            quiet_for > 0
        } else {
            quiet_for >= micros(lease.settings.top_up_period()).saturating_mul(2)
        };
        if quiet && !lease.calling {
            give_back.extend(lease.release_all().map(Part::unspent));
            return false;
        }
        true
    });
    give_back.retain(|receipt| units_of(receipt) > 0);
    give_back
}
