//! The `f32`/`f16`/`bf16` microkernel and the fused store: an `MR × NV·LANES` tile of `C`
//! accumulated in registers from rows of `A` and the panels of the packed `B`, then written to
//! `C` with the epilogue applied on the last block of `k`.
//!
//! `A` is never packed: a tile reads its rows in place, each at `A`'s own row stride and one
//! sequential stream in `k` ([`ATile`]). [`accumulate`] serves the blocked path, whose block of
//! `B` stays in L2 and is hinted a few rows ahead; [`accumulate_small`] the small-`m` path,
//! which streams the weights once from memory and hints them [`STREAM_AHEAD_BYTES`] ahead
//! (tiles of several rows, and one-row tiles whose element type asks; `f16` weights on x86 go
//! through [`f16_pairs`](super::f16_pairs)). [`Output::store`], which the int8 and bf16-dot
//! kernels share, writes a tile's valid rows and columns: `C = acc` on the first block of `k`,
//! `C += acc` after it, and `C = activation(C + bias) + residual` on the last.
//!
//! One generic body serves every ISA level: `S::f32s` is one AVX-512, AVX2, NEON or scalar
//! register, and the tile shape (`MR` rows, `NV` vectors per row) is chosen per level so the
//! accumulators fill the register file without spilling.

use crate::activation::Activation;
use crate::gemm::element::Element;
use crate::gemm::packed_b::PANEL_COLS;
use crate::view::View;
use pulp::Simd;

/// Where a tile reads `A`: element `(i, p)` of the tile is at `ptr + i·row_step + p·k_step`.
///
/// The driver reads `A` in place: `ptr` is the tile's first row at its first column of the
/// block of `k`, `row_step` is `A`'s row stride and `k_step` is 1 (which the
/// [`f16_pairs`](super::f16_pairs) tiles require).
#[derive(Clone, Copy)]
pub(crate) struct ATile {
    pub ptr: *const f32,
    pub row_step: usize,
    pub k_step: usize,
}

/// [`accumulate`] for the small-`m` path, whose tiles read rows of `A` in place over the whole
/// depth: `f16` weights take [`f16_pairs`](super::f16_pairs), which converts the packed row
/// pairs without separating them, for one row at AVX-512 and AVX2 and up to 6 at AVX-512.
///
/// # Safety
/// As [`accumulate`], with `b` at row 0 of the packed panels.
#[inline(always)]
pub(crate) unsafe fn accumulate_small<S: Simd, T: Element, const MR: usize, const NV: usize>(
    simd: S,
    kc: usize,
    a: ATile,
    b: *const T,
    panel_stride: usize,
) -> [[S::f32s; NV]; MR] {
    #[cfg(target_arch = "x86_64")]
    if a.k_step == 1 && core::any::TypeId::of::<T>() == core::any::TypeId::of::<half::f16>() {
        use pulp::x86::{V3, V4};
        // SAFETY: `T` is `f16` (same type id); forwarded contract. F16C at `V3`: an
        // `Avx2`-level `Isa` exists only after detection found it, and its code runs in a
        // function that enables it.
        unsafe {
            let b = b as *const half::f16;
            if let Some(acc) = f16_pairs_at::<S, V4, MR, NV>(kc, a, b, panel_stride) {
                return acc;
            }
            if let Some(acc) = f16_pairs_at::<S, V3, MR, NV>(kc, a, b, panel_stride) {
                return acc;
            }
        }
    }
    // SAFETY: forwarded contract.
    unsafe {
        let ahead = (MR > 1 || T::HINT_ONE_ROW).then_some(Ahead {
            bytes: STREAM_AHEAD_BYTES,
            every: 1,
        });
        let zero = [[simd.splat_f32s(0.0); NV]; MR];
        accumulate_ahead::<S, T, MR, NV>(simd, kc, a, (b, panel_stride), zero, ahead)
    }
}

