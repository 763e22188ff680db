//! What switching to and from the fallback is logged and counted as.
//!
//! Logs go to the `tollgate::store` target and name transitions, not requests, so an outage
//! writes a handful of lines, not one per request:
//!
//! * `warn` — the primary failed after answering (at most once a second; further failures
//!   below the breaker's threshold log at `debug`), or a probe failed;
//! * `error` — the breaker opened: the primary failed too often in a row and is not called
//!   for a cool-down;
//! * `info` — the primary answers again (the breaker closed, or a failure announced at `warn`
//!   was followed by a success).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::FallbackStore;
use super::breaker::Transition;
use super::nodes::Picked;
use tollgate_core::{Clock, Store, StoreError, Timestamp};

/// The log target of every line a [`FallbackStore`] writes.
const TARGET: &str = "tollgate::store";

/// How often a first failure is announced at `warn` when the primary flaps.
const LOUD_EVERY_MICROS: u64 = 1_000_000;

/// Keeps a flapping primary from flooding the log.
#[derive(Debug, Default)]
pub(super) struct Announcer {
    /// The store time before which first failures log quietly.
    quiet_until: AtomicU64,
    /// Whether a failure was announced and its recovery not yet.
    announced: AtomicBool,
}

impl Announcer {
    /// Whether a first failure at `now` may be announced loudly.
    fn may_announce(&self, now: Timestamp) -> bool {
        let quiet_until = self.quiet_until.load(Ordering::Relaxed);
        now.as_micros() >= quiet_until
            && self
                .quiet_until
                .compare_exchange(
                    quiet_until,
                    now.saturating_add_micros(LOUD_EVERY_MICROS).as_micros(),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }
}

impl<P: Store, C: Clock> FallbackStore<P, C> {
    /// Logs and counts what a success changed.
    pub(super) fn report_success(&self, picked: &Picked, transition: Transition) {
        let node = picked.node.as_deref().unwrap_or("all");
        match transition {
            Transition::Closed => {
                self.counters.breaker_closed.add_one();
                #[cfg(feature = "metrics")]
                if let Some(metrics) = &self.metrics {
                    metrics.breaker(picked.node.as_deref(), false);
                }
                self.announcer.announced.store(false, Ordering::Relaxed);
                tracing::info!(
                    target: TARGET,
                    node,
                    "primary rate-limit store answers again; circuit breaker closed, \
                     rules are counted in the primary again"
                );
            }
            Transition::Recovered if self.announcer.announced.swap(false, Ordering::Relaxed) => {
                tracing::info!(
                    target: TARGET,
                    node,
                    "primary rate-limit store answers again"
                );
            }
            _ => {}
        }
    }

    /// Logs and counts what a failure of `op` changed.
    /// A node whose breaker was open is forgotten: no call has been about it for a while (a
    /// failed-over master whose keys now live on its replica).
    pub(super) fn report_forgotten(&self, node: &str) {
        #[cfg(feature = "metrics")]
        if let Some(metrics) = &self.metrics {
            metrics.breaker(Some(node), false);
        }
        tracing::info!(
            target: TARGET,
            node,
            "no call has been about this node of the primary for a while (its keys live \
             elsewhere now); its open circuit breaker is forgotten"
        );
    }

    pub(super) fn report_failure(
        &self,
        picked: &Picked,
        op: &'static str,
        error: &StoreError,
        transition: Transition,
    ) {
        let node = picked.node.as_deref().unwrap_or("all");
        match transition {
            Transition::Opened => {
                #[cfg(feature = "metrics")]
                if let Some(metrics) = &self.metrics {
                    metrics.breaker(picked.node.as_deref(), true);
                }
                self.counters.breaker_opened.add_one();
                self.announcer.announced.store(true, Ordering::Relaxed);
                tracing::error!(
                    target: TARGET,
                    op,
                    node,
                    %error,
                    failures = picked.breaker.failures(),
                    cool_down = ?self.cool_down,
                    "primary rate-limit store keeps failing; circuit breaker open: every rule \
                     follows its store-failure policy without calling the primary"
                );
            }
            Transition::ProbeFailed => {
                self.counters.failed_probes.add_one();
                tracing::warn!(
                    target: TARGET,
                    op,
                    node,
                    %error,
                    cool_down = ?self.cool_down,
                    "primary rate-limit store still failing; circuit breaker stays open"
                );
            }
            Transition::FirstFailure if self.announcer.may_announce(self.local.clock().now()) => {
                self.announcer.announced.store(true, Ordering::Relaxed);
                tracing::warn!(
                    target: TARGET,
                    op,
                    node,
                    %error,
                    "primary rate-limit store failed; rules follow their store-failure policy"
                );
            }
            _ => {
                tracing::debug!(
                    target: TARGET,
                    op,
                    node,
                    %error,
                    failures = picked.breaker.failures(),
                    "primary rate-limit store failed"
                );
            }
        }
    }
}
