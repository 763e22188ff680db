//! The top refused callers of each rule over the last hour, counted off the request path.
//!
//! Each refusal (and shadow refusal) of a rule is offered to a bounded channel; a thread of its
//! own counts them into the rule's sliding hour (twelve five-minute slices, each a Space-Saving
//! summary of `k` counters), so memory per rule is fixed however many callers there are. A
//! request never waits: when the channel is full the sample is dropped and counted
//! ([`TopRefusedReport::dropped`]).
//!
//! **Error bound.** Within one slice of `n` refusals, each reported count is at least the
//! caller's true count and at most `n / k` above it, and every caller refused more than `n / k`
//! times is listed. Over the hour the bounds add up: a caller's count is at most
//! [`TopCaller::error`] above its true count (the sum of its per-slice errors, and of each
//! slice's smallest count where it holds no counter), which is at most `N / k` for `N` refusals
//! in the window.

mod space_saving;
mod window;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use tollgate_core::{Key, RuleId};

use self::window::Window;
use crate::observe::key_logging::KeyLogging;

/// The most counters per rule and slice (a larger `k` is taken as this): memory per rule is
/// `k` × 12 slices × a key.
pub(crate) const MAX_TOP_K: usize = 10_000;

/// How many refusals may wait for the counting thread before new ones are dropped.
const CHANNEL: usize = 4096;

/// One refusal on its way to be counted.
struct Sample {
    rule: RuleId,
    key: Key,
    at_micros: u64,
}

/// The counting side: the channel's sender, what was dropped, and the windows the thread fills.
pub(crate) struct TopRefused {
    sender: SyncSender<Sample>,
    dropped: AtomicU64,
    windows: Arc<Mutex<HashMap<RuleId, Window>>>,
}

/// A rule's top refused callers over the last hour.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopRefusedReport {
    /// The rule.
    pub rule: RuleId,
    /// The heaviest callers, highest count first, as the layer's [`KeyLogging`] shows keys
    /// (keyed fingerprints by default).
    pub callers: Vec<TopCaller>,
    /// Refusals of the rule counted in the window.
    pub refusals: u64,
    /// Refusals of every rule dropped because the counting thread fell behind (since start).
    pub dropped: u64,
    /// The most refusals a caller not listed may have had in the window (what merging lists
    /// from several gateways must allow for).
    pub unlisted: u64,
}

/// One refused caller.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopCaller {
    /// The caller, as the layer's [`KeyLogging`] shows keys.
    pub caller: String,
    /// Refusals counted for it in the window: at least its true count.
    pub count: u64,
    /// How far `count` may be above the true count.
    pub error: u64,
}

impl TopRefused {
    /// Starts the counting thread, with `k` counters per rule and slice (1 to [`MAX_TOP_K`]).
    pub(crate) fn start(k: usize) -> TopRefused {
        let k = k.clamp(1, MAX_TOP_K);
        let (sender, receiver) = sync_channel(CHANNEL);
        let windows = Arc::new(Mutex::new(HashMap::new()));
        let filled = Arc::clone(&windows);
        // The thread ends when the layer (the sender) is gone.
        let _ = std::thread::Builder::new()
            .name("tollgate-top-refused".to_owned())
            .spawn(move || count(&receiver, &filled, k));
        TopRefused {
            sender,
            dropped: AtomicU64::new(0),
            windows,
        }
    }

    /// Offers a refusal of `key` by `rule`; never waits.
    pub(crate) fn offer(&self, rule: &RuleId, key: &Key) {
        let sample = Sample {
            rule: rule.clone(),
            key: key.clone(),
            at_micros: now_micros(),
        };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.sender.try_send(sample)
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The rules with refusals counted (in the last hour or before).
    pub(crate) fn rules(&self) -> Vec<RuleId> {
        let windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        let mut rules: Vec<RuleId> = windows.keys().cloned().collect();
        rules.sort();
        rules
    }

    /// `rule`'s `n` heaviest callers now, keys shown as `logging` says.
    pub(crate) fn report(&self, rule: &RuleId, n: usize, logging: KeyLogging) -> TopRefusedReport {
        let windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        let merged = windows.get(rule).map(|window| window.top(n, now_micros()));
        TopRefusedReport {
            rule: rule.clone(),
            callers: merged
                .as_ref()
                .map(|merged| {
                    merged
                        .top
                        .iter()
                        .map(|(key, estimate)| TopCaller {
                            caller: logging.show(key),
                            count: estimate.count,
                            error: estimate.error,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            refusals: merged.as_ref().map_or(0, |merged| merged.samples),
            dropped: self.dropped.load(Ordering::Relaxed),
            unlisted: merged.map_or(0, |merged| merged.unlisted),
        }
    }
}

/// One rule's feed into the top refused callers.
pub(crate) struct RuleTop {
    pub(crate) rule: RuleId,
    pub(crate) top: Arc<TopRefused>,
}

impl super::RuleObserver for RuleTop {
    fn refused(
        &self,
        key: &Key,
        _decision: &tollgate_core::Decision,
        _enforced: bool,
        _logging: KeyLogging,
    ) {
        self.top.offer(&self.rule, key);
    }
}

impl std::fmt::Debug for TopRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopRefused")
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// How long the counting thread lets samples gather after a batch: waking it for each refusal
/// cost a fifth of the throughput of a server refusing 90 % of 60 k requests a second (measured,
/// BENCHMARKS.md); batches keep it to a few wake-ups a second. The channel holds 4,096 samples,
/// so up to about 160 k refusals a second are counted before any is dropped.
const GATHER: std::time::Duration = std::time::Duration::from_millis(25);

/// The counting thread: every sample into its rule's window, until the sender is gone.
fn count(receiver: &Receiver<Sample>, windows: &Mutex<HashMap<RuleId, Window>>, k: usize) {
    while let Ok(sample) = receiver.recv() {
        std::thread::sleep(GATHER);
        let mut windows = windows.lock().unwrap_or_else(PoisonError::into_inner);
        windows
            .entry(sample.rule)
            .or_insert_with(|| Window::new(k))
            .add(&sample.key, sample.at_micros);
        // Take whatever else is waiting under the same lock.
        while let Ok(sample) = receiver.try_recv() {
            windows
                .entry(sample.rule)
                .or_insert_with(|| Window::new(k))
                .add(&sample.key, sample.at_micros);
        }
    }
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests;
