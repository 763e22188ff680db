//! The quotas one rule's states were last checked under, numbered, so each stored state names
//! its own quota in a few bits (a per-plan quota, or a quota changed by a reload, is judged by
//! its own numbers when it is swept or evicted, not by whichever quota was used last).

use crate::Quota;

/// Slots per table: a slot number fits in 10 bits (see `AtomicTat`).
pub(crate) const MAX_SLOTS: usize = 1 << 10;

/// Numbered quotas; a freed number is reused.
#[derive(Default)]
pub(crate) struct QuotaSlots {
    quotas: Vec<Option<Quota>>,
}

impl QuotaSlots {
    /// The slot holding `quota`. A linear scan: rules have one quota, or a handful of plans.
    #[inline]
    pub(crate) fn find(&self, quota: &Quota) -> Option<u16> {
        let position = self
            .quotas
            .iter()
            .position(|held| held.as_ref() == Some(quota))?;
        u16::try_from(position).ok()
    }

    /// The quota in `slot`.
    #[inline]
    pub(crate) fn get(&self, slot: u16) -> Option<&Quota> {
        self.quotas.get(usize::from(slot))?.as_ref()
    }

    /// Puts `quota` in a free slot; `None` when every slot is taken.
    pub(crate) fn insert(&mut self, quota: Quota) -> Option<u16> {
        if let Some(free) = self.quotas.iter().position(Option::is_none) {
            self.quotas[free] = Some(quota);
            return u16::try_from(free).ok();
        }
        if self.quotas.len() >= MAX_SLOTS {
            return None;
        }
        self.quotas.push(Some(quota));
        u16::try_from(self.quotas.len() - 1).ok()
    }

    /// Frees every slot `in_use` says no state names.
    pub(crate) fn release_unused(&mut self, in_use: &[bool]) {
        for (slot, quota) in self.quotas.iter_mut().enumerate() {
            if !in_use.get(slot).copied().unwrap_or(false) {
                *quota = None;
            }
        }
    }

    /// Puts `quota` in `slot` in place of the quota there (states naming the slot are read
    /// under it from now on).
    pub(crate) fn replace(&mut self, slot: u16, quota: Quota) {
        if let Some(held) = self.quotas.get_mut(usize::from(slot)) {
            *held = Some(quota);
        }
    }

    /// How many slots exist (taken or free).
    pub(crate) fn len(&self) -> usize {
        self.quotas.len()
    }
}
