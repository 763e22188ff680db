//! One circuit breaker per node of the primary: a Redis Cluster master that dies opens the
//! breaker of the keys it serves, and keys on the healthy masters go on being decided. A primary
//! that is one node ([`Store::node_of`] answers `None`) has one breaker, as before.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use super::breaker::Breaker;
use crate::{Item, Store};

/// The breakers of one primary: one for the primary as a whole (every item on no named node, and
/// requests whose items span several nodes), and one per node met.
#[derive(Debug)]
pub(super) struct Breakers {
    whole: Arc<Breaker>,
    by_node: RwLock<HashMap<Arc<str>, Arc<Breaker>>>,
    threshold: u32,
    cool_down: Duration,
}

/// The breaker a call goes through, and the node it stands for (`None`: the primary, or several
/// of its nodes).
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
        }
    }

    /// The breaker for a call about `items` to `primary`: their node's when they all live on one
    /// named node, the whole primary's otherwise.
    pub(super) fn pick<P: Store>(&self, primary: &P, items: &[Item<'_>]) -> Picked {
        let mut nodes = items.iter().map(|item| primary.node_of(item));
        let Some(Some(first)) = nodes.next() else {
            return self.whole();
        };
        if !nodes.all(|node| node.as_deref() == Some(&*first)) {
            return self.whole();
        }
        if let Some(breaker) = self.by_node.read().get(&first) {
            return Picked {
                breaker: Arc::clone(breaker),
                node: Some(first),
            };
        }
        let breaker = Arc::clone(
            self.by_node
                .write()
                .entry(Arc::clone(&first))
                .or_insert_with(|| Arc::new(Breaker::new(self.threshold, self.cool_down))),
        );
        Picked {
            breaker,
            node: Some(first),
        }
    }

    fn whole(&self) -> Picked {
        Picked {
            breaker: Arc::clone(&self.whole),
            node: None,
        }
    }

    /// Whether any breaker is open now.
    pub(super) fn any_open(&self) -> bool {
        self.whole.is_open()
            || self
                .by_node
                .read()
                .values()
                .any(|breaker| breaker.is_open())
    }

    /// The nodes whose breaker is open now, by name.
    pub(super) fn open_nodes(&self) -> Vec<Arc<str>> {
        let mut open: Vec<Arc<str>> = self
            .by_node
            .read()
            .iter()
            .filter(|(_, breaker)| breaker.is_open())
            .map(|(node, _)| Arc::clone(node))
            .collect();
        open.sort();
        open
    }
}
