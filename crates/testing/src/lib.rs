//! # tollgate-testing
//!
//! The testing kit of [tollgate](https://docs.rs/tollgate): a manual clock, the conformance suite
//! every store runs, a counting allocator for allocation-free paths, and a recorder of `tracing`
//! events. A dev-dependency of the crates that use it; the facade re-exports it as
//! `tollgate::core::testing` with its feature `testing`.
//!
//! ```
//! use std::time::Duration;
//! use tollgate_testing::ManualClock;
//! use tollgate_core::{Clock, Timestamp};
//!
//! let clock = ManualClock::new(Timestamp::from_secs(60));
//! clock.advance(Duration::from_millis(1500));
//! assert_eq!(clock.now(), Timestamp::from_micros(61_500_000));
//! ```

pub mod conformance;
mod counting_allocator;
mod event_recorder;
mod manual_clock;
mod shared_memory;

pub use counting_allocator::CountingAllocator;
pub use event_recorder::{EventRecorder, RecordedEvent};
pub use manual_clock::ManualClock;
pub use shared_memory::SharedMemory;

/// The same receipt again, exactly as a retry sends it after a refund whose answer was lost (the
/// store may or may not have applied it). Refunding both must give back once: the conformance
/// suite checks that every store does.
pub fn replay(receipt: &tollgate_core::Receipt) -> tollgate_core::Receipt {
    tollgate_core::store_kit::ReceiptKit::retry_copy(receipt)
}
