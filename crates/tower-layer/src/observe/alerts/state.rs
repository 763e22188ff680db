//! One rule's alert: raised from the request path the first time a decision reaches the rule's
//! share, cleared off it once no decision has for as long as the allowance takes to be whole
//! again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tollgate_core::{Decision, RuleId, Timestamp};

use super::Alert;
use super::clock::AlertClock;
use super::share::{AlertShare, WHOLE, percent};
use crate::observe::RuleObserver;

/// The low bits of a pending word: the longest wait until an allowance is whole again, in
/// milliseconds (up to 557 years); the high 20 the highest share reached, in millionths.
const RESET_BITS: u32 = 44;
const RESET_MASK: u64 = (1 << RESET_BITS) - 1;

/// What the request path leaves for the next look, as one word: the highest share of its limit
/// a decision reached and the longest time until its allowance is whole again; 0 when no
/// decision reached the share since the last look.
fn pack(reached: u64, reset_ms: u64) -> u64 {
    (reached.min(WHOLE) << RESET_BITS) | reset_ms.clamp(1, RESET_MASK)
}

/// A pending word's (share reached in millionths, wait in milliseconds).
fn unpack(word: u64) -> (u64, u64) {
    (word >> RESET_BITS, word & RESET_MASK)
}

/// Both words' highest share and longest wait.
fn merged(word: u64, other: u64) -> u64 {
    if word == 0 {
        return other;
    }
    let ((reached, reset), (other_reached, other_reset)) = (unpack(word), unpack(other));
    pack(reached.max(other_reached), reset.max(other_reset))
}

/// One rule id's alert, shared by every installed rule set that holds the rule (so a reload that
/// keeps the rule keeps its alert).
pub(crate) struct AlertState {
    rule: RuleId,
    /// The share the installed rule alerts at, in millionths (a reload may change it).
    share: AtomicU64,
    /// Left by the request path for the next look ([`pack`]).
    pending: AtomicU64,
    /// Whether the alert is raised: read by the request path, written under `raised_at`'s lock.
    raised: AtomicBool,
    raised_at: Mutex<Raised>,
    clock: Arc<AlertClock>,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: std::sync::OnceLock<crate::observe::metrics::AlertMetrics>,
}

/// What a raised alert shows, kept off the request path.
#[derive(Debug, Default)]
struct Raised {
    /// When it was raised (`None`: it is not).
    since: Option<Timestamp>,
    /// The highest share a decision reached since, in millionths.
    reached: u64,
    /// It clears at the first look from this time on that finds nothing pending.
    clear_at: Timestamp,
}

impl AlertState {
    pub(crate) fn new(rule: &RuleId, share: AlertShare, clock: Arc<AlertClock>) -> AlertState {
        AlertState {
            rule: rule.clone(),
            share: AtomicU64::new(share.millionths()),
            pending: AtomicU64::new(0),
            raised: AtomicBool::new(false),
            raised_at: Mutex::new(Raised::default()),
            clock,
            #[cfg(feature = "metrics")]
            metrics: std::sync::OnceLock::new(),
        }
    }

    /// The installed rule alerts at `share`.
    pub(crate) fn alerts_at(&self, share: AlertShare) {
        self.share.store(share.millionths(), Ordering::Relaxed);
    }

