//! Local-then-sync: decisions on a local copy of each key's state, the spend pushed to the shared
//! count as debt in one batch per gateway, the shared count brought back on the same call.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;

use super::table::{ByKey, Lookup, entry};

use tollgate_core::store_kit::LocalKit;
use tollgate_core::{
    BatchDecision, Clock, Decision, Item, ItemDecision, Key, MemoryStore, OnStoreFailure, Quota,
    Receipt, RuleId, StoreError, SyncSettings, Take, Timestamp,
};

/// The most keys one gateway syncs at once: past it, keys with nothing unsynced are forgotten.
const MAX_KEYS: usize = 1 << 16;

/// Every synced key of this gateway, the local copies decisions are made on, and what this
/// gateway has learnt of the fleet that syncs each rule.
pub(crate) struct Syncs<C: Clock> {
    table: Mutex<ByKey<Synced>>,
    local: MemoryStore<C>,
    fleets: Mutex<HashMap<RuleId, Fleet>>,
}

/// How many gateways sync one rule, as the shared store's per-rule counter of gateways says:
/// each gateway adds itself once per window of the counter and reads it on every push.
struct Fleet {
    /// When this gateway first counted itself in: the fleet is known from a read two intervals
    /// later (every gateway with keys in use pushes at least once an interval, so by then each
    /// has counted itself).
    first_counted: Timestamp,
    /// When the counter was last read.
    last_read: Timestamp,
    /// The window this gateway last counted itself in.
    counted_in: u64,
    /// The counter's value in the latest window read, and in the one before.
    seen: u64,
    seen_before: u64,
    seen_window: u64,
    /// The limit of the rule as last pushed (to say whether it is counted
    /// exactly).
    limit: u64,
    settings: SyncSettings,
}

impl Fleet {
    /// A fleet about to be learned from `now`, in the counter's window `window`.
    fn learning(now: Timestamp, window: u64, limit: u64, settings: SyncSettings) -> Self {
        Fleet {
            first_counted: now,
            last_read: now,
            counted_in: u64::MAX,
            seen: 0,
            seen_before: 0,
            seen_window: window,
            limit,
            settings,
        }
    }

    /// The gateways syncing the rule at `now`, once known: from a read two intervals after this
    /// gateway first counted itself, and no longer once the last read is two of the counter's
    /// windows old (a rule counted exactly pushes nothing, so it learns the fleet again, one
    /// unit per push, as the fleet may have shrunk).
    fn gateways(&self, now: Timestamp) -> Option<u64> {
        let interval = micros(self.settings.interval());
        let learnt = self.last_read >= self.first_counted.saturating_add_micros(2 * interval);
        let window = micros(self.settings.presence_window());
        let fresh = now.micros_since(self.last_read) <= window.saturating_mul(2);
        (learnt && fresh).then(|| self.seen.max(self.seen_before).max(1))
    }
}

/// One rule's entry in a push: count this gateway in the rule's counter of gateways (`cost` 1,
/// once a window) or read it (`cost` 0).
pub(crate) struct Presence {
    pub(crate) rule: RuleId,
    pub(crate) quota: Quota,
    pub(crate) cost: u64,
    window: u64,
}

/// The key of a rule's counter of gateways.
pub(crate) fn presence_key() -> Key {
    tollgate_core::store_kit::reserved_key("gateways")
}

/// The counter's quota: a fixed window that never refuses.
fn presence_quota(settings: &SyncSettings) -> Option<Quota> {
    Quota::fixed_window(1 << 40, settings.presence_window()).ok()
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
    /// When a push of this key last went out: while the store is down, one attempt an
    /// interval (a push that timed out may still land once the store answers, so each extra
    /// attempt could count its units twice).
    attempted: Timestamp,
    last_use: Timestamp,
}

impl Synced {
    /// What a push carries: the unsynced spend, or nothing while the store is down (a push that
    /// failed may still land once the store answers, so until one answers, pushes only ask —
    /// the spend goes once it has, and the count comes out stricter by one push at most; a
    /// store that declines calls started after their deadline, as Redis does, never lets a push
    /// held up before it ran land late, and a push whose caller stops waiting runs on to its
    /// answer, so only a push whose answer alone was lost counts twice).
    fn units_to_push(&self) -> u64 {
        if self.down { 0 } else { self.unsynced }
    }

