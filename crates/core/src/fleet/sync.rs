//! Local-then-sync: decisions on a local copy of each key's state, the spend pushed to the shared
//! count as debt in one batch per gateway, the shared count brought back on the same call.

use std::time::Duration;

use parking_lot::Mutex;

use super::table::{ByKey, Lookup, entry};

use crate::{
    BatchDecision, Clock, Decision, Item, ItemDecision, Key, MemoryStore, OnStoreFailure, Quota,
    Receipt, RuleId, StoreError, SyncSettings, Take, Timestamp,
};

/// The most keys one gateway syncs at once: past it, keys with nothing unsynced are forgotten.
const MAX_KEYS: usize = 1 << 16;

/// Every synced key of this gateway, and the local copies decisions are made on.
pub(crate) struct Syncs<C: Clock> {
    table: Mutex<ByKey<Synced>>,
    local: MemoryStore<C>,
}

/// One key: what was spent here and not yet pushed, and how the last push went.
struct Synced {
    quota: Quota,
    settings: SyncSettings,
    on_store_failure: OnStoreFailure,
    unsynced: u64,
    /// A push of this key is on its way to the store.
    pushing: bool,
    /// The local copy refused a check: until this instant it refuses every check of that cost
    /// or more (it changes only with time or a sync), so refusals are answered from here.
    refused_until: Option<(Timestamp, u64, Decision)>,
    /// The local copy owes a debt (the shared count did at the last sync): decisions must
    /// read it.
    in_debt: bool,
    /// The key has a local copy of the shared count (it has been synced once).
    known: bool,
    /// The last push failed: the store is down for this key.
    down: bool,
    last_sync: Timestamp,
    last_use: Timestamp,
}

/// What a local decision found.
pub(crate) enum Local {
    /// Decided here.
    Decided(ItemDecision, Option<Receipt>),
    /// The key has no local copy yet: sync it first.
    Unknown,
    /// The store is down and the rule fails closed.
    StoreDown,
    /// This gateway has spent its M unsynced units: push before deciding.
    Full,
    /// The table is at its bound and every key in it has spend to push: push everything, then
    /// decide.
    Crowded,
}

/// One key's part of a push: its rule, key, quota and the units pushed.
pub(crate) struct Push {
    pub(crate) rule: RuleId,
    pub(crate) key: Key,
    pub(crate) quota: Quota,
    pub(crate) units: u64,
}

impl<C: Clock + Clone> Syncs<C> {
    pub(crate) fn new(clock: C) -> Self {
        Syncs {
            table: Mutex::new(ByKey::default()),
            local: MemoryStore::builder().clock(clock).build(),
        }
    }

