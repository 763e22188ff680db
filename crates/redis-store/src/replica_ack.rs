//! What came of the checks that asked for a replica to hold their count before the answer
//! (`FleetModes::with_replica_ack`), and which masters are not waited on for a while.
//!
//! One `WAIT` at a time per master, shared: a `WAIT` covers every script its connection
//! answered before it was sent, so checks whose scripts answered while one was on its way wait
//! for the next one together (a group commit), instead of each sending its own behind it.
//!
//! A master whose replica did not acknowledge in time is not waited on again for
//! [`NOT_WAITED_FOR`]: its replica is known to be behind or gone, and every acknowledged check
//! on it would otherwise take the whole wait in turn, until the rules' deadlines failed them
//! all.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a master whose replica missed an acknowledgement is not waited on.
const NOT_WAITED_FOR: Duration = Duration::from_secs(1);

/// How often a missed acknowledgement is logged at most.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Counts of the store calls (script runs: a request spread over several cluster slots makes
/// one per slot) that asked for a replica's acknowledgement, as
/// [`RedisConnection::replica_acks`](crate::RedisConnection::replica_acks) reports them.
///
/// ```
/// use tollgate_redis::ReplicaAckStats;
/// let stats = ReplicaAckStats::default();
/// assert_eq!(stats.acknowledged + stats.unacknowledged, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaAckStats {
    /// Calls answered once a replica held their count.
    pub acknowledged: u64,
    /// Calls answered without it: no replica acknowledged within the wait (cut to the
    /// caller's deadline), no time was left to wait, or the master's replica had just missed
    /// one (it is then not waited on for a second). A call its caller stopped waiting for
    /// before it ended is in neither count.
    pub unacknowledged: u64,
}

/// One master's waits, one at a time: how many answered scripts the last acknowledged `WAIT`
/// covered.
pub(crate) type Gate = Arc<tokio::sync::Mutex<u64>>;

/// The connection's record of acknowledgements (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct ReplicaAcks {
    acknowledged: AtomicU64,
    unacknowledged: AtomicU64,
    /// Masters (by address; `None`: the one server) not waited on until the instant given.
    not_waited: Mutex<Vec<(Option<Arc<str>>, Instant)>>,
    /// When a miss was last logged.
    logged: Mutex<Option<Instant>>,
    /// Scripts answered on the kept connection so far: each check's number in that order.
    answered: AtomicU64,
    /// Per master, the one `WAIT` at a time, holding how many answered scripts the last
    /// acknowledged one covered.
    gates: Mutex<HashMap<Option<Arc<str>>, Gate>>,
}

impl ReplicaAcks {
    /// Whether a check on `node` waits for its replica now.
    pub(crate) fn waits_on(&self, node: Option<&str>) -> bool {
        let now = Instant::now();
        let mut not_waited = self
            .not_waited
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        not_waited.retain(|(_, until)| *until > now);
        !not_waited.iter().any(|(held, _)| held.as_deref() == node)
    }

    /// Numbers a script just answered on the kept connection (a `WAIT` sent from now on covers
    /// it).
    pub(crate) fn script_answered(&self) -> u64 {
        self.answered.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// How many scripts have answered so far: what a `WAIT` sent now covers.
    pub(crate) fn answered_so_far(&self) -> u64 {
        self.answered.load(Ordering::Acquire)
    }

    /// The gate of `node`'s waits: one `WAIT` at a time, holding how many answered scripts
    /// the last acknowledged one covered.
    pub(crate) fn gate(&self, node: Option<&str>) -> Gate {
        let mut gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(gate) = gates.get(&node.map(Arc::from)) {
            return Arc::clone(gate);
        }
        Arc::clone(gates.entry(node.map(Arc::from)).or_default())
    }

    /// A check a `WAIT` sent after its script answered already acknowledged.
    pub(crate) fn covered(&self) {
        self.acknowledged.fetch_add(1, Ordering::Relaxed);
    }

    /// A check answered without waiting (its master is not waited on).
    pub(crate) fn skipped(&self) {
        self.unacknowledged.fetch_add(1, Ordering::Relaxed);
    }

    /// What came of one wait on `node`'s replica; a miss stops the waits on `node` for
    /// [`NOT_WAITED_FOR`].
    pub(crate) fn record(&self, node: Option<&str>, acknowledged: bool, wait: Duration) {
        if acknowledged {
            self.acknowledged.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.unacknowledged.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        self.not_waited
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((node.map(Arc::from), now + NOT_WAITED_FOR));
        let mut logged = self.logged.lock().unwrap_or_else(PoisonError::into_inner);
        if logged.is_none_or(|at| now.duration_since(at) >= LOG_EVERY) {
            *logged = Some(now);
            tracing::warn!(
                target: "tollgate::store",
                node = node.unwrap_or("the server"),
                wait_ms = wait.as_millis(),
                "no replica acknowledged a count within its wait: the answer stands \
                 unacknowledged (a failover now would forget it), and this master is not \
                 waited on for a second"
            );
        }
    }

    pub(crate) fn stats(&self) -> ReplicaAckStats {
        ReplicaAckStats {
            acknowledged: self.acknowledged.load(Ordering::Relaxed),
            unacknowledged: self.unacknowledged.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miss_stops_the_waits_on_that_master_only() {
        let acks = ReplicaAcks::default();
        assert!(acks.waits_on(Some("10.0.0.1:6379")));
        acks.record(Some("10.0.0.1:6379"), true, Duration::from_millis(5));
        assert!(acks.waits_on(Some("10.0.0.1:6379")), "acknowledged");
        acks.record(Some("10.0.0.1:6379"), false, Duration::from_millis(5));
        assert!(
            !acks.waits_on(Some("10.0.0.1:6379")),
            "missed: not waited on"
        );
        assert!(acks.waits_on(Some("10.0.0.2:6379")), "another master");
        assert!(acks.waits_on(None));
        acks.skipped();
        assert_eq!(
            acks.stats(),
            ReplicaAckStats {
                acknowledged: 1,
                unacknowledged: 2
            }
        );
    }
}
