//! Leases: units taken from the shared store in batches, spent here, the rest given back.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::Mutex;

use super::table::{ByKey, Lookup, entry};

use crate::{
    Algorithm, Charge, Decision, Item, ItemDecision, Key, LeaseSettings, Quota, Receipt,
    RefusalReason, RuleId, Timestamp,
};

/// The most keys one gateway leases for at once: past it, leases not used this instant end.
const MAX_KEYS: usize = 1 << 16;

/// Every lease this gateway holds, by rule and key.
#[derive(Default)]
pub(crate) struct Leases {
    table: Mutex<ByKey<Lease>>,
}

/// One key's leases: the parts it still holds, oldest first, and what sizes the next one.
struct Lease {
    parts: VecDeque<Part>,
    settings: LeaseSettings,
    /// A top-up has been asked for and not answered yet.
    topping_up: bool,
    /// The next lease's size (N), adapted to the key's rate.
    size: u64,
    spent_since_top_up: u64,
    last_top_up: Timestamp,
    last_spend: Timestamp,
    /// The store's last answer for the key, to report with local spends.
    view: Decision,
    /// The store refused a lease: nothing comes back before this (refused here till then).
    dry_until: Timestamp,
    /// After a refusal, one check is asking the store again: the others are refused here
    /// meanwhile, so a flood on a dry key sends one store call per refill, not one per check.
    probing: bool,
}

/// Units of one lease still unspent, its receipt, and when it ends.
struct Part {
    receipt: Receipt,
    units: u64,
    ends_at: Timestamp,
}

/// What a local spend found.
pub(crate) enum Spend {
    /// Spent from the lease.
    Spent(Decision),
    /// Refused here: the store refused a lease a moment ago and nothing is back yet.
    Dry(Decision),
    /// Not enough held: take this many from the store now (`waiting`: a top-up is on its way,
    /// and may land first).
    Short { want: u64, waiting: bool },
}

/// A top-up to ask the store for in the background: up to `units`.
pub(crate) struct TopUp {
    pub(crate) units: u64,
}

impl Leases {
    /// Spends `item`'s cost from the key's lease at `now`. Also answers a top-up to ask for (when
    /// half a lease is left) and the unspent units of leases that ended, to give back.
    pub(crate) fn spend(
        &self,
        item: &Item<'_>,
        settings: LeaseSettings,
        now: Timestamp,
    ) -> (Spend, Option<TopUp>, Vec<Receipt>) {
        let mut table = self.table.lock();
        let mut ended = Vec::new();
        if table.len() >= MAX_KEYS && !table.contains_key(&Lookup(item.rule(), item.key())) {
            // A flood of keys: end every lease not used this very moment (its units go back),
            // so the table stays bounded; busy keys simply lease again.
            ended = end_leases(&mut table, now, true);
        }
        let lease = entry(&mut table, item.rule(), item.key(), || {
            Lease::new(settings, *item.quota(), now)
        });
        lease.settings = settings;
        ended.extend(lease.drop_ended(now));
        let cost = item.cost();
        let held = lease.held();
        if held < cost && lease.dry_until > now {
            let wait = Duration::from_micros(lease.dry_until.micros_since(now));
            return (Spend::Dry(lease.refused_here(item, wait)), None, ended);
        }
        if held < cost && lease.dry_until > Timestamp::EPOCH {
            if lease.probing {
                let wait = lease.view.retry_after();
                return (Spend::Dry(lease.refused_here(item, wait)), None, ended);
            }
            lease.probing = true;
        }
        if held < cost {
            // With a top-up on its way, take only what this request needs: the top-up brings
            // the rest, and the gateway never holds more than H.
            let want = if lease.topping_up {
                cost
            } else {
                lease.size.max(cost)
            };
            let waiting = lease.topping_up;
            return (Spend::Short { want, waiting }, None, ended);
        }
        lease.take(cost);
        lease.last_spend = now;
        lease.spent_since_top_up = lease.spent_since_top_up.saturating_add(cost);
        let top_up = lease.top_up_due(now);
        (Spend::Spent(lease.report(item.quota())), top_up, ended)
    }

    /// Adds what the store granted for a lease of `item`'s rule and key (its answer to an up-to
    /// item, `asked` being that item) as a new part; answers the receipt back when there was
    /// nothing to add.
    pub(crate) fn add(&self, asked: &Item<'_>, answer: ItemDecision, now: Timestamp) {
        let granted = answer.granted(asked);
        let view = *answer.decision();
        let receipt = answer.into_receipt(asked);
        let mut table = self.table.lock();
        let Some(lease) = table.get_mut(&Lookup(asked.rule(), asked.key())) else {
            return;
        };
        lease.view = view;
        if let Some(receipt) = receipt.filter(|_| granted > 0) {
            let ends_at = ends_at(&receipt, &view, lease.settings.lease_lifetime(), now);
            lease.parts.push_back(Part {
                receipt,
                units: granted,
                ends_at,
            });
        }
    }

    /// Records that the store refused a lease for `item`'s key at `now` with `refusal`: the
    /// gateway refuses the key itself until the refusal's wait is over, as the store would (a
    /// flood on a dry key costs no store call per request).
    pub(crate) fn dry(&self, item: &Item<'_>, refusal: &Decision, now: Timestamp) {
        if let Some(lease) = self.table.lock().get_mut(&Lookup(item.rule(), item.key())) {
            lease.view = *refusal;
            lease.dry_until = now.saturating_add_micros(micros(refusal.retry_after()));
        }
    }

