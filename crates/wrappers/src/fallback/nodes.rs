//! One circuit breaker per node of the primary: a Redis Cluster master that dies opens the
//! breaker of the keys it serves, and keys on the healthy masters go on being decided. A primary
//! that is one node ([`Store::node_of`] answers `None`) has one breaker, as before.
//!
//! A request whose items live on several nodes goes through the breaker of that set of nodes
//! (named `a+b`), so requests that touch a dead master open their own breaker without closing
//! the way for requests spread over healthy ones. A node no call has been about for a while (a
//! master replaced by its replica, whose keys now go to the new master) is forgotten, so it is
//! not reported as failing for ever.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use smallvec::SmallVec;

use super::breaker::Breaker;
use tollgate_core::{Item, Store, Timestamp};

/// How long a node's breaker is kept with no call about it, at least.
const FORGET_AFTER: Duration = Duration::from_secs(10);

/// How often forgotten nodes are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The breakers of one primary: one for the primary as a whole (items on no named node), and
/// one per node, or set of nodes, met.
#[derive(Debug)]
pub(super) struct Breakers {
    whole: Arc<Breaker>,
    by_node: RwLock<HashMap<Arc<str>, NodeBreaker>>,
    threshold: u32,
    cool_down: Duration,
    /// When forgotten nodes were last looked for (µs on the store's clock).
    swept: AtomicU64,
}

#[derive(Debug)]
struct NodeBreaker {
    breaker: Arc<Breaker>,
    /// When a call was last about this node (µs on the store's clock).
    used: AtomicU64,
}

/// The breaker a call goes through, and the node it stands for (`None`: the whole primary).
pub(super) struct Picked {
    pub(super) breaker: Arc<Breaker>,
    pub(super) node: Option<Arc<str>>,
}

impl Breakers {
    pub(super) fn new(threshold: u32, cool_down: Duration) -> Self {
        Breakers {
            whole: Arc::new(Breaker::new(threshold, cool_down)),
            by_node: RwLock::new(HashMap::new()),
            threshold,
            cool_down,
            swept: AtomicU64::new(0),
        }
    }

    /// The breaker for a call about `items` to `primary` at `now`: their node's when they all
    /// live on one named node, their set of nodes' when on several, the whole primary's when
    /// any is on no named node.
    pub(super) fn pick<P: Store>(&self, primary: &P, items: &[Item<'_>], now: Timestamp) -> Picked {
        let Some(node) = node_of_all(primary, items) else {
            return self.whole();
        };
        if let Some(held) = self.by_node.read().get(&node) {
            held.used.store(now.as_micros(), Ordering::Relaxed);
            return Picked {
                breaker: Arc::clone(&held.breaker),
                node: Some(node),
            };
        }
        let breaker = Arc::clone(
            &self
                .by_node
                .write()
                .entry(Arc::clone(&node))
                .or_insert_with(|| NodeBreaker {
                    breaker: Arc::new(Breaker::new(self.threshold, self.cool_down)),
                    used: AtomicU64::new(now.as_micros()),
                })
                .breaker,
        );
        Picked {
            breaker,
            node: Some(node),
        }
    }

    fn whole(&self) -> Picked {
        Picked {
            breaker: Arc::clone(&self.whole),
            node: None,
        }
    }

    /// How long a node's breaker is kept with no call about it: the longer of
    /// [`FORGET_AFTER`] and four cool-downs (so an open breaker gets its probes first).
    fn forget_after(&self) -> u64 {
        let micros = FORGET_AFTER
            .max(self.cool_down.saturating_mul(4))
            .as_micros();
        u64::try_from(micros).unwrap_or(u64::MAX)
    }

    /// Forgets, at most once a [`SWEEP_EVERY`], the nodes no call has been about for a while;
    /// answers those of them whose breaker was open (to report them closed).
    pub(super) fn forget_unused(&self, now: Timestamp) -> Vec<Arc<str>> {
        let now = now.as_micros();
        let swept = self.swept.load(Ordering::Relaxed);
        let every = u64::try_from(SWEEP_EVERY.as_micros()).unwrap_or(u64::MAX);
        if now.saturating_sub(swept) < every
            || self
                .swept
                .compare_exchange(swept, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return Vec::new();
        }
        let forget_after = self.forget_after();
        let unused = |held: &NodeBreaker| {
            now.saturating_sub(held.used.load(Ordering::Relaxed)) >= forget_after
        };
        if !self.by_node.read().values().any(unused) {
            return Vec::new();
        }
        let mut open = Vec::new();
        self.by_node.write().retain(|node, held| {
            let keep = !unused(held);
            if !keep && held.breaker.is_open() {
                open.push(Arc::clone(node));
            }
            keep
        });
        open
    }

    /// Whether any breaker is open now.
    pub(super) fn any_open(&self) -> bool {
        self.whole.is_open()
            || self
                .by_node
                .read()
                .values()
                .any(|held| held.breaker.is_open())
    }

    /// The nodes (and sets of nodes) whose breaker is open now, by name.
    pub(super) fn open_nodes(&self) -> Vec<Arc<str>> {
        let mut open: Vec<Arc<str>> = self
            .by_node
            .read()
            .iter()
            .filter(|(_, held)| held.breaker.is_open())
            .map(|(node, _)| Arc::clone(node))
            .collect();
        open.sort();
        open
    }
}

/// The node every item lives on, or the set of their nodes (`a+b`, sorted) when several;
/// `None` when any item is on no named node (or there are none).
fn node_of_all<P: Store>(primary: &P, items: &[Item<'_>]) -> Option<Arc<str>> {
    let mut nodes: SmallVec<[Arc<str>; 4]> = SmallVec::new();
    for item in items {
        let node = primary.node_of(item)?;
        if !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    match nodes.len() {
        0 => None,
        1 => nodes.pop(),
        _ => {
            nodes.sort();
            let names: SmallVec<[&str; 4]> = nodes.iter().map(|node| &**node).collect();
            Some(Arc::from(names.join("+")))
        }
    }
}
