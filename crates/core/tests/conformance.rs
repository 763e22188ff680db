//! The in-memory store, and the in-memory store behind a type-erased `DynStore`, pass the store
//! conformance suite (the stores that wrap stores run it in tollgate-wrappers).

use tollgate_core::MemoryStore;
use tollgate_testing::ManualClock;

fn memory_store(clock: ManualClock) -> MemoryStore<ManualClock> {
    MemoryStore::builder().clock(clock).build()
}

tollgate_testing::conformance_suite!(block_on = futures_executor::block_on, store = memory_store);

/// A [`DynStore`](tollgate_core::DynStore) decides exactly as the store it erases.
mod dyn_store {
    use tollgate_core::DynStore;
    use tollgate_testing::ManualClock;

    fn dyn_store(clock: ManualClock) -> DynStore {
        DynStore::new(super::memory_store(clock))
    }

    tollgate_testing::conformance_suite!(block_on = futures_executor::block_on, store = dyn_store);
}
