//! The allocation counter of the no-allocation tests: a global allocator that forwards to the
//! system allocator and counts the calls, and the bytes asked for, that the measuring thread
//! makes while [`allocations`] or [`allocated_bytes`] runs its closure (the test harness's other
//! threads do not interfere).
//!
//! A test binary installs it with
//! `#[global_allocator] static GLOBAL: ThreadCounting = ThreadCounting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting `alloc`, `alloc_zeroed` and `realloc` (and the bytes they ask
/// for) on the thread inside [`allocations`] or [`allocated_bytes`].
pub struct ThreadCounting;

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
    static BYTES: Cell<usize> = const { Cell::new(0) };
}

fn note(bytes: usize) {
    // `try_with` never allocates and tolerates thread teardown.
    let _ = ACTIVE.try_with(|active| {
        if active.get() {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
            let _ = BYTES.try_with(|b| b.set(b.get() + bytes));
        }
    });
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for ThreadCounting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Allocation calls and bytes asked for by `run` on this thread (counted only where
/// [`ThreadCounting`] is the global allocator).
fn measure(run: impl FnOnce()) -> (usize, usize) {
    COUNT.with(|c| c.set(0));
    BYTES.with(|b| b.set(0));
    ACTIVE.with(|a| a.set(true));
    run();
    ACTIVE.with(|a| a.set(false));
    (COUNT.with(Cell::get), BYTES.with(Cell::get))
}

/// Allocations made by `run` on this thread.
pub fn allocations(run: impl FnOnce()) -> usize {
    measure(run).0
}

/// Bytes `run` allocates on this thread (`realloc` counts its new size).
pub fn allocated_bytes(run: impl FnOnce()) -> usize {
    measure(run).1
}
