//! A sliding hour of Space-Saving summaries: twelve five-minute slices, the oldest dropped as
//! time moves on, merged when asked.

use std::collections::HashMap;
use std::time::Duration;

use tollgate_core::Key;

use super::space_saving::{Estimate, SpaceSaving};

/// How many slices make the window, and how long each lasts.
pub(crate) const SLICES: usize = 12;
pub(crate) const SLICE: Duration = Duration::from_secs(5 * 60);

/// One rule's last hour of refusals.
#[derive(Debug)]
pub(crate) struct Window {
    k: usize,
    /// Each slot's slice number (time / slice length) and its summary.
    slots: Vec<Option<(u64, SpaceSaving)>>,
}

/// What the window says about its heaviest callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Merged {
    /// Callers by estimated count, highest first.
    pub(crate) top: Vec<(Key, Estimate)>,
    /// Refusals counted in the window.
    pub(crate) samples: u64,
    /// The most refusals a caller not in `top` may have had in the window: the smallest listed
    /// count when the list was cut, or the slices' floors added up.
    pub(crate) unlisted: u64,
}

impl Window {
    pub(crate) fn new(k: usize) -> Window {
        Window {
            k,
            slots: (0..SLICES).map(|_| None).collect(),
        }
    }

    /// Counts a refusal of `key` at `now_micros`.
    pub(crate) fn add(&mut self, key: &Key, now_micros: u64) {
        let slice = now_micros / slice_micros();
        let slot = &mut self.slots[(slice % SLICES as u64) as usize];
        match slot {
            Some((held, summary)) if *held == slice => summary.add(key),
            _ => {
                let mut summary = SpaceSaving::new(self.k);
                summary.add(key);
                *slot = Some((slice, summary));
            }
        }
    }

    /// The `n` heaviest callers of the last hour at `now_micros`. A caller's count and error add
    /// its count and error in each slice where it holds a counter and, where it does not, the
    /// most it could have had there (the slice's floor): the count is never below the true
    /// count, and at most the error above it.
    pub(crate) fn top(&self, n: usize, now_micros: u64) -> Merged {
        let current = now_micros / slice_micros();
        let in_window: Vec<&SpaceSaving> = self
            .slots
            .iter()
            .flatten()
            .filter(|(slice, _)| *slice + SLICES as u64 > current && *slice <= current)
            .map(|(_, summary)| summary)
            .collect();
        let mut merged: HashMap<&Key, Estimate> = HashMap::new();
        for summary in &in_window {
            for (key, estimate) in summary.estimates() {
                let entry = merged.entry(key).or_insert(Estimate { count: 0, error: 0 });
                entry.count += estimate.count;
                entry.error += estimate.error;
            }
        }
        let mut top: Vec<(Key, Estimate)> = merged
            .into_iter()
            .map(|(key, mut estimate)| {
                for summary in &in_window {
                    if !summary.holds(key) {
                        estimate.count += summary.floor();
                        estimate.error += summary.floor();
                    }
                }
                (key.clone(), estimate)
            })
            .collect();
        top.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(&b.0)));
        let floors: u64 = in_window.iter().map(|summary| summary.floor()).sum();
        let cut = if top.len() > n {
            top.get(n.saturating_sub(1))
                .map_or(0, |(_, estimate)| estimate.count)
        } else {
            0
        };
        top.truncate(n);
        Merged {
            top,
            samples: in_window.iter().map(|summary| summary.samples()).sum(),
            unlisted: floors.max(cut),
        }
    }

    /// Keys held across slices (bounded by k × slices).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.slots
            .iter()
            .flatten()
            .map(|(_, summary)| summary.len())
            .sum()
    }
}

fn slice_micros() -> u64 {
    SLICE.as_micros() as u64
}