    /// Decides `item` on its key's local copy at `now`; answers too whether a push is due (M
    /// units unsynced, or an interval since the last).
    pub(crate) fn decide(
        &self,
        item: &Item<'_>,
        settings: SyncSettings,
        now: Timestamp,
    ) -> (Local, bool) {
        let mut table = self.table.lock();
        if table.len() >= MAX_KEYS && !table.contains_key(&Lookup(item.rule(), item.key())) {
            // A flood of keys: forget every key with nothing unsynced and no push on its way
            // (it syncs again on its next use), so the table stays bounded.
            table.retain(|(rule, key), synced| {
                let keep = synced.unsynced > 0 || synced.pushing;
                if !keep {
                    self.local.reset_sync(rule, key);
                }
                keep
            });
            if table.len() >= MAX_KEYS {
                return (Local::Crowded, true);
            }
        }
        let synced = entry(&mut table, item.rule(), item.key(), || Synced {
            quota: *item.quota(),
            settings,
            on_store_failure: item.on_store_failure(),
            unsynced: 0,
            pushing: false,
            in_debt: false,
            refused_until: None,
            known: false,
            down: false,
            last_sync: now,
            last_use: now,
        });
        synced.quota = *item.quota();
        synced.settings = settings;
        synced.on_store_failure = item.on_store_failure();
        synced.last_use = now;
        if synced.down && synced.on_store_failure == OnStoreFailure::Closed {
            return (Local::StoreDown, true);
        }
        if !synced.known && !synced.down {
            return (Local::Unknown, false);
        }
        // A cost the quota can never allow is refused as such, whatever the store's state.
        if item.cost() > item.quota().limit() {
            let never = super::never_fits(item.quota());
            return (Local::Decided(ItemDecision::uncharged(never), None), false);
        }
        // Never more than M unsynced, so the shared count never lags by more than G·M.
        let cost = item.cost();
        if synced.unsynced > 0
            && synced.unsynced.saturating_add(cost) > settings.unsynced_at_most(item.quota())
            && !synced.down
        {
            return (Local::Full, true);
        }
        if let Some((until, cost, refusal)) = synced.refused_until
            && until > now
            && item.cost() >= cost
            && !synced.down
        {
            let wait = Duration::from_micros(until.micros_since(now));
            let refusal = Decision::refused(
                refusal
                    .refusal()
                    .unwrap_or(crate::RefusalReason::LimitReached),
                refusal.limit(),
                0,
                refusal.reset_after().saturating_sub(refusal.retry_after()) + wait,
                wait,
            );
            let due = now.micros_since(synced.last_sync) >= micros(settings.interval());
            return (Local::Decided(ItemDecision::uncharged(refusal), None), due);
        }
        // While the copy owes a debt (the shared count did at the last sync), taken "up to" so
        // the debt is read: all of the cost, or nothing. Otherwise exactly (the fast path).
        let take = if synced.in_debt {
            Take::UpTo
        } else {
            Take::Exact
        };
        let taking = item.with_take(take);
        let batch = self.local.check_sync(std::slice::from_ref(&taking));
        let Some(answer) = batch.into_items().next() else {
            return (Local::Unknown, false);
        };
        let granted = answer.granted(&taking);
        let mut decision = *answer.decision();
        let mut receipt = answer.into_receipt(&taking);
        let allowed = granted == item.cost();
        if !allowed {
            if let Some(partial) = receipt.take() {
                self.local.refund_sync(&partial);
            }
            if decision.is_allowed() {
                decision = self.local.peek_sync(&item.with_take(Take::Exact));
            }
        }
        if !allowed && !decision.retry_after().is_zero() {
            let until = now.saturating_add_micros(micros(decision.retry_after()));
            synced.refused_until = Some((until, item.cost(), decision));
        }
        if allowed && take == Take::UpTo {
            // An up-to check on the copy is allowed only once its debt is paid.
            synced.in_debt = false;
        }
        let open_anyway = synced.down && synced.on_store_failure == OnStoreFailure::Open;
        if allowed || open_anyway {
            synced.unsynced = synced.unsynced.saturating_add(item.cost());
        }
        let due = synced.unsynced >= settings.unsynced_at_most(item.quota())
            || now.micros_since(synced.last_sync) >= micros(settings.interval());
        let decision = if open_anyway && !allowed {
            // Failing open while the store is down: let it through, and count it to push later.
            Decision::allowed(decision.limit(), 0, decision.reset_after())
        } else {
            decision
        };
        (
            Local::Decided(ItemDecision::uncharged(decision), receipt),
            due,
        )
    }

    /// Undoes a local decision (the rest of its request was refused).
    pub(crate) fn undo(&self, item: &Item<'_>, receipt: Option<Receipt>) {
        if let Some(receipt) = receipt {
            self.local.refund_sync(&receipt);
        }
        if let Some(synced) = self.table.lock().get_mut(&Lookup(item.rule(), item.key())) {
            synced.unsynced = synced.unsynced.saturating_sub(item.cost());
        }
    }