    /// Whether the alert is raised now.
    pub(crate) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::SeqCst)
    }

    /// A decision used `used` of `limit`, at least the share, and its allowance is whole again
    /// in `reset_after_micros`: on the request path, a read of one word, written only when the
    /// share reached or the wait grows, and a look (raising the alert) only when nothing was
    /// pending and the alert is down.
    #[inline]
    fn reached(&self, used: u64, limit: u64, reset_after_micros: u64) {
        let share = u128::from(used.min(limit)) * u128::from(WHOLE) / u128::from(limit.max(1));
        let word = pack(
            u64::try_from(share).unwrap_or(WHOLE),
            reset_after_micros.div_ceil(1_000),
        );
        let current = self.pending.load(Ordering::Relaxed);
        if merged(current, word) == current {
            return;
        }
        // Sequentially consistent with a clearing look's store and load (below): either this
        // sees the alert down and looks, or the clearing sees this word and raises it again.
        let before = self
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::Relaxed, |current| {
                let next = merged(current, word);
                (next != current).then_some(next)
            });
        if before == Ok(0) && !self.is_raised() {
            self.look();
        }
    }

    /// Takes what the request path left, on the alert clock now: raises the alert if a decision
    /// reached the share, moves its clearing time to now plus the longest wait left, or clears
    /// it once that time has come with nothing left since.
    pub(crate) fn look(&self) {
        // A decision that reached the share while the alert was being cleared raises it again.
        while self.look_once() {}
    }

    /// One look; whether a decision reached the share while it cleared the alert.
    fn look_once(&self) -> bool {
        let mut raised = self
            .raised_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = self.clock.now();
        let pending = self.pending.swap(0, Ordering::AcqRel);
        if pending != 0 {
            let (reached, reset_ms) = unpack(pending);
            let clear_at = now.saturating_add_micros(reset_ms.saturating_mul(1_000));
            raised.clear_at = raised.clear_at.max(clear_at);
            raised.reached = raised.reached.max(reached);
            if raised.since.is_none() {
                raised.since = Some(now);
                raised.reached = reached;
                self.raised.store(true, Ordering::SeqCst);
                self.announce_raised(reached);
            }
        } else if raised.since.is_some() && now >= raised.clear_at {
            let since = raised.since.take().unwrap_or(now);
            self.raised.store(false, Ordering::SeqCst);
            self.announce_cleared(raised.reached, now.micros_since(since));
            *raised = Raised::default();
            return self.pending.load(Ordering::SeqCst) != 0;
        }
        false
    }

    /// The alert, if raised.
    pub(crate) fn report(&self) -> Option<Alert> {
        let raised = self
            .raised_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Some(Alert {
            rule: self.rule.clone(),
            alert_at: self.share(),
            reached: raised.reached as f64 / WHOLE as f64,
            since: raised.since?,
        })
    }

    fn share(&self) -> AlertShare {
        AlertShare::from_millionths(self.share.load(Ordering::Relaxed))
    }

    fn announce_raised(&self, reached: u64) {
        tracing::warn!(
            target: "tollgate::alert",
            rule = %self.rule,
            alert_at = %self.share(),
            reached = %percent(reached),
            "a caller reached the rule's alert share of its limit: alerting until none has for as long as the allowance takes to be whole again"
        );
        #[cfg(feature = "metrics")]
        if let Some(metrics) = self.metrics.get() {
            metrics.raised();
        }
    }

    fn announce_cleared(&self, reached: u64, lasted_micros: u64) {
        tracing::info!(
            target: "tollgate::alert",
            rule = %self.rule,
            alert_at = %self.share(),
            reached = %percent(reached),
            alerted_for_s = lasted_micros / 1_000_000,
            "the rule's alert is cleared: no caller reached its share for as long as the allowance takes to be whole again"
        );
        #[cfg(feature = "metrics")]
        if let Some(metrics) = self.metrics.get() {
            metrics.cleared();
        }
    }
}

impl Drop for AlertState {
    /// A rule no installed set holds (removed, or its alert taken off) alerts no more: a raised
    /// alert is cleared, so no gauge stays at 1 for a rule that is gone.
    fn drop(&mut self) {
        let raised = self
            .raised_at
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(since) = raised.since.take() {
            let (reached, now) = (raised.reached, self.clock.now());
            self.announce_cleared(reached, now.micros_since(since));
        }
    }
}

/// What the alerts keep for one rule that has a share: its share, and its alert.
pub(crate) struct RuleAlert {
    pub(crate) share: AlertShare,
    pub(crate) state: Arc<AlertState>,
}

impl RuleObserver for RuleAlert {
    /// A comparison of numbers the decision holds; past the share, [`AlertState::reached`].
    #[inline]
    fn decided(&self, decision: &Decision, _enforcing: bool, _refused_locally: bool) {
        let limit = decision.limit();
        let used = limit.saturating_sub(decision.remaining());
        if self.share.reached_by(used, limit) {
            let reset = u64::try_from(decision.reset_after().as_micros()).unwrap_or(u64::MAX);
            self.state.reached(used, limit, reset);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tollgate_core::Clock;
    use tollgate_testing::ManualClock;

    use super::*;

    fn state(clock: &ManualClock) -> AlertState {
        let rule = RuleId::new("codes").expect("valid");
        let share = AlertShare::new(0.8).expect("valid");
        AlertState::new(&rule, share, Arc::new(AlertClock::new(clock.clone())))
    }

    #[test]
    fn the_pending_word_keeps_the_highest_share_and_the_longest_wait() {
        let word = merged(pack(900_000, 10), pack(800_000, 30));
        assert_eq!(unpack(word), (900_000, 30));
        assert_eq!(merged(0, pack(1, 0)), pack(1, 1), "a wait is at least 1 ms");
        assert_eq!(unpack(pack(WHOLE, u64::MAX)), (WHOLE, RESET_MASK));
    }

    #[test]
    fn raised_once_then_cleared_once_the_longest_wait_has_passed() {
        let clock = ManualClock::new(Timestamp::from_secs(1_800_000_000));
        let alert = state(&clock);
        alert.reached(8, 10, 1_000_000);
        assert!(
            alert.is_raised(),
            "raised by the first decision at the share"
        );
        let since = alert.report().expect("raised").since;
        assert_eq!(since, clock.now());
        alert.reached(10, 10, 2_000_000);
        alert.look();
        assert_eq!(alert.report().expect("raised").reached, 1.0);
        clock.advance(Duration::from_millis(1_999));
        alert.look();
        assert!(alert.is_raised(), "the longest wait has not passed");
        clock.advance(Duration::from_millis(1));
        alert.look();
        assert!(!alert.is_raised());
        assert!(alert.report().is_none());
    }
}
