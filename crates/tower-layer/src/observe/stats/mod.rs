//! Each rule's decisions counted in the layer itself, for an admin API or status page: since
//! tracking began, and per minute over the last hour ([`RateLimitLayer::track_stats`](crate::RateLimitLayer::track_stats)).
//!
//! Counters live per rule id in the layer, so a reload that keeps a rule keeps its counts; a
//! rule taken out and put back later counts afresh. While the store fails, a request is counted
//! as its rule's failure policy answers it: allowed when the rule fails open, refused when it
//! fails closed. Typed limits in handlers are not counted here.
//! Recording is a few relaxed atomic operations per rule a request meets, and nothing at all
//! until tracking is turned on.

mod minutes;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use tollgate_core::{Clock, Decision, RuleId, SystemClock};

use super::RuleObserver;

use self::minutes::{MINUTES, MinuteCounts};

/// Decisions of one kind each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests the rule allowed.
    pub allowed: u64,
    /// Requests the rule refused (enforcing).
    pub refused: u64,
    /// Requests a shadow rule would have refused (let through).
    pub shadow_refused: u64,
}

impl Counts {
    /// Every decision counted.
    pub fn checks(&self) -> u64 {
        self.allowed
            .saturating_add(self.refused)
            .saturating_add(self.shadow_refused)
    }

    fn add(&mut self, other: Counts) {
        self.allowed = self.allowed.saturating_add(other.allowed);
        self.refused = self.refused.saturating_add(other.refused);
        self.shadow_refused = self.shadow_refused.saturating_add(other.shadow_refused);
    }
}

/// One rule's counts: [`LayerHandle::stats`](crate::LayerHandle::stats).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuleStats {
    /// Since tracking began (or the rule was first counted).
    pub since_start: Counts,
    /// The current minute and the four before it.
    pub last_5_minutes: Counts,
    /// The current minute and the 59 before it.
    pub last_hour: Counts,
    /// The last 60 minutes, oldest first, the current (partial) minute last.
    pub per_minute: Vec<Counts>,
}

/// The counters of one rule id.
#[derive(Debug, Default)]
pub(crate) struct RuleCounters {
    totals: [AtomicU64; 3],
    minutes: [MinuteCounts; 3],
}

const ALLOWED: usize = 0;
const REFUSED: usize = 1;
const SHADOW_REFUSED: usize = 2;

impl RuleCounters {
    /// Counts the rule's own decision for one request (`enforcing`: a refusal stops it).
    pub(crate) fn record(&self, decision: &Decision, enforcing: bool) {
        self.record_outcome(decision.is_allowed(), enforcing);
    }

    /// Counts one request the rule allowed or refused (`enforcing`: a refusal stops it).
    pub(crate) fn record_outcome(&self, allowed: bool, enforcing: bool) {
        let kind = match (allowed, enforcing) {
            (true, _) => ALLOWED,
            (false, true) => REFUSED,
            (false, false) => SHADOW_REFUSED,
        };
        self.totals[kind].fetch_add(1, Ordering::Relaxed);
        self.minutes[kind].add(current_minute());
    }

    fn report(&self, now: u64) -> RuleStats {
        let read = |kind: usize| self.minutes[kind].last(now, MINUTES);
        let (allowed, refused, shadow) = (read(ALLOWED), read(REFUSED), read(SHADOW_REFUSED));
        let per_minute: Vec<Counts> = (0..MINUTES)
            .map(|at| Counts {
                allowed: allowed[at],
                refused: refused[at],
                shadow_refused: shadow[at],
            })
            .collect();
        let sum = |minutes: &[Counts]| {
            minutes.iter().fold(Counts::default(), |mut sum, counts| {
                sum.add(*counts);
                sum
            })
        };
        RuleStats {
            since_start: Counts {
                allowed: self.totals[ALLOWED].load(Ordering::Relaxed),
                refused: self.totals[REFUSED].load(Ordering::Relaxed),
                shadow_refused: self.totals[SHADOW_REFUSED].load(Ordering::Relaxed),
            },
            last_5_minutes: sum(&per_minute[MINUTES - 5..]),
            last_hour: sum(&per_minute),
            per_minute,
        }
    }
}

/// Every installed rule's counters by id. The book holds them weakly: the installed rule sets
/// own them, so a reload that keeps a rule keeps its counts (the new set takes them while the
/// old one still holds them), and a rule no installed set has any more is forgotten — re-added
/// later, it counts afresh.
impl RuleObserver for RuleCounters {
    fn decided(&self, decision: &Decision, enforcing: bool, _refused_locally: bool) {
        self.record(decision, enforcing);
    }

    fn store_failed(&self, let_through: bool, enforcing: bool) {
        self.record_outcome(let_through, enforcing);
    }
}

#[derive(Debug, Default)]
pub(crate) struct StatsBook {
    rules: Mutex<HashMap<RuleId, Weak<RuleCounters>>>,
}

impl StatsBook {
    /// The counters of `rule`, made on first use (when a rule set is installed).
    pub(crate) fn counters(&self, rule: &RuleId) -> Arc<RuleCounters> {
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        rules.retain(|_, counters| counters.strong_count() > 0);
        if let Some(counters) = rules.get(rule).and_then(Weak::upgrade) {
            return counters;
        }
        let counters = Arc::new(RuleCounters::default());
        rules.insert(rule.clone(), Arc::downgrade(&counters));
        counters
    }

    /// `rule`'s counts now, if a rule set installed while tracking has it.
    pub(crate) fn report(&self, rule: &RuleId) -> Option<RuleStats> {
        let counters = {
            let rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
            rules.get(rule)?.upgrade()?
        };
        Some(counters.report(current_minute()))
    }
}

/// The minute now, since the Unix epoch. Read once per rule of every counted request, so from
/// the in-memory store's clock (a counter read, set to the wall clock once) rather than the
/// system's (a `clock_gettime` each time).
fn current_minute() -> u64 {
    static CLOCK: LazyLock<SystemClock> = LazyLock::new(SystemClock::new);
    CLOCK.now().as_micros() / 60_000_000
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tollgate_core::RefusalReason;

    use super::*;

    #[test]
    fn totals_and_windows_agree_within_one_minute() {
        let counters = RuleCounters::default();
        let allowed = Decision::allowed(10, 9, Duration::ZERO);
        let refused = Decision::refused(
            RefusalReason::LimitReached,
            10,
            0,
            Duration::from_secs(1),
            Duration::from_secs(1),
        );
        counters.record(&allowed, true);
        counters.record(&refused, true);
        counters.record(&refused, false);
        let stats = counters.report(current_minute());
        let expected = Counts {
            allowed: 1,
            refused: 1,
            shadow_refused: 1,
        };
        assert_eq!(stats.since_start, expected);
        assert_eq!(stats.last_hour, expected);
        assert_eq!(stats.per_minute.len(), 60);
        assert_eq!(stats.per_minute[59], expected);
        // Reading an hour later, the minutes are gone and the totals stay.
        let later = counters.report(current_minute() + 61);
        assert_eq!(later.last_hour, Counts::default());
        assert_eq!(later.since_start, expected);
    }
}
