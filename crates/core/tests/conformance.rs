//! The in-memory store passes the store conformance suite.

use tollgate_core::MemoryStore;
use tollgate_core::testing::ManualClock;

fn memory_store(clock: ManualClock) -> MemoryStore<ManualClock> {
    MemoryStore::builder().clock(clock).build()
}

tollgate_core::conformance_suite!(block_on = futures_executor::block_on, store = memory_store);
