//! The allocation counters of the no-allocation tests, global allocators that forward to the
//! system allocator and count:
//! - [`ThreadCounting`] counts the calls, and the bytes asked for, that the measuring thread
//!   makes while [`allocations`] or [`allocated_bytes`] runs its closure (the test harness's
//!   other threads do not interfere);
//! - [`ProcessCounting`] counts every thread's calls ([`process_allocations`]).
//!
//! A test binary installs one, e.g.
//! `#[global_allocator] static GLOBAL: ThreadCounting = ThreadCounting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// The system allocator, counting every thread's `alloc`, `alloc_zeroed` and `realloc` calls:
/// for tests whose allocations could come from threads they do not run themselves (a
/// session's GEMM workers). Such a test binary must have no other threads at work while it
/// counts (`harness = false`).
pub struct ProcessCounting;

static PROCESS_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Allocation calls every thread has made so far (counted only where [`ProcessCounting`] is
/// the global allocator).
pub fn process_allocations() -> usize {
    PROCESS_COUNT.load(Ordering::SeqCst)
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for ProcessCounting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        PROCESS_COUNT.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        PROCESS_COUNT.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        PROCESS_COUNT.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}
