//! From Envoy's descriptors to store items: the rule each descriptor matches, the caller its
//! values name, and what it costs.

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use smallvec::SmallVec;
use tollgate_core::{Item, Key, Mode, RuleId, Take};
use tollgate_tower::Rule;
use tonic::Status;

use crate::table::{Candidate, DescriptorTable};

/// One descriptor to count.
pub(crate) struct Planned<'t> {
    /// Its position in the request.
    pub(crate) at: usize,
    pub(crate) candidate: &'t Candidate,
    pub(crate) rule: &'t Rule,
    pub(crate) key: Key,
    pub(crate) cost: u64,
}

/// The descriptors of `request` that count (matched, not unlimited, not replaced by another
/// matched rule that is not a shadow rule), with their
/// keys; `INVALID_ARGUMENT` when a descriptor's values do not name a caller its rule counts.
pub(crate) fn plan<'t>(
    table: &'t DescriptorTable,
    request: &RateLimitRequest,
) -> Result<SmallVec<[Planned<'t>; 4]>, Status> {
    let matched: SmallVec<[Option<&Candidate>; 4]> = request
        .descriptors
        .iter()
        .map(|descriptor| table.resolve(&request.domain, &descriptor.entries))
        .collect();
    // A shadow rule only observes: its `replaces` drops nothing (trying a partner's rule out
    // in shadow leaves the general rule enforcing).
    let replaced: SmallVec<[&RuleId; 4]> = matched
        .iter()
        .flatten()
        .filter(|candidate| {
            (candidate.rule.as_ref()).is_none_or(|rule| rule.store_mode() != Mode::Shadow)
        })
        .flat_map(|candidate| candidate.matcher.replaces())
        .collect();
    // Envoy's request `hits_addend`: 0 (unset) counts as 1.
    let request_hits = u64::from(request.hits_addend.max(1));
    let mut planned = SmallVec::new();
    for (at, (descriptor, candidate)) in request.descriptors.iter().zip(&matched).enumerate() {
        let Some(candidate) = candidate else { continue };
        let Some(rule) = &candidate.rule else {
            continue;
        }; // unlimited
        if replaced.contains(&&candidate.id) {
            continue;
        }
        let values: SmallVec<[&str; 4]> = candidate
            .matcher
            .key_values(descriptor.entries.iter().map(|entry| entry.value.as_str()))
            .collect();
        // A value that names no caller (an address entry's value that is no address, sent by
        // a client in a header): counted, all such values of the rule together under one key,
        // so the request is still decided whole — garbage never unlimits its other
        // descriptors, and rotating garbage never earns a fresh count.
        let key = rule.key_of_values(&values).unwrap_or_else(|error| {
            tracing::debug!(target: "tollgate::envoy", rule = candidate.id.as_str(), %error, "a descriptor names no caller: counted as an unreadable one");
            unreadable_key()
        });
        // A descriptor's own `hits_addend`, even 0 (checked, not counted), else the request's.
        let cost = descriptor
            .hits_addend
            .as_ref()
            .map_or(request_hits, |hits| hits.value);
        planned.push(Planned {
            at,
            candidate,
            rule,
            key,
            cost,
        });
    }
    Ok(planned)
}

/// The one key a rule counts every unreadable caller under: a part no value can produce (an
/// extractor's parts are values or address blocks, never a NUL-led tag).
fn unreadable_key() -> Key {
    Key::from_parts(&[b"\0unreadable".as_slice()])
}

impl Planned<'_> {
    /// The store item: the rule's quota, policies and fleet modes, at this descriptor's cost.
    pub(crate) fn item(&self) -> Item<'_> {
        Item::new(&self.candidate.id, *self.rule.quota(), &self.key)
            .with_cost(self.cost)
            .with_mode(self.rule.store_mode())
            .with_store_failure(self.rule.on_store_failure())
            .with_fleet_modes(self.rule.fleet_modes())
            .with_take(Take::Exact)
    }
}
