//! What a blocked-caller cache has done.

/// What a [`BlockedCache`](super::BlockedCache) has done since it was built, and what it holds.
///
/// ```
/// use tollgate_core::MemoryStore;
/// use tollgate_wrappers::BlockedCache;
/// let stats = BlockedCache::new(MemoryStore::new()).stats();
/// assert_eq!(stats.store_checks, 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct BlockedStats {
    /// Requests refused here without a store call.
    pub refused_locally: u64,
    /// Refusals by the store remembered (a caller blocked again after its entry ended counts
    /// again).
    pub remembered: u64,
    /// Checks passed to the wrapped store.
    pub store_checks: u64,
    /// Callers remembered now (entries that have ended are dropped when next looked up, or
    /// when the cache is full).
    pub entries: usize,
}
