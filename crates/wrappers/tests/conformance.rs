//! The store-failure wrapper around a healthy primary passes the store conformance suite.

use tollgate_core::MemoryStore;
use tollgate_testing::ManualClock;

fn memory_store(clock: ManualClock) -> MemoryStore<ManualClock> {
    MemoryStore::builder().clock(clock).build()
}

/// A [`FallbackStore`](tollgate_wrappers::FallbackStore) decides exactly as its primary while the
/// primary answers.
mod fallback_store {
    use std::future::Future;

    use tollgate_core::MemoryStore;
    use tollgate_testing::ManualClock;
    use tollgate_wrappers::FallbackStore;

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

    tollgate_testing::conformance_suite!(block_on = block_on, store = fallback_store);
}
