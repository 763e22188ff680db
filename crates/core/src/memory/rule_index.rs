//! Rule ids to small numbers, read without locks.

use std::sync::Arc;

use arc_swap::ArcSwap;
use hashbrown::HashMap;
use parking_lot::Mutex;

use crate::{RuleId, StoreError, StoreErrorKind};

/// The most distinct rule ids one in-memory store keeps.
pub(crate) const MAX_RULES: usize = 1 << 16;

type Index = HashMap<RuleId, u32, foldhash::fast::RandomState>;

/// Numbers rule ids in the order they are first seen. Lookups are one atomic load and a hash;
/// adding a rule copies the (small) map.
pub(crate) struct RuleIndex {
    current: ArcSwap<Index>,
    writer: Mutex<()>,
}

impl RuleIndex {
    pub(crate) fn new() -> Self {
        RuleIndex {
            current: ArcSwap::from_pointee(Index::default()),
            writer: Mutex::new(()),
        }
    }

    /// The rule's number, if it has been seen.
    pub(crate) fn find(&self, rule: &RuleId) -> Option<u32> {
        self.current.load().get(rule).copied()
    }

    /// The rule's number, numbering it if new.
    pub(crate) fn find_or_add(&self, rule: &RuleId) -> Result<u32, StoreError> {
        if let Some(number) = self.find(rule) {
            return Ok(number);
        }
        let _writer = self.writer.lock();
        let current = self.current.load();
        if let Some(number) = current.get(rule) {
            return Ok(*number);
        }
        if current.len() >= MAX_RULES {
            return Err(StoreError::new(
                StoreErrorKind::Capacity,
                format!("more than {MAX_RULES} distinct rule ids"),
            ));
        }
        let number = u32::try_from(current.len()).unwrap_or(u32::MAX);
        let mut next = Index::clone(&current);
        next.insert(rule.clone(), number);
        self.current.store(Arc::new(next));
        Ok(number)
    }
}
