//! The in-memory store, and the in-memory store behind a type-erased `DynStore`, pass the store
//! conformance suite (the stores that wrap stores run it in tollgate-wrappers).

use tollgate_core::MemoryStore;
use tollgate_testing::ManualClock;

fn memory_store(clock: ManualClock) -> MemoryStore<ManualClock> {
    MemoryStore::builder().clock(clock).build()
}

tollgate_testing::conformance_suite!(block_on = futures_executor::block_on, store = memory_store);

/// Not in the suite (a `FallbackStore` answers such an error by each rule's policy): the stores
/// that keep the state run it by name.
#[test]
fn a_time_past_the_supported_range_is_an_error_that_changes_nothing() {
    futures_executor::block_on(
        tollgate_testing::conformance::a_time_past_the_supported_range_is_an_error_that_changes_nothing(&memory_store),
    );
}

/// A [`DynStore`](tollgate_core::DynStore) decides exactly as the store it erases.
mod dyn_store {
    use tollgate_core::DynStore;
    use tollgate_testing::ManualClock;

    fn dyn_store(clock: ManualClock) -> DynStore {
        DynStore::new(super::memory_store(clock))
    }

    tollgate_testing::conformance_suite!(block_on = futures_executor::block_on, store = dyn_store);

    #[test]
    fn a_time_past_the_supported_range_is_an_error_that_changes_nothing() {
        futures_executor::block_on(
            tollgate_testing::conformance::a_time_past_the_supported_range_is_an_error_that_changes_nothing(&dyn_store),
        );
    }
}