    /// Whether a push of this key may go out at `now`.
    fn may_push(&self, now: Timestamp) -> bool {
        // A last attempt after `now` is a clock that stepped back: it holds nothing up.
        !self.pushing
            && (!self.down
                || self.attempted > now
                || now.micros_since(self.attempted) >= micros(self.settings.interval()))
    }
}

/// What a local decision found.
#[allow(
    clippy::large_enum_variant,
    reason = "returned by value on the synced check's hot path and matched at once; boxing the \
              decision would allocate on every check"
)]
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
    settings: SyncSettings,
}

impl<C: Clock + Clone> Syncs<C> {
    pub(crate) fn new(clock: C) -> Self {
        Syncs {
            table: Mutex::new(ByKey::default()),
            local: MemoryStore::builder().clock(clock).build(),
            fleets: Mutex::new(HashMap::new()),
        }
    }

    /// M for `item` under `settings` at `now` (`None`: counted exactly), from what this
    /// gateway knows of the rule's fleet.
    fn unsynced_at_most(
        &self,
        item: &Item<'_>,
        settings: SyncSettings,
        now: Timestamp,
    ) -> Option<u64> {
        let gateways = self
            .fleets
            .lock()
            .get(item.rule())
            .and_then(|fleet| fleet.gateways(now));
        settings.unsynced_at_most(item.quota(), gateways)
    }

    /// Whether `item` is counted exactly at `now`: the fleet syncing its rule is too large for
    /// its limit to keep the over-admission within a tenth of it, or the item costs more than
    /// M (a gateway admitting it whole on its copy could overshoot by its cost).
    pub(crate) fn counts_exactly(
        &self,
        item: &Item<'_>,
        settings: SyncSettings,
        now: Timestamp,
    ) -> bool {
        // A cost the quota can never allow is refused here as such, whatever M.
        self.unsynced_at_most(item, settings, now)
            .is_none_or(|most| item.cost() > most && item.cost() <= item.quota().limit())
    }

    /// The rules counted exactly at `now`, with how many gateways sync each.
    pub(crate) fn counted_exactly(&self, now: Timestamp) -> Vec<(RuleId, u64)> {
        self.fleets
            .lock()
            .iter()
            .filter_map(|(rule, fleet)| {
                let gateways = fleet.gateways(now)?;
                let probe = Quota::fixed_window(fleet.limit.max(1), Duration::from_secs(1)).ok()?;
                fleet
                    .settings
                    .unsynced_at_most(&probe, Some(gateways))
                    .is_none()
                    .then(|| (rule.clone(), gateways))
            })
            .collect()
    }

    /// The entries a push of `pushes` carries for the rules' counters of gateways, at `now`.
    pub(crate) fn presence(&self, pushes: &[Push], now: Timestamp) -> Vec<Presence> {
        let mut fleets = self.fleets.lock();
        let mut entries: Vec<Presence> = Vec::new();
        for push in pushes {
            if entries.iter().any(|entry| entry.rule == push.rule) {
                continue;
            }
            let Some(quota) = presence_quota(&push.settings) else {
                continue;
            };
            let window =
                now.micros_since(Timestamp::EPOCH) / micros(push.settings.presence_window()).max(1);
            let fleet = fleets
                .entry(push.rule.clone())
                .or_insert_with(|| Fleet::learning(now, window, push.quota.limit(), push.settings));
            fleet.settings = push.settings;
            fleet.limit = push.quota.limit();
            let window_micros = micros(push.settings.presence_window());
            if now.micros_since(fleet.last_read) > window_micros.saturating_mul(2) {
                // Quiet here for two windows: the fleet may have changed, learn it again.
                *fleet = Fleet::learning(now, window, push.quota.limit(), push.settings);
            }
            let cost = u64::from(fleet.counted_in != window);
            fleet.counted_in = window;
            entries.push(Presence {
                rule: push.rule.clone(),
                quota,
                cost,
                window,
            });
        }
        entries
    }

