//! One bucket of one Envoy: what its assignment gives it, what it has reported, and when it
//! needs a new assignment. Pure bookkeeping: the store is asked elsewhere (`draw.rs`).
//!
//! Every report adds the requests Envoy allowed in the bucket to what it has **admitted** on
//! this stream; every unit charged to the store for it — a lease, or debt — adds to what is
//! **covered**. What Envoy admitted beyond that (its own `no_assignment_behavior`, or an
//! assignment that lapsed) is charged as debt with the next draw, so everything Envoy reports
//! allowed is counted in the store, before (a lease) or after (debt). Requests admitted while the
//! bucket was allowed all (no rule, an unlimited rule, a store failing open) are forgiven.

use std::time::Duration;

use tollgate_core::Timestamp;

use super::settings::Settings;
use super::target::Basis;

/// What Envoy holds for the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// No assignment yet: Envoy follows its `no_assignment_behavior`.
    Nothing,
    /// A token bucket of `lease` tokens, never refilled before it ends.
    Tokens { lease: u64 },
    /// `ALLOW_ALL`.
    Allowed,
    /// `DENY_ALL`, until the store has more at `retry_at`.
    Denied { retry_at: Timestamp },
}

/// What a report asks of the service for one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing: the assignment Envoy holds stands.
    Keep,
    /// Forget the bucket, and tell Envoy to: it has reported no requests for a while.
    Abandon,
    /// Assign `ALLOW_ALL`.
    Allow,
    /// Assign `DENY_ALL`.
    Deny,
    /// Draw from the store: `uncovered` units as debt (admitted beyond what was charged), then
    /// a lease of up to `size`.
    Draw { size: u64, uncovered: u64 },
}

/// What the store answered a draw, as the bucket records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A lease of this many units.
    Tokens(u64),
    /// Nothing left; more after this wait.
    Exhausted(Duration),
    /// The store cannot answer and the rule fails open: allowed, uncounted.
    Open,
    /// The store cannot answer and the rule fails closed: refused.
    Closed,
}

/// One bucket's bookkeeping.
#[derive(Debug)]
pub(crate) struct Bucket {
    basis: Option<Basis>,
    held: Held,
    /// The store could not answer the last draw: draw again at the next report.
    store_failed: bool,
    expires_at: Timestamp,
    /// Requests allowed since the current assignment was sent.
    spent: u64,
    admitted: u64,
    covered: u64,
    last_used: Timestamp,
    /// The marker of the next token bucket, so that two leases in a row are never the same
    /// strategy (Envoy would keep the old bucket, tokens and all, rather than start the new).
    marker: bool,
}

impl Bucket {
    /// A bucket first reported at `now`.
    pub(crate) fn new(now: Timestamp) -> Bucket {
        Bucket {
            basis: None,
            held: Held::Nothing,
            store_failed: false,
            expires_at: now,
            spent: 0,
            admitted: 0,
            covered: 0,
            last_used: now,
            marker: false,
        }
    }

    /// Takes in one report of `allowed` and `denied` requests at `now`, for a bucket now
    /// answered by `basis` with leases of at most `max_lease`, and says what it needs.
    pub(crate) fn report(
        &mut self,
        (allowed, denied): (u64, u64),
        basis: &Basis,
        max_lease: u64,
        now: Timestamp,
        settings: &Settings,
    ) -> Next {
        self.admitted = self.admitted.saturating_add(allowed);
        self.spent = self.spent.saturating_add(allowed);
        if self.held == Held::Allowed {
            self.covered = self.covered.max(self.admitted);
        }
        let demand = allowed.saturating_add(denied);
        if demand > 0 {
            self.last_used = now;
        } else if micros(now.micros_since(self.last_used)) >= settings.abandon_after {
            return Next::Abandon;
        }
        let fresh = self.basis.as_ref() != Some(basis);
        // Renewed in the second half of its life, so a report at least every half TTL never
        // lets an assignment lapse into Envoy's own behaviour.
        let expiring = micros(self.expires_at.micros_since(now)) <= settings.ttl / 2;
        match basis {
            Basis::Allowed(_) => {
                let due = fresh || expiring || self.held != Held::Allowed;
                if due { Next::Allow } else { Next::Keep }
            }
            Basis::Refused(_) => {
                let due = fresh || expiring || !matches!(self.held, Held::Denied { .. });
                if due { Next::Deny } else { Next::Keep }
            }
            Basis::Counted(..) => {
                let due = fresh
                    || expiring
                    || self.store_failed
                    || match self.held {
                        Held::Nothing | Held::Allowed => true,
                        Held::Tokens { lease } => self.spent >= lease,
                        Held::Denied { retry_at } => now >= retry_at,
                    };
                if !due {
                    return Next::Keep;
                }
                let size = match self.held {
                    Held::Nothing => max_lease,
                    _ => demand.saturating_mul(2).clamp(1, max_lease),
                };
                let uncovered = self.admitted.saturating_sub(self.covered);
                Next::Draw { size, uncovered }
            }
        }
    }

