//! Software prefetch of operand rows the kernel will read next.
//!
//! Rows of one head are `d_head` floats every `stride` floats: a strided pattern the hardware
//! prefetchers follow poorly, so copying a tile of them is bound by memory latency. Asking for
//! the next tile's rows while the current one is computed hides that latency. A hint only:
//! no effect on results, and a no-op on targets without a stable prefetch instruction.

use crate::view::View;
use core::ops::Range;

/// Bytes per cache line.
#[cfg(target_arch = "x86_64")]
const LINE_BYTES: usize = 64;

/// Hints that the `d` elements at column `col` of rows `rows` of `src` will be read soon (into
/// L2). Rows must lie inside the validated view.
#[inline(always)]
pub(crate) fn prefetch_rows<E>(src: &View<'_, E>, rows: Range<usize>, col: usize, d: usize) {
    #[cfg(target_arch = "x86_64")]
    let per_line = LINE_BYTES / core::mem::size_of::<E>().max(1);
    #[cfg(target_arch = "x86_64")]
    for j in rows {
        let Some(row) = src.data.get(j * src.stride + col..j * src.stride + col + d) else {
            return;
        };
        let mut offset = 0;
        while offset < row.len() {
            let line = row[offset..].as_ptr().cast::<i8>();
            // SAFETY: `prefetch` never faults and has no effect on memory; the address is inside
            // `row`. SSE is part of the x86-64 baseline.
            #[allow(unused_unsafe)]
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T1 }>(line)
            };
            offset += per_line;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (src, rows, col, d);
}

/// Hints that the cache line holding `ptr` will be read soon (into L1). `ptr` may point
/// anywhere, even outside any allocation: the hint is never dereferenced as a read.
#[inline(always)]
pub(crate) fn prefetch_line<E>(ptr: *const E) {
    // SAFETY: `prefetch` never faults and has no effect on memory, whatever the address. SSE is
    // part of the x86-64 baseline.
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(ptr.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}
