//! A global allocator that counts, for tests that prove a path does not allocate.

// A global allocator must be an `unsafe impl`; this one only counts and delegates to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

thread_local! {
    /// Allocations made by the current thread (const-initialised: reading it never allocates).
    static THIS_THREAD: Cell<usize> = const { Cell::new(0) };
}

/// Counts every allocation and reallocation, in total and per thread, then delegates to the
/// system allocator. Tests read [`allocations_on_this_thread`](Self::allocations_on_this_thread):
/// the test harness's own threads allocate at times of their choosing, so a process-wide count
/// would make an allocation-free assertion flaky.
///
/// ```
/// use tollgate_testing::CountingAllocator;
///
/// #[global_allocator]
/// static ALLOCATOR: CountingAllocator = CountingAllocator::new();
///
/// let before = ALLOCATOR.allocations_on_this_thread();
/// let boxed = Box::new(7);
/// assert_eq!(ALLOCATOR.allocations_on_this_thread(), before + 1);
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

    /// Allocations and reallocations so far, by every thread.
    pub fn allocations(&self) -> usize {
        self.allocations.load(Ordering::Relaxed)
    }

    /// Allocations and reallocations so far by the calling thread.
    pub fn allocations_on_this_thread(&self) -> usize {
        THIS_THREAD.try_with(Cell::get).unwrap_or(0)
    }

    fn count(&self) {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // `try_with`: a thread being torn down may still allocate.
        let _ = THIS_THREAD.try_with(|count| count.set(count.get() + 1));
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.count();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.count();
        // SAFETY: as for `dealloc`, and the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