    /// Records `ALLOW_ALL` (or `DENY_ALL`, `allowed` false) sent at `now` for `basis`.
    pub(crate) fn blanket(&mut self, allowed: bool, basis: Basis, now: Timestamp, ttl: Duration) {
        self.held = if allowed {
            self.covered = self.covered.max(self.admitted);
            Held::Allowed
        } else {
            Held::Denied { retry_at: now }
        };
        self.store_failed = false;
        self.sent(basis, now, ttl);
    }

    /// Records a draw for `basis` at `now` that charged `debt` units of debt and then answered
    /// `outcome`; returns the token bucket's marker for a lease.
    pub(crate) fn drew(
        &mut self,
        basis: Basis,
        debt: u64,
        outcome: Outcome,
        now: Timestamp,
        ttl: Duration,
    ) -> bool {
        self.covered = self.covered.saturating_add(debt);
        self.store_failed = matches!(outcome, Outcome::Open | Outcome::Closed);
        self.held = match outcome {
            Outcome::Tokens(lease) => {
                self.covered = self.covered.saturating_add(lease);
                self.marker = !self.marker;
                Held::Tokens { lease }
            }
            Outcome::Exhausted(wait) => Held::Denied {
                retry_at: now.saturating_add_micros(whole_micros(wait)),
            },
            Outcome::Open => {
                self.covered = self.covered.max(self.admitted);
                Held::Allowed
            }
            Outcome::Closed => Held::Denied { retry_at: now },
        };
        self.sent(basis, now, ttl);
        self.marker
    }

    fn sent(&mut self, basis: Basis, now: Timestamp, ttl: Duration) {
        self.basis = Some(basis);
        self.spent = 0;
        self.expires_at = now.saturating_add_micros(whole_micros(ttl));
    }

    /// What Envoy holds for it.
    #[cfg(test)]
    pub(crate) fn held(&self) -> Held {
        self.held
    }
}

fn micros(micros: u64) -> Duration {
    Duration::from_micros(micros)
}