/// The [`f16_pairs`](super::f16_pairs) tile when `S` is the level `P` and the tile is one it
/// serves (one row; 2 to 6 rows of whole AVX-512 panels), `None` otherwise.
///
/// # Safety
/// As [`f16_pairs::row`](super::f16_pairs::row), with `b` the `f16` weights.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn f16_pairs_at<S: Simd, P, const MR: usize, const NV: usize>(
    kc: usize,
    a: ATile,
    b: *const half::f16,
    panel_stride: usize,
) -> Option<[[S::f32s; NV]; MR]>
where
    P: super::f16_pairs::Pairs + 'static,
{
    if core::any::TypeId::of::<S>() != core::any::TypeId::of::<P>() {
        return None;
    }
    // SAFETY: `S` is `P` (same type id), whose `Out` is `S::f32s` (`f32x16` for `V4`, `f32x8`
    // for `V3`), so the arrays have the same layout; forwarded contract (and `PASS_VECTORS`
    // divides `NV` for `rows`).
    unsafe {
        if MR == 1 {
            let one = [super::f16_pairs::row::<P, NV>(kc, a, b, panel_stride)];
            return Some(core::mem::transmute_copy::<
                [[P::Out; NV]; 1],
                [[S::f32s; NV]; MR],
            >(&one));
        }
        use super::f16_pairs::{MAX_ROWS, PASS_VECTORS};
        if P::LANES == 16 && MR <= MAX_ROWS && NV.is_multiple_of(PASS_VECTORS) {
            let acc = super::f16_pairs::rows::<P, MR, NV, PASS_VECTORS>(kc, a, b, panel_stride);
            return Some(core::mem::transmute_copy::<
                [[P::Out; NV]; MR],
                [[S::f32s; NV]; MR],
            >(&acc));
        }
        None
    }
}

/// Accumulates `A(MR × kc) · B(kc × NV·LANES)` onto `init` (zero for the first block of `k`,
/// the stored sums of the blocks before it otherwise) and returns the accumulators.
///
/// Continuing from the stored sums makes every output element one chain of multiply-adds in
/// `k` order, exactly as the small-`m` path computes it: a row's result does not depend on how
/// many rows share the call (so a batch of sequences decodes exactly as each alone).
///
/// `b` points at row 0 of the tile's first column inside a packed panel of `T`; vector `v` of a
/// row starts `v · LANES` columns further, in the next panel (`panel_stride` elements on) once
/// the tile crosses a panel boundary. Rows are consumed in pairs (the 16-bit layouts interleave
/// them; for `f32` it is plain unrolling), each accumulator still adding its products in `k`
/// order, so the result does not depend on the element type's grouping. The element type may
/// deliver a vector's columns in another order (`Widen::load_pair_tile`); the sums are put
/// back in order before they are returned.
///
/// # Safety
/// For every `p < kc`, `i < MR` and `v < NV`, `a.ptr + i·a.row_step + p·a.k_step` and the
/// `LANES` columns of row `p` at `b + offset(v)` (for 16-bit types the whole words of its row
/// pair) must be readable.
#[inline(always)]
pub(crate) unsafe fn accumulate<S: Simd, T: Element, const MR: usize, const NV: usize>(
    simd: S,
    kc: usize,
    a: ATile,
    b: *const T,
    panel_stride: usize,
    init: [[S::f32s; NV]; MR],
) -> [[S::f32s; NV]; MR] {
    // SAFETY: forwarded contract.
    unsafe {
        let ahead = Some(Ahead {
            bytes: PACKED_AHEAD_ROWS * PANEL_COLS * core::mem::size_of::<T>(),
            every: 2,
        });
        accumulate_ahead::<S, T, MR, NV>(simd, kc, a, (b, panel_stride), init, ahead)
    }
}

/// Where [`accumulate_ahead`] hints: `bytes` ahead of the rows it reads in each panel the tile
/// covers, one hint for every `every`-th 64-byte line.
#[derive(Clone, Copy)]
struct Ahead {
    bytes: usize,
    every: usize,
}