    /// Marks the key's probe after a refusal answered (whatever the answer): granted units
    /// end the dry spell, a refusal starts another ([`dry`](Self::dry)).
    pub(crate) fn probed(&self, item: &Item<'_>, granted: bool) {
        if let Some(lease) = self.table.lock().get_mut(&Lookup(item.rule(), item.key())) {
            lease.probing = false;
            if granted {
                lease.dry_until = Timestamp::EPOCH;
            }
        }
    }

    /// Marks the key's background top-up answered (whatever the answer).
    pub(crate) fn topped_up(&self, rule: &RuleId, key: &Key) {
        if let Some(lease) = self.table.lock().get_mut(&Lookup(rule, key)) {
            lease.topping_up = false;
        }
    }

    /// Puts `cost` back into the key's newest lease (a spend undone because the rest of its
    /// request was refused).
    pub(crate) fn unspend(&self, item: &Item<'_>) {
        let mut table = self.table.lock();
        if let Some(lease) = table.get_mut(&Lookup(item.rule(), item.key()))
            && let Some(part) = lease.parts.back_mut()
        {
            part.units = part.units.saturating_add(item.cost());
        }
    }

    /// The refusal for `item` when the store granted too little to cover its cost: the units
    /// granted stay leased; a retry fits once the missing units are back.
    pub(crate) fn refusal(&self, item: &Item<'_>, answer: &Decision) -> Decision {
        let held = self
            .table
            .lock()
            .get(&Lookup(item.rule(), item.key()))
            .map_or(0, Lease::held);
        let missing = item.cost().saturating_sub(held);
        let quota = item.quota();
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

    /// Ends leases at `now`: every part whose time is up, and every lease of a key quiet for two
    /// top-up periods. Answers the receipts of their unspent units, to give back.
    pub(crate) fn end_quiet(&self, now: Timestamp) -> Vec<Receipt> {
        end_leases(&mut self.table.lock(), now, false)
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.table.lock().len()
    }

    /// Ends every lease now (a gateway settling before it stops): the receipts of all unspent
    /// units, to give back.
    pub(crate) fn end_all(&self) -> Vec<Receipt> {
        let mut give_back: Vec<Receipt> = self
            .table
            .lock()
            .drain()
            .flat_map(|(_, lease)| lease.parts.into_iter().map(Part::unspent))
            .collect();
        give_back.retain(|receipt| units_of(receipt) > 0);
        give_back
    }

    /// Forgets the key's leases (an operator's reset: the shared state is cleared too).
    pub(crate) fn forget(&self, rule: &RuleId, key: &Key) {
        self.table.lock().remove(&Lookup(rule, key));
    }

    /// Units held now for `rule` and `key` (for tests and stats).
    pub(crate) fn held(&self, rule: &RuleId, key: &Key) -> u64 {
        self.table
            .lock()
            .get(&Lookup(rule, key))
            .map_or(0, Lease::held)
    }
}

impl Lease {
    fn new(settings: LeaseSettings, quota: Quota, now: Timestamp) -> Self {
        Lease {
            parts: VecDeque::new(),
            settings,
            topping_up: false,
            size: 1,
            spent_since_top_up: 0,
            last_top_up: now,
            last_spend: now,
            view: Decision::allowed(quota.limit(), quota.limit(), Duration::ZERO),
            dry_until: Timestamp::EPOCH,
            probing: false,
        }
    }

    fn held(&self) -> u64 {
        self.parts.iter().map(|part| part.units).sum()
    }

    /// Takes `cost` from the oldest parts. A part spent to the last unit goes (its charge used),
    /// but the newest stays, so a spend undone ([`Leases::unspend`]) has a receipt to go back to.
    fn take(&mut self, mut cost: u64) {
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

    /// Parts whose time is up at `now`, as receipts for their unspent units.
    fn drop_ended(&mut self, now: Timestamp) -> Vec<Receipt> {
        if self.parts.iter().all(|part| part.ends_at > now) {
            return Vec::new();
        }
        // Any part may end first (a later lease can end at its window's end): look at each.
        let (live, gone): (VecDeque<Part>, VecDeque<Part>) =
            self.parts.drain(..).partition(|part| part.ends_at > now);
        self.parts = live;
        gone.into_iter().map(Part::unspent).collect()
    }

    /// A top-up to ask for when half a lease or less is left, sized to the rate since the last
    /// one: about one top-up per period, at least 1 unit, at most the cap.
    fn top_up_due(&mut self, now: Timestamp) -> Option<TopUp> {
        if self.topping_up || self.held() > self.size / 2 {
            return None;
        }
        let elapsed = now.micros_since(self.last_top_up).max(1);
        let period = micros(self.settings.top_up_period());
        let rate_sized =
            u128::from(self.spent_since_top_up) * u128::from(period) / u128::from(elapsed);
        self.size = u64::try_from(rate_sized)
            .unwrap_or(u64::MAX)
            .clamp(1, self.settings.max_lease());
        self.spent_since_top_up = 0;
        self.last_top_up = now;
        self.topping_up = true;
        Some(TopUp { units: self.size })
    }

    /// A refusal answered here for a dry key: nothing held, retry after `wait`.
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
        Charge::Window { cost, .. } | Charge::Logged { cost, .. } => *cost,
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
        if quiet && !lease.topping_up && !lease.probing {
            give_back.extend(lease.parts.drain(..).map(Part::unspent));
            return false;
        }
        true
    });
    give_back.retain(|receipt| units_of(receipt) > 0);
    give_back
}