    /// The keys to push at `now`: every key with unsynced spend, and every key used lately
    /// whose view is an interval old; `only` limits it to one key (a first sync). Marks what
    /// each pushes as on its way, and forgets keys quiet for four intervals with nothing owed.
    pub(crate) fn start_push(&self, now: Timestamp, only: Option<(&RuleId, &Key)>) -> Vec<Push> {
        let mut table = self.table.lock();
        if let Some((rule, key)) = only {
            // One key (a first sync, or a gateway that spent its M): found directly.
            return match table.get_mut(&Lookup(rule, key)) {
                Some(synced) if !synced.pushing => {
                    synced.pushing = true;
                    vec![Push {
                        rule: rule.clone(),
                        key: key.clone(),
                        quota: synced.quota,
                        units: synced.unsynced,
                    }]
                }
                _ => Vec::new(),
            };
        }
        let mut quiet = Vec::new();
        let mut pushes = Vec::new();
        for ((rule, key), synced) in table.iter_mut() {
            if synced.pushing {
                continue;
            }
            let interval = micros(synced.settings.interval());
            let stale = now.micros_since(synced.last_sync) >= interval || !synced.known;
            let used_lately = now.micros_since(synced.last_use) < interval.saturating_mul(4);
            if synced.unsynced == 0 && !used_lately && synced.known {
                quiet.push((rule.clone(), key.clone()));
                continue;
            }
            if synced.unsynced > 0 || stale {
                // A key with nothing to push is refreshed (a debt item of cost 0).
                synced.pushing = true;
                pushes.push(Push {
                    rule: rule.clone(),
                    key: key.clone(),
                    quota: synced.quota,
                    units: synced.unsynced,
                });
            }
        }
        for id in quiet {
            table.remove(&id);
            self.local.reset_sync(&id.0, &id.1);
        }
        pushes
    }

    /// Applies a push's answer (`None`: the store failed, and every unit stays unsynced): each
    /// key's local copy starts again from the shared count, with what was spent here during the
    /// push on top.
    pub(crate) fn finish_push(
        &self,
        pushes: &[Push],
        answer: Option<&BatchDecision>,
        now: Timestamp,
    ) {
        let mut table = self.table.lock();
        for (index, push) in pushes.iter().enumerate() {
            let Some(synced) = table.get_mut(&Lookup(&push.rule, &push.key)) else {
                continue;
            };
            synced.pushing = false;
            let Some(shared) = answer.and_then(|batch| batch.items().get(index)) else {
                synced.down = true;
                continue;
            };
            synced.down = false;
            synced.known = true;
            synced.last_sync = now;
            synced.unsynced = synced.unsynced.saturating_sub(push.units);
            let used = push
                .quota
                .limit()
                .saturating_sub(shared.decision().remaining())
                .saturating_add(shared.debt())
                .saturating_add(synced.unsynced);
            self.local.reset_sync(&push.rule, &push.key);
            synced.refused_until = None;
            let copy = Item::new(&push.rule, push.quota, &push.key)
                .with_cost(used)
                .with_take(Take::AsDebt);
            let _ = self.local.check_sync(std::slice::from_ref(&copy));
            synced.in_debt = used > push.quota.limit();
        }
    }

    /// Units spent here and not yet in the shared count, over every key.
    pub(crate) fn unsynced(&self) -> u64 {
        self.table.lock().values().fold(0, |total: u64, synced| {
            total.saturating_add(synced.unsynced)
        })
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.table.lock().len()
    }

    /// Forgets the key (an operator's reset).
    pub(crate) fn forget(&self, rule: &RuleId, key: &Key) {
        self.table.lock().remove(&Lookup(rule, key));
        self.local.reset_sync(rule, key);
    }

    /// The error a fail-closed rule answers while the store is down.
    pub(crate) fn down_error() -> StoreError {
        StoreError::new(
            crate::StoreErrorKind::Unavailable,
            "the shared store did not take the last sync; this rule fails closed",
        )
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
