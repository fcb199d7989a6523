//! The counting global allocator: every allocation the process makes is counted, so the
//! command can report how many happened while a model ran (the engine's promise is none after
//! a session is set up).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting `alloc`, `alloc_zeroed` and `realloc` calls.
pub struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

/// Allocations made by the whole process so far (all threads).
pub fn allocations() -> usize {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Runs `f` and returns its result with the number of allocations made meanwhile (by any
/// thread: the session's GEMM workers included).
pub fn count<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = allocations();
    let value = f();
    (value, allocations() - before)
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}