/// [`accumulate`] with its prefetch hints placed by `ahead` (none without it).
///
/// # Safety
/// As [`accumulate`].
#[inline(always)]
unsafe fn accumulate_ahead<S: Simd, T: Element, const MR: usize, const NV: usize>(
    simd: S,
    kc: usize,
    a: ATile,
    (b, panel_stride): (*const T, usize),
    init: [[S::f32s; NV]; MR],
    ahead: Option<Ahead>,
) -> [[S::f32s; NV]; MR] {
    let lanes = S::F32_LANES;
    let offsets: [usize; NV] = core::array::from_fn(|v| {
        let col = v * lanes;
        (col / PANEL_COLS) * panel_stride + (col % PANEL_COLS) * T::K_GROUP
    });
    let zero = simd.splat_f32s(0.0);
    // Into the tile's column order (the reordering is its own inverse).
    let mut acc = init.map(|row| row.map(|sums| T::restore_order(simd, sums)));
    let mut a_ptr = a.ptr;
    let mut b_ptr = b;
    for _ in 0..kc / 2 {
        for (v, &offset) in offsets.iter().enumerate() {
            let Some(ahead) = ahead else { break };
            if (v * lanes) % PANEL_COLS == 0 {
                let rows = b_ptr.wrapping_add(offset) as *const u8;
                for line in (0..rows_bytes::<T>()).step_by(64 * ahead.every) {
                    prefetch(rows.wrapping_add(ahead.bytes + line));
                }
            }
        }
        let mut even = [zero; NV];
        let mut odd = [zero; NV];
        for v in 0..NV {
            // SAFETY: rows `p` and `p + 1 < kc` of the tile, readable by the caller's guarantee.
            (even[v], odd[v]) = unsafe { T::load_pair_tile(simd, b_ptr.add(offsets[v])) };
        }
        // SAFETY: elements (i, p) of the A tile, readable by the caller's guarantee.
        unsafe { rank_one(simd, &mut acc, &even, a_ptr, a.row_step) };
        // SAFETY: elements (i, p + 1) of the A tile.
        unsafe { rank_one(simd, &mut acc, &odd, a_ptr.add(a.k_step), a.row_step) };
        // The pointers may step one past the tile after the last rows; `wrapping_add` keeps
        // that free of the in-bounds requirement of `add`.
        a_ptr = a_ptr.wrapping_add(2 * a.k_step);
        b_ptr = b_ptr.wrapping_add(2 * PANEL_COLS);
    }
    if kc % 2 == 1 {
        let mut last = [zero; NV];
        for (v, b_v) in last.iter_mut().enumerate() {
            // SAFETY: the last row `p = kc - 1` of the tile, as above.
            *b_v = unsafe { T::load_row_tile(simd, b_ptr.add(offsets[v])) };
        }
        // SAFETY: elements (i, kc - 1) of the A tile.
        unsafe { rank_one(simd, &mut acc, &last, a_ptr, a.row_step) };
    }
    for row in acc.iter_mut() {
        for sums in row.iter_mut() {
            *sums = T::restore_order(simd, *sums);
        }
    }
    acc
}

/// `acc[i][v] += a[i] · b[v]` for the `MR` values `a[i] = *(a + i · row_step)`.
///
/// # Safety
/// The `MR` elements of `A` must be readable.
#[inline(always)]
unsafe fn rank_one<S: Simd, const MR: usize, const NV: usize>(
    simd: S,
    acc: &mut [[S::f32s; NV]; MR],
    b: &[S::f32s; NV],
    a: *const f32,
    row_step: usize,
) {
    for (i, row) in acc.iter_mut().enumerate() {
        // SAFETY: element `i` of the caller's readable column of `A`.
        let ai = simd.splat_f32s(unsafe { *a.add(i * row_step) });
        for (acc_iv, b_v) in row.iter_mut().zip(b) {
            *acc_iv = simd.mul_add_e_f32s(ai, *b_v, *acc_iv);
        }
    }
}

/// Bytes of two rows of a packed panel: what one step of [`accumulate`] reads from it.
const fn rows_bytes<T>() -> usize {
    2 * PANEL_COLS * core::mem::size_of::<T>()
}

/// Rows ahead the blocked product hints its packed `B` block (L2-resident, reused by every row
/// block), one hint per 128 bytes (the adjacent-line prefetcher brings the second line), so the
/// hints do not crowd the load ports.
const PACKED_AHEAD_ROWS: usize = 12;

/// How far ahead the small-`m` products hint the weights they stream once from memory, a hint
/// for every line: every tile of several rows, and the one-row sweeps whose element or int8
/// primitive asks for hints (`Widen::HINT_ONE_ROW`, `Dot::HINT_ONE_ROW`). On Zen 4 (AVX-512,
/// 1 thread) a 65 MB `1×512×32000` product went from 0.68 to 0.97 of the stream-read rate with
/// one-panel tiles and this distance (against 1.5 KB, every other line).
pub(crate) const STREAM_AHEAD_BYTES: usize = 16384;

