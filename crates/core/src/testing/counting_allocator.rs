//! A global allocator that counts, for tests that prove a path does not allocate.

// A global allocator must be an `unsafe impl`; this one only counts and delegates to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts every allocation and reallocation, then delegates to the system allocator. Install it
/// in a test binary of its own (other tests' threads would be counted too):
///
/// ```
/// use tollgate_core::testing::CountingAllocator;
///
/// #[global_allocator]
/// static ALLOCATOR: CountingAllocator = CountingAllocator::new();
///
/// let before = ALLOCATOR.allocations();
/// let boxed = Box::new(7);
/// assert!(ALLOCATOR.allocations() > before);
/// # drop(boxed);
/// ```
#[derive(Debug, Default)]
pub struct CountingAllocator {
    allocations: AtomicUsize,
}

impl CountingAllocator {
    /// A counter at zero.
    pub const fn new() -> Self {
        CountingAllocator {
            allocations: AtomicUsize::new(0),
        }
    }

    /// Allocations and reallocations so far.
    pub fn allocations(&self) -> usize {
        self.allocations.load(Ordering::Relaxed)
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `dealloc`, and the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
