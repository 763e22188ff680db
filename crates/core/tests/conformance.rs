//! The in-memory store, the store-failure wrapper around a healthy primary, and the in-memory
//! store behind a type-erased `DynStore` pass the store conformance suite.

use tollgate_core::MemoryStore;
use tollgate_core::testing::ManualClock;

fn memory_store(clock: ManualClock) -> MemoryStore<ManualClock> {
    MemoryStore::builder().clock(clock).build()
}

tollgate_core::conformance_suite!(block_on = futures_executor::block_on, store = memory_store);

/// Not in the suite (a `FallbackStore` answers such an error by each rule's policy): the stores
/// that keep the state run it by name.
#[test]
fn a_time_past_the_supported_range_is_an_error_that_changes_nothing() {
    futures_executor::block_on(
        tollgate_core::testing::conformance::a_time_past_the_supported_range_is_an_error_that_changes_nothing(
            &memory_store,
        ),
    );
}

/// A [`FallbackStore`](tollgate_core::FallbackStore) decides exactly as its primary while the
/// primary answers.
mod fallback_store {
    use std::future::Future;

    use tollgate_core::testing::ManualClock;
    use tollgate_core::{FallbackStore, MemoryStore};

    fn fallback_store(clock: ManualClock) -> FallbackStore<MemoryStore<ManualClock>, ManualClock> {
        FallbackStore::builder(super::memory_store(clock.clone()))
            .clock(clock)
            .build()
    }

    /// The wrapper's timeouts need Tokio's timer.
    fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime")
            .block_on(future)
    }

    tollgate_core::conformance_suite!(block_on = block_on, store = fallback_store);
}

/// A [`DynStore`](tollgate_core::DynStore) decides exactly as the store it erases.
mod dyn_store {
    use tollgate_core::DynStore;
    use tollgate_core::testing::ManualClock;

    fn dyn_store(clock: ManualClock) -> DynStore {
        DynStore::new(super::memory_store(clock))
    }

    tollgate_core::conformance_suite!(block_on = futures_executor::block_on, store = dyn_store);

    #[test]
    fn a_time_past_the_supported_range_is_an_error_that_changes_nothing() {
        futures_executor::block_on(
            tollgate_core::testing::conformance::a_time_past_the_supported_range_is_an_error_that_changes_nothing(
                &dyn_store,
            ),
        );
    }
}