fn whole_micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_core::{Quota, RuleId};

    const NOW: Timestamp = Timestamp::from_secs(1_000);

    fn counted() -> Basis {
        let quota = Quota::fixed_window(100, Duration::from_secs(60)).unwrap();
        Basis::Counted(RuleId::new("edge").unwrap(), quota)
    }

    fn at(seconds: u64) -> Timestamp {
        NOW.saturating_add_micros(seconds * 1_000_000)
    }

    #[test]
    fn the_first_report_draws_the_largest_lease_and_charges_what_envoy_let_through() {
        let settings = Settings::default();
        let mut bucket = Bucket::new(NOW);
        let next = bucket.report((1, 0), &counted(), 10, NOW, &settings);
        assert_eq!(
            next,
            Next::Draw {
                size: 10,
                uncovered: 1
            }
        );
        bucket.drew(counted(), 1, Outcome::Tokens(10), NOW, settings.ttl);
        // Spending part of the lease asks for nothing; spending all of it draws again, sized
        // from the demand reported.
        assert_eq!(
            bucket.report((4, 0), &counted(), 10, at(1), &settings),
            Next::Keep
        );
        let next = bucket.report((6, 2), &counted(), 10, at(2), &settings);
        assert_eq!(
            next,
            Next::Draw {
                size: 10,
                uncovered: 0
            }
        );
        bucket.drew(counted(), 0, Outcome::Tokens(3), at(2), settings.ttl);
        assert_eq!(
            bucket.report((1, 0), &counted(), 10, at(3), &settings),
            Next::Keep
        );
        let next = bucket.report((2, 0), &counted(), 10, at(4), &settings);
        assert_eq!(
            next,
            Next::Draw {
                size: 4,
                uncovered: 0
            }
        );
    }

    #[test]
    fn an_exhausted_bucket_is_drawn_again_once_the_store_has_more() {
        let settings = Settings::default();
        let mut bucket = Bucket::new(NOW);
        bucket.report((0, 1), &counted(), 10, NOW, &settings);
        bucket.drew(
            counted(),
            0,
            Outcome::Exhausted(Duration::from_secs(3)),
            NOW,
            settings.ttl,
        );
        assert_eq!(bucket.held(), Held::Denied { retry_at: at(3) });
        assert_eq!(
            bucket.report((0, 5), &counted(), 10, at(2), &settings),
            Next::Keep
        );
        let next = bucket.report((0, 5), &counted(), 10, at(3), &settings);
        assert_eq!(
            next,
            Next::Draw {
                size: 10,
                uncovered: 0
            }
        );
    }

    #[test]
    fn an_assignment_is_renewed_in_the_second_half_of_its_life() {
        let settings = Settings::default(); // 15 s
        let mut bucket = Bucket::new(NOW);
        bucket.report((1, 0), &counted(), 10, NOW, &settings);
        bucket.drew(counted(), 1, Outcome::Tokens(10), NOW, settings.ttl);
        assert_eq!(
            bucket.report((1, 0), &counted(), 10, at(7), &settings),
            Next::Keep
        );
        let next = bucket.report((1, 0), &counted(), 10, at(8), &settings);
        assert_eq!(
            next,
            Next::Draw {
                size: 2,
                uncovered: 0
            }
        );
    }

    #[test]
    fn admissions_beyond_the_leases_are_charged_and_allowed_ones_forgiven() {
        let settings = Settings::default();
        let mut bucket = Bucket::new(NOW);
        let allowed = Basis::Allowed(None);
        assert_eq!(
            bucket.report((3, 0), &allowed, 10, NOW, &settings),
            Next::Allow
        );
        bucket.blanket(true, allowed.clone(), NOW, settings.ttl);
        assert_eq!(
            bucket.report((7, 0), &allowed, 10, at(1), &settings),
            Next::Keep
        );
        // The rule file now limits the bucket: what was let through before is forgiven.
        let next = bucket.report((2, 0), &counted(), 10, at(2), &settings);
        assert_eq!(
            next,
            Next::Draw {
                size: 4,
                uncovered: 0
            }
        );
        bucket.drew(
            counted(),
            0,
            Outcome::Exhausted(Duration::ZERO),
            at(2),
            settings.ttl,
        );
        // Envoy's assignment lapsed, say, and it let 5 through on its own: charged as debt.
        let next = bucket.report((5, 0), &counted(), 10, at(3), &settings);
        assert_eq!(
            next,
            Next::Draw {
                size: 10,
                uncovered: 5
            }
        );
    }

    #[test]
    fn a_store_failure_is_drawn_again_at_the_next_report_and_a_quiet_bucket_abandoned() {
        let settings = Settings::default();
        let mut bucket = Bucket::new(NOW);
        bucket.report((1, 0), &counted(), 10, NOW, &settings);
        bucket.drew(counted(), 0, Outcome::Closed, NOW, settings.ttl);
        assert!(matches!(
            bucket.report((0, 1), &counted(), 10, at(1), &settings),
            Next::Draw { .. }
        ));
        bucket.drew(counted(), 0, Outcome::Tokens(2), at(1), settings.ttl);
        // Quiet, but its assignment is in the second half of its life: renewed, one unit.
        let next = bucket.report((0, 0), &counted(), 10, at(30), &settings);
        assert_eq!(
            next,
            Next::Draw {
                size: 1,
                uncovered: 0
            }
        );
        bucket.drew(counted(), 0, Outcome::Tokens(1), at(30), settings.ttl);
        // A minute without a request since the last one (at 1 s): abandoned.
        assert_eq!(
            bucket.report((0, 0), &counted(), 10, at(61), &settings),
            Next::Abandon
        );
    }
}
