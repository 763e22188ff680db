//! From a request to the store call: which rules apply, with which keys and costs.

use http::StatusCode;
use http::request::Parts;
use smallvec::SmallVec;
use tollgate_core::{Counting, FleetModes, Item, Key, Quota, Take};

use crate::rules::escalation::Escalated;
use crate::rules::missing_key::MissingKey;
use crate::rules::registry::QuotaRegistry;
use crate::rules::rule::Rule;
use crate::rules::rule_set::{RuleRef, RuleSet};

/// One rule's part of a request.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    pub(crate) rule: RuleRef,
    pub(crate) key: Key,
    pub(crate) cost: u64,
    /// The rule's live quota: the registry's entry, else the rule's own.
    pub(crate) quota: Quota,
}

/// The rules that apply to one request, with their keys: everything the store call needs, owned,
/// so it can cross an `.await` for remote stores.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) entries: SmallVec<[Planned; 4]>,
    /// The rules that charge each inbound message ([`Rule::per_message`]) after the first,
    /// which the call pays with its other rules when it opens.
    pub(crate) messages: Vec<Planned>,
    /// The response stream such a call ends early when a message is refused.
    pub(crate) cut: Option<std::sync::Arc<crate::pipeline::cut::StreamCut>>,
}

/// A rule stopped the request before any counting.
#[derive(Debug)]
pub(crate) enum Unplanned {
    /// Its key was missing and it says to refuse such requests with `status`.
    MissingKey {
        status: StatusCode,
        rule: tollgate_core::RuleId,
    },
    /// Its key cannot be found because of how the service is deployed (already logged).
    Misconfigured,
}

impl Plan {
    /// Plans `request` against `rules`, inserting the matched route pattern (if any) into its
    /// extensions first so key extractors can count per route.
    pub(crate) fn new(
        rules: &RuleSet,
        registry: Option<&QuotaRegistry>,
        request: &mut Parts,
    ) -> Result<Plan, Unplanned> {
        let mut matched: SmallVec<[RuleRef; 4]> = SmallVec::new();
        if let Some(pattern) = rules.matching(request, |rule| matched.push(rule)) {
            request.extensions.insert(pattern);
        }
        let mut plan = Plan::default();
        for at in matched {
            let Some(rule) = rules.get(at) else { continue };
            if let Some(unsupported) = rules.unsupported(at) {
                // The layer's store cannot count the rule as it asks: loud, never counted
                // another way without a word.
                let enforcing = rule.can_refuse();
                rule.notices.misconfigured(&rule.id, unsupported, enforcing);
                if enforcing {
                    return Err(Unplanned::Misconfigured);
                }
                continue;
            }
            let mut key = Key::builder();
            if rule.key.extract(request, &mut key) {
                let key = key.build();
                let quota = rule
                    .overrides
                    .as_ref()
                    .and_then(|overrides| overrides.resolve(&key, request))
                    .unwrap_or_else(|| {
                        registry.map_or(rule.quota, |live| live.get(&rule.id).unwrap_or(rule.quota))
                    });
                let planned = Planned {
                    rule: at,
                    key,
                    cost: rule.cost_of(request),
                    quota,
                };
                // A per-message rule charges a call's first message when it opens (a call that
                // sends none, or a handler that never reads, still pays once) and each further
                // one as it arrives, whatever the content-type says: tonic serves a path
                // without looking at it, so neither does the count.
                if rule.is_per_message() {
                    plan.messages.push(planned.clone());
                }
                plan.entries.push(planned);
            } else {
                without_key(rule, request)?;
            }
        }
        Ok(plan)
    }

    /// The store items: the rules' own, in plan order, then one read-only item per enforcing
    /// escalating rule reading its caller's block, so the block is read in the same store call
    /// (see [`gated_rule`](Plan::gated_rule)). Rules that flag instead of refusing go as shadow
    /// items: they must never stop the request, and are charged only when it goes ahead.
    pub(crate) fn items<'a>(
        &'a self,
        rules: &'a RuleSet,
        gateway: Option<u32>,
    ) -> SmallVec<[Item<'a>; 4]> {
        let own = self.rules(rules).map(|(planned, rule)| {
            // A settled rule's cost is an estimate, at least 1, taken once the caller's debt is
            // paid.
            let item = planned.item(rule, gateway);
            if rule.settles() {
                item.with_cost(planned.cost.max(1))
                    .with_take(Take::AfterDebt)
            } else {
                item
            }
        });
        let blocks = self.escalating(rules).map(|(_, planned, rule, escalated)| {
            escalated
                .block_gate(&planned.key, rule.on_store_failure)
                .with_fleet_modes(FleetModes::new().with_store(rule.store.as_deref()))
        });
        own.chain(blocks).collect()
    }

    /// The plan position of the rule whose block the item at `position` of
    /// [`items`](Plan::items) reads; `None` for the rules' own items.
    pub(crate) fn gated_rule(&self, rules: &RuleSet, position: usize) -> Option<usize> {
        let gate = position.checked_sub(self.rules(rules).count())?;
        self.escalating(rules).nth(gate).map(|(at, ..)| at)
    }

    /// The enforcing escalating rules of the plan, with their plan positions.
    fn escalating<'a>(
        &'a self,
        rules: &'a RuleSet,
    ) -> impl Iterator<Item = (usize, &'a Planned, &'a Rule, &'a Escalated)> {
        self.rules(rules)
            .enumerate()
            .filter(|(_, (_, rule))| rule.can_refuse())
            .filter_map(|(at, (planned, rule))| {
                Some((at, planned, rule, rule.escalation.as_ref()?))
            })
    }

    /// The rules of the plan, in order (every entry's rule exists in `rules`).
    pub(crate) fn rules<'a>(
        &'a self,
        rules: &'a RuleSet,
    ) -> impl Iterator<Item = (&'a Planned, &'a Rule)> {
        self.entries
            .iter()
            .filter_map(move |planned| Some((planned, rules.get(planned.rule)?)))
    }
}

impl Planned {
    /// The store item of `rule` (this entry's), taken exactly at the entry's cost; `gateway`
    /// is this gateway's index among a split rule's gateways.
    pub(crate) fn item<'a>(&'a self, rule: &'a Rule, gateway: Option<u32>) -> Item<'a> {
        let modes = rule.fleet_modes();
        let modes = match (modes.counting(), gateway) {
            (Counting::Split(split), Some(index)) => {
                modes.with_counting(Counting::Split(split.gateway(index)))
            }
            _ => modes,
        };
        Item::new(&rule.id, self.quota, &self.key)
            .with_cost(self.cost)
            .with_mode(rule.store_mode())
            .with_store_failure(rule.on_store_failure)
            .with_fleet_modes(modes)
            .with_take(Take::Exact)
    }
}

/// A request `rule` found no key in: skip the rule for it, or stop the request. Only an
/// enforcing rule stops one; shadow and flag rules never do.
fn without_key(rule: &Rule, request: &Parts) -> Result<(), Unplanned> {
    if rule.on_missing_key != MissingKey::SkipAlways
        && let Some(why) = rule.key.misconfiguration(request)
    {
        let enforcing = rule.can_refuse();
        rule.notices.misconfigured(&rule.id, &why, enforcing);
        return if enforcing {
            Err(Unplanned::Misconfigured)
        } else {
            Ok(())
        };
    }
    match rule.on_missing_key {
        MissingKey::Refuse(status) if rule.can_refuse() => Err(Unplanned::MissingKey {
            status,
            rule: rule.id.clone(),
        }),
        _ => {
            rule.notices.skipped_without_key(&rule.id);
            Ok(())
        }
    }
}