/// Hints the cache line holding `ptr` into L1. Any address is allowed: a prefetch never faults.
#[inline(always)]
pub(crate) fn prefetch<T>(ptr: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is SSE (x86-64 baseline) and never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(ptr as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// The destination `C` of one call and its fused epilogue, shared by every task.
#[derive(Clone, Copy)]
pub(crate) struct Output<'a> {
    /// `C`'s first element; tasks write disjoint column ranges through it.
    pub c: *mut f32,
    /// Row stride of `C`.
    pub ldc: usize,
    pub bias: Option<&'a [f32]>,
    pub activation: Activation,
    pub residual: Option<View<'a>>,
}

// SAFETY: `Output` is only shared between the tasks of one `gemm` call, and each task writes a
// column range of `C` no other task touches (see `gemm`); everything else in it is read-only.
unsafe impl Sync for Output<'_> {}
// SAFETY: as for `Sync`: the pointer is used only for the disjoint writes of one call.
unsafe impl Send for Output<'_> {}

/// Which part of `C` a tile covers and which pass over `k` it finishes.
#[derive(Clone, Copy)]
pub(crate) struct TileAt {
    pub row0: usize,
    /// Valid rows (`<= MR`); the accumulators of the rest are dropped.
    pub rows: usize,
    pub col0: usize,
    /// Valid columns (`<= NV·LANES`).
    pub cols: usize,
    /// First block of `k`: overwrite `C` (never read it).
    pub first: bool,
    /// Last block of `k`: apply the epilogue.
    pub last: bool,
}

impl Output<'_> {
    /// Hints the lines of `C` a tile of `MR` rows will store (its first and last column of each
    /// row), so that their reads for ownership overlap the tile's multiply-adds.
    #[inline(always)]
    pub(crate) fn prefetch_tile<const MR: usize>(&self, row0: usize, col0: usize, cols: usize) {
        for i in 0..MR {
            let row = self.c.wrapping_add((row0 + i) * self.ldc + col0);
            prefetch(row);
            prefetch(row.wrapping_add(cols.saturating_sub(1)));
        }
    }

    /// The valid part of a tile as stored in `C` (zero outside it): the sums of the blocks of
    /// `k` before this one, for the tile to continue from.
    ///
    /// # Safety
    /// As [`Output::store`], for reading.
    #[inline(always)]
    pub(crate) unsafe fn load_tile<S: Simd, const MR: usize, const NV: usize>(
        &self,
        simd: S,
        at: TileAt,
    ) -> [[S::f32s; NV]; MR] {
        let lanes = S::F32_LANES;
        let mut acc = [[simd.splat_f32s(0.0); NV]; MR];
        for (i, acc_row) in acc.iter_mut().enumerate().take(at.rows) {
            // SAFETY: the caller guarantees this row segment is inside `C` and exclusively ours.
            let c_row = unsafe {
                core::slice::from_raw_parts(self.c.add((at.row0 + i) * self.ldc + at.col0), at.cols)
            };
            for (v, acc_v) in acc_row.iter_mut().enumerate() {
                let lo = v * lanes;
                if lo >= at.cols {
                    break;
                }
                *acc_v = load(simd, &c_row[lo..at.cols.min(lo + lanes)]);
            }
        }
        acc
    }

    /// Writes the valid part of a tile: `C = acc` (first block) or `C += acc`, and on the last
    /// block `C = activation(C + bias) + residual`.
    ///
    /// # Safety
    /// `[row0, row0 + rows) × [col0, col0 + cols)` lies inside `C`'s validated view (and so
    /// inside the bias and residual, validated to the same shape), and no other thread
    /// accesses those elements of `C` during the call.
    #[inline(always)]
    pub(crate) unsafe fn store<S: Simd, const MR: usize, const NV: usize>(
        &self,
        simd: S,
        acc: &[[S::f32s; NV]; MR],
        at: TileAt,
    ) {
        let lanes = S::F32_LANES;
        for (i, acc_row) in acc.iter().enumerate() {
            if i >= at.rows {
                break;
            }
            let row = at.row0 + i;
            // SAFETY: the caller guarantees this row segment is inside `C` and exclusively ours.
            let c_row = unsafe {
                core::slice::from_raw_parts_mut(self.c.add(row * self.ldc + at.col0), at.cols)
            };
            for (v, &acc_v) in acc_row.iter().enumerate() {
                let lo = v * lanes;
                if lo >= at.cols {
                    break;
                }
                let hi = at.cols.min(lo + lanes);
                let dst = &mut c_row[lo..hi];
                let mut x = acc_v;
                if !at.first {
                    x = simd.add_f32s(x, load(simd, dst));
                }
                if at.last {
                    let (c_lo, c_hi) = (at.col0 + lo, at.col0 + hi);
                    if let Some(bias) = self.bias {
                        x = simd.add_f32s(x, load(simd, &bias[c_lo..c_hi]));
                    }
                    x = self.activation.apply(simd, x);
                    if let Some(r) = self.residual {
                        let start = row * r.stride;
                        x = simd.add_f32s(x, load(simd, &r.data[start + c_lo..start + c_hi]));
                    }
                }
                store(simd, dst, x);
            }
        }
    }
}

/// Loads up to one vector; lanes past the slice are zero.
#[inline(always)]
fn load<S: Simd>(simd: S, src: &[f32]) -> S::f32s {
    match S::as_simd_f32s(src).0.first() {
        Some(&v) => v,
        None => simd.partial_load_f32s(src),
    }
}

/// Stores the first `dst.len()` (at most one vector of) lanes.
#[inline(always)]
fn store<S: Simd>(simd: S, dst: &mut [f32], v: S::f32s) {
    match S::as_mut_simd_f32s(dst).0.first_mut() {
        Some(slot) => *slot = v,
        None => simd.partial_store_f32s(dst, v),
    }
}