    /// What the store answered at `now` for a rule's counter of gateways (`count`: gateways
    /// counted in its window so far).
    pub(crate) fn saw_presence(&self, entry: &Presence, count: u64, now: Timestamp) {
        if let Some(fleet) = self.fleets.lock().get_mut(&entry.rule) {
            fleet.last_read = fleet.last_read.max(now);
            if entry.window > fleet.seen_window {
                fleet.seen_before = if entry.window == fleet.seen_window + 1 {
                    fleet.seen
                } else {
                    0
                };
                fleet.seen = 0;
                fleet.seen_window = entry.window;
            }
            if entry.window == fleet.seen_window {
                fleet.seen = fleet.seen.max(count);
            }
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
            attempted: Timestamp::EPOCH,
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
        let most = self.unsynced_at_most(item, settings, now).unwrap_or(1);
        if synced.unsynced > 0 && synced.unsynced.saturating_add(cost) > most && !synced.down {
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
                    .unwrap_or(tollgate_core::RefusalReason::LimitReached),
                refusal.limit(),
                0,
                refusal.reset_after().saturating_sub(refusal.retry_after()) + wait,
                wait,
            );
            let due = now.micros_since(synced.last_sync) >= micros(settings.interval())
                && synced.may_push(now);
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
        let due = (synced.unsynced >= most
            || now.micros_since(synced.last_sync) >= micros(settings.interval()))
            && synced.may_push(now);
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
    /// whose view is an interval old; `only` limits it to one key that a check of that cost
    /// needs pushed (a first sync, or a gateway that spent its M) — nothing if another check's
    /// push has done it meanwhile, so a cold key costs one push, not one per task. Marks what
    /// each pushes as on its way, and forgets keys quiet for four intervals with nothing owed.
    pub(crate) fn start_push(&self, now: Timestamp, only: Option<&Item<'_>>) -> Vec<Push> {
        if let Some(item) = only {
            let most = self.unsynced_at_most(item, item_settings(item), now);
            let mut table = self.table.lock();
            // One key (a first sync, or a gateway that spent its M): found directly.
            return match table.get_mut(&Lookup(item.rule(), item.key())) {
                Some(synced)
                    if synced.may_push(now)
                        && (!synced.known
                            || synced.unsynced.saturating_add(item.cost()) > most.unwrap_or(1)) =>
                {
                    synced.pushing = true;
                    synced.attempted = now;
                    vec![Push {
                        rule: item.rule().clone(),
                        key: item.key().clone(),
                        quota: synced.quota,
                        units: synced.units_to_push(),
                        settings: synced.settings,
                    }]
                }
                _ => Vec::new(),
            };
        }
        let mut table = self.table.lock();
        let mut quiet = Vec::new();
        let mut pushes = Vec::new();
        for ((rule, key), synced) in table.iter_mut() {
            if !synced.may_push(now) {
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
                synced.attempted = now;
                pushes.push(Push {
                    rule: rule.clone(),
                    key: key.clone(),
                    quota: synced.quota,
                    units: synced.units_to_push(),
                    settings: synced.settings,
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
    /// push on top. `sent`: when the push was sent (a fixed window the answer counted in that
    /// has ended by `now` brings nothing over to the next).
    pub(crate) fn finish_push(
        &self,
        pushes: &[Push],
        answer: Option<&BatchDecision>,
        sent: Timestamp,
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
            let window_over = push.quota.algorithm() == tollgate_core::Algorithm::FixedWindow
                && sent.saturating_add_micros(micros(shared.decision().reset_after())) <= now;
            let shared_used = if window_over {
                0
            } else {
                push.quota
                    .limit()
                    .saturating_sub(shared.decision().remaining())
                    .saturating_add(shared.debt())
            };
            let used = shared_used.saturating_add(synced.unsynced);
            self.local.reset_sync(&push.rule, &push.key);
            synced.refused_until = None;
            let copy = Item::new(&push.rule, push.quota, &push.key)
                .with_cost(used)
                .with_take(Take::AsDebt);
            let _ = self.local.check_sync(std::slice::from_ref(&copy));
            synced.in_debt = used > push.quota.limit();
        }
    }

    /// Ends pushes that will not be answered (the check running them stopped waiting, which
    /// happens only without a runtime to run them on): their units stay unsynced and the keys
    /// may be pushed again.
    pub(crate) fn abandon(&self, pushes: &[Push]) {
        let mut table = self.table.lock();
        for push in pushes {
            if let Some(synced) = table.get_mut(&Lookup(&push.rule, &push.key)) {
                synced.pushing = false;
            }
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
            tollgate_core::StoreErrorKind::Unavailable,
            "the shared store did not take the last sync; this rule fails closed",
        )
    }
}

/// The sync settings `item` asks for (the defaults if it is not synced).
fn item_settings(item: &Item<'_>) -> SyncSettings {
    match item.counting() {
        tollgate_core::Counting::Sync(settings) => settings,
        tollgate_core::Counting::Exact
        | tollgate_core::Counting::Lease(_)
        | tollgate_core::Counting::Split(_) => SyncSettings::new(),
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
