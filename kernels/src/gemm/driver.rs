//! The loops around the microkernel: cache blocking over a prepacked `B` for large `m`, and the
//! B-streaming path for small `m` (decoding), per task (a range of `B` panels).

use crate::gemm::element::Element;
use crate::gemm::packed_b::{padded_k, PANEL_COLS};
use crate::gemm::tile::{accumulate, accumulate_small, ATile, Output, TileAt};
use crate::tiling::{self, GemmBlocking, AVX2, AVX512, NEON, SCALAR};
use crate::view::View;
use pulp::Simd;

/// Largest `m` served by the small-`m` path (rows of `A` read in place, `B` streamed once).
pub(crate) const SMALL_M: usize = 16;

/// The blocking of the level whose vectors have `lanes` `f32` lanes.
const fn blocking(lanes: usize) -> GemmBlocking {
    tiling::of_lanes(lanes).gemm
}

/// Everything one task reads: `A`, the packed `B` and its shape.
pub(crate) struct Operands<'a, T> {
    pub a: View<'a>,
    /// Packed panels of `B` (see `packed_b`).
    pub b: &'a [T],
    pub k: usize,
    pub n: usize,
}

impl<T> Clone for Operands<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Operands<'_, T> {}

impl<T: Element> Operands<'_, T> {
    /// Elements between the starts of consecutive panels of `B`.
    fn panel_stride(&self) -> usize {
        padded_k::<T>(self.k) * PANEL_COLS
    }

    /// Where row `kk` (a multiple of `T::K_GROUP`) of column `col` lives in the packed `B`.
    fn b_at(&self, kk: usize, col: usize) -> *const T {
        let offset = (col / PANEL_COLS) * self.panel_stride()
            + kk * PANEL_COLS
            + (col % PANEL_COLS) * T::K_GROUP;
        self.b.as_ptr().wrapping_add(offset)
    }
}

/// One task's share: panels `[panel0, panel1)` of `B`, i.e. the columns
/// `[panel0·32, min(panel1·32, n))` of `C`.
#[derive(Clone, Copy)]
pub(crate) struct Columns {
    pub panel0: usize,
    pub panel1: usize,
}

/// Computes the task's columns of `C` for every row, with the cache-blocked path. `wide` is
/// the task's own widening buffer for a 16-bit `B` ([`widen_len`] floats; empty otherwise).
///
/// # Safety
/// The operands and output are validated for the call (`A` is `m × k`, `b` holds the packed
/// `k × n` panels, `C`, bias and residual cover `m × n`), `cols` lies inside `0..panels(n)`, and
/// no other thread writes these columns of `C`.
///
/// Measured here: copying blocks of `A` into scratch (BLIS's packing) cost more than it saved
/// (each row of `A` is already one sequential stream in `k`, and the packing is paid again for
/// every block of columns), so `A` is read in place. The `m mod MR` rows left below the last
/// whole tile go through the small-`m` tiles instead of a zero-padded full tile, which would
/// waste up to `MR - 1` rows of multiply-adds.
#[inline(always)]
pub(crate) unsafe fn blocked_path<S: Simd, T: Element>(
    simd: S,
    ops: Operands<'_, T>,
    out: &Output<'_>,
    cols: Columns,
    wide: &mut [f32],
) {
    let cols = (cols, wide);
    // SAFETY: forwarded contract.
    unsafe {
        match S::F32_LANES {
            16 => {
                blocked_tiles::<S, T, { AVX512.gemm.mr }, { AVX512.gemm.nv }>(simd, ops, out, cols)
            }
            8 => blocked_tiles::<S, T, { AVX2.gemm.mr }, { AVX2.gemm.nv }>(simd, ops, out, cols),
            4 => blocked_tiles::<S, T, { NEON.gemm.mr }, { NEON.gemm.nv }>(simd, ops, out, cols),
            _ => {
                blocked_tiles::<S, T, { SCALAR.gemm.mr }, { SCALAR.gemm.nv }>(simd, ops, out, cols)
            }
        }
    }
}

/// `blocked_path` for the tile `MR × NV` (which must be the level's `blocking`).
///
/// # Safety
/// As `blocked_path`.
#[inline(always)]
unsafe fn blocked_tiles<S: Simd, T: Element, const MR: usize, const NV: usize>(
    simd: S,
    ops: Operands<'_, T>,
    out: &Output<'_>,
    (cols, wide): (Columns, &mut [f32]),
) {
    let GemmBlocking { mc, kc: kc_max, .. } = blocking(S::F32_LANES);
    debug_assert_eq!(blocking(S::F32_LANES).mr, MR);
    let (m, k) = (ops.a.rows, ops.k);
    // Whole tiles of rows take the blocked loops; the rest (fewer than `MR`, so at most
    // `small_max_rows`) take the small-`m` tiles.
    let full = m / MR * MR;
    // With k == 0 one pass of depth 0 still writes the epilogue of a zero product. Blocks of
    // k and of rows are balanced (no thin last block that re-streams B for a few rows).
    // Blocks start on whole row groups of the packed B.
    let k_blocks = k.div_ceil(kc_max).max(1);
    let kc_step = padded_k::<T>(k.div_ceil(k_blocks));
    let mc_step = full.div_ceil(full.div_ceil(mc).max(1)).div_ceil(MR) * MR;
    // Column blocks whose `kc`-deep slice of B fits half of L2: each stays there while every
    // row block of A streams past it.
    let nc_panels =
        (B_BLOCK_BYTES / (kc_step.max(1) * PANEL_COLS * core::mem::size_of::<T>())).max(1);
    let mut jc = cols.panel0;
    while jc < cols.panel1 {
        let block = Columns {
            panel0: jc,
            panel1: cols.panel1.min(jc + nc_panels),
        };
        // SAFETY: forwarded contract, for a sub-range of this task's panels; rows `[0, full)`
        // are whole tiles and `[full, m)` are fewer than `MR <= small_max_rows`.
        unsafe {
            let steps = Steps {
                rows: full,
                kc: kc_step,
                mc: mc_step,
            };
            blocked_columns::<S, T, MR, NV>(simd, ops, out, block, steps, &mut *wide);
            if full < m {
                small_rows(simd, ops, out, block, (full, m - full), Reads::Cached);
            }
        }
        jc = block.panel1;
    }
}

/// Bytes of packed B one column block of the blocked path spans (half of L2).
const B_BLOCK_BYTES: usize = 512 * 1024;

/// Floats of one task's widening buffer for a reduction length `k`: one `kc × 32`
/// micro-panel of `B` as `f32`, for the deepest `kc` of any level.
pub(crate) fn widen_len(k: usize) -> usize {
    k.next_multiple_of(2).min(tiling::MAX_GEMM_KC) * PANEL_COLS
}

/// The balanced steps of the blocked loops: the first `rows` rows (whole tiles), `kc`-deep
/// blocks of `k`, `mc`-row blocks of `A`.
#[derive(Clone, Copy)]
struct Steps {
    rows: usize,
    kc: usize,
    mc: usize,
}

/// `blocked_tiles` for one column block and the first `steps.rows` rows (a multiple of `MR`).
///
/// A 16-bit `B` is widened once per `kc × 32` micro-panel and row block into `wide` (the `f32`
/// panel layout) when it holds one, and every tile of the row block reads it from there: the
/// widening is paid once per `mc / MR` tiles instead of by each (measured at AVX2, where the
/// in-register widening of a 6 × 16 tile also needs more than the 16 registers).
///
/// # Safety
/// As `blocked_path`, with `steps.rows <= m` a multiple of `MR`.
#[inline(always)]
unsafe fn blocked_columns<S: Simd, T: Element, const MR: usize, const NV: usize>(
    simd: S,
    ops: Operands<'_, T>,
    out: &Output<'_>,
    cols: Columns,
    steps: Steps,
    wide: &mut [f32],
) {
    debug_assert!(steps.rows.is_multiple_of(MR) && steps.rows <= ops.a.rows);
    let k = ops.k;
    let col_end = ops.n.min(cols.panel1 * PANEL_COLS);
    let widen = T::K_GROUP == 2 && wide.len() >= steps.kc * PANEL_COLS;
    let mut pc = 0;
    loop {
        let kc = steps.kc.min(k - pc);
        let mut block = Block {
            pc,
            kc,
            first: pc == 0,
            last: pc + kc >= k,
            row0: 0,
            rows: 0,
            col0: 0,
            col_end: 0,
        };
        while block.row0 < steps.rows {
            block.rows = steps.mc.min(steps.rows - block.row0);
            for panel in cols.panel0..cols.panel1 {
                block.col0 = panel * PANEL_COLS;
                block.col_end = col_end.min(block.col0 + PANEL_COLS);
                let b = ops.b_at(pc, block.col0);
                // SAFETY: the micro-panel's `kc` rows from `pc` (whole row pairs for 16-bit
                // types) exist in the packed B, and `wide` holds `kc × 32` floats. Tiles:
                // forwarded contract for this task's panel and the block's rows.
                unsafe {
                    if widen {
                        widen_panel(simd, b, kc, wide);
                        panel_tiles::<S, f32, MR, NV>(simd, ops.a, out, wide.as_ptr(), block);
                    } else {
                        panel_tiles::<S, T, MR, NV>(simd, ops.a, out, b, block);
                    }
                }
            }
            block.row0 += block.rows;
        }
        if block.last {
            break;
        }
        pc += kc;
    }
}

/// One `kc`-deep block of rows × one panel's columns of the blocked loops.
#[derive(Clone, Copy)]
struct Block {
    /// First row of `k` and depth.
    pc: usize,
    kc: usize,
    /// First and last block of `k` (overwrite `C`; apply the epilogue).
    first: bool,
    last: bool,
    /// Rows `[row0, row0 + rows)`, a multiple of `MR`.
    row0: usize,
    rows: usize,
    /// Columns `[col0, col_end)` of one panel.
    col0: usize,
    col_end: usize,
}

/// Sweeps one panel's columns of `block` with `MR × NV` tiles, reading the micro-panel at `b`
/// (element type `U`: the packed `B` itself, or its widened `f32` copy; `NV · lanes` divides
/// the 32 columns of a panel, so no tile leaves it).
///
/// # Safety
/// `b` is row `block.pc` of the panel's first column in a packed layout of `U` whose `kc` rows
/// are readable; `A`, `C` and the columns as for `blocked_path`.
#[inline(always)]
unsafe fn panel_tiles<S: Simd, U: Element, const MR: usize, const NV: usize>(
    simd: S,
    a: View<'_>,
    out: &Output<'_>,
    b: *const U,
    block: Block,
) {
    let tile_cols = NV * S::F32_LANES;
    let mut col0 = block.col0;
    while col0 < block.col_end {
        let b_tile = b.wrapping_add((col0 - block.col0) * U::K_GROUP);
        let width = tile_cols.min(block.col_end - col0);
        let mut row = block.row0;
        while row < block.row0 + block.rows {
            // Each row of A is read in place, one sequential stream in k.
            let a_tile = ATile {
                ptr: a.data.as_ptr().wrapping_add(row * a.stride + block.pc),
                row_step: a.stride,
                k_step: 1,
            };
            out.prefetch_tile::<MR>(row, col0, width);
            // The tile continues from the sums the earlier blocks of `k` stored, and so
            // overwrites them.
            let at = TileAt {
                row0: row,
                rows: MR,
                col0,
                cols: width,
                first: true,
                last: block.last,
            };
            let init = if block.first {
                [[simd.splat_f32s(0.0); NV]; MR]
            } else {
                // SAFETY: rows and columns inside `m × n` and in this task's columns.
                unsafe { out.load_tile::<S, MR, NV>(simd, at) }
            };
            // SAFETY: the tile's `MR` rows from `row` (inside the block's rows) and columns
            // `[pc, pc + kc)` lie inside the validated `A`; its `tile_cols` columns stay inside
            // the panel (the stride between panels is never used), whose `kc` rows are readable.
            let acc =
                unsafe { accumulate::<S, U, MR, NV>(simd, block.kc, a_tile, b_tile, 0, init) };
            // SAFETY: rows and columns inside `m × n` and in this task's columns.
            unsafe { out.store::<S, MR, NV>(simd, &acc, at) };
            row += MR;
        }
        col0 += tile_cols;
    }
}

/// Widens rows `[0, kc)` of one 32-column micro-panel of a 16-bit `B` (row pair `q`'s 32
/// words at `b + 64·q`) into `dst` in the `f32` panel layout (row `p` at `dst[32·p..]`).
///
/// # Safety
/// The `kc` rows' words (`kc` rounded up to a pair) at `b` must be readable; `dst` must hold
/// `kc × 32` floats (checked).
#[inline(always)]
unsafe fn widen_panel<S: Simd, T: Element>(simd: S, b: *const T, kc: usize, dst: &mut [f32]) {
    let lanes = S::F32_LANES;
    if dst.len() < kc * PANEL_COLS {
        debug_assert!(false, "widening buffer too small");
        return;
    }
    let out = dst.as_mut_ptr();
    for q in 0..kc / 2 {
        for col in (0..PANEL_COLS).step_by(lanes) {
            // SAFETY: row pair `q` of the panel is readable (caller); `col + lanes <= 32`.
            let (even, odd) =
                unsafe { T::load_pair(simd, b.add(2 * q * PANEL_COLS + col * T::K_GROUP)) };
            // SAFETY: rows `2q + 1 < kc` of `dst`, `lanes` floats from `col`, inside it.
            unsafe {
                core::ptr::write_unaligned(out.add(2 * q * PANEL_COLS + col).cast(), even);
                core::ptr::write_unaligned(out.add((2 * q + 1) * PANEL_COLS + col).cast(), odd);
            }
        }
    }
    if kc % 2 == 1 {
        let p = kc - 1;
        for col in (0..PANEL_COLS).step_by(lanes) {
            // SAFETY: as above, for the last (even) row `p`, whose pair's words are whole.
            unsafe {
                let row = T::load_row(simd, b.add(p * PANEL_COLS + col * T::K_GROUP));
                core::ptr::write_unaligned(out.add(p * PANEL_COLS + col).cast::<S::f32s>(), row);
            }
        }
    }
}

/// Computes the task's columns of `C` for all `m <= SMALL_M` rows, reading `A` in place and
/// each packed panel of `B` once from memory (then from L2 for further row blocks).
///
/// # Safety
/// As `blocked_path`.
#[inline(always)]
pub(crate) unsafe fn small_path<S: Simd, T: Element>(
    simd: S,
    ops: Operands<'_, T>,
    out: &Output<'_>,
    cols: Columns,
) {
    let m = ops.a.rows;
    let max_rows = small_max_rows(S::F32_LANES);
    let blocks = m.div_ceil(max_rows);
    if blocks == 0 {
        return;
    }
    // Panels per span: a span of B stays in L2 while every row block reads it.
    let span = if blocks == 1 {
        cols.panel1 - cols.panel0
    } else {
        (SPAN_BYTES / (ops.k.max(1) * PANEL_COLS * core::mem::size_of::<T>())).max(1)
    };
    let reads = if blocks == 1 {
        Reads::Memory
    } else {
        Reads::Cached
    };
    let mut p = cols.panel0;
    while p < cols.panel1 {
        let span_cols = Columns {
            panel0: p,
            panel1: cols.panel1.min(p + span),
        };
        let mut row0 = 0;
        for block in 0..blocks {
            // Balanced blocks: the first `m % blocks` get one extra row.
            let rows = m / blocks + usize::from(block < m % blocks);
            // SAFETY: forwarded contract; rows `[row0, row0 + rows)` are inside `A` and `C`.
            unsafe { small_rows(simd, ops, out, span_cols, (row0, rows), reads) };
            row0 += rows;
        }
        p = span_cols.panel1;
    }
}

/// Bytes of packed `B` a span covers when `m` needs several row blocks (half of L2).
const SPAN_BYTES: usize = 512 * 1024;

/// Rows per block of the small path: as many as the accumulators of a full tile allow.
const fn small_max_rows(lanes: usize) -> usize {
    tiling::of_lanes(lanes).gemm_small_rows
}

/// Where a row block of the small path finds `B`.
#[derive(Clone, Copy, PartialEq)]
enum Reads {
    /// The only block over its columns: `B` comes from memory, once.
    Memory,
    /// One of several blocks over a span of `B` kept in L2, or the rows left below the blocked
    /// path's tiles.
    Cached,
}

/// Dispatches one row block of `rows` rows to the tile shape chosen for it: enough independent
/// accumulators to hide the FMA latency, few enough to stay in registers. One row (a batch-1
/// decode step, whose weights come from memory) takes one panel per tile at AVX-512 and AVX2, so
/// the weights are read as one forward stream.
///
/// Three rows at AVX2 take a whole panel (3 × 4 vectors) only when `B` comes from memory: the
/// tile's 12 accumulators and 8 loaded vectors spill, which the memory stream hides, and it
/// reads each panel as one forward stream; from L2 the 3 × 2 tile is faster
/// (`TESSEL_ISA=avx2 gemm_best`, Zen 5, 2 runs each: 3×384×512 0.42–0.45 → 0.69–0.71 of
/// `fma-peak`, 7×384×51864 (4 + 3 rows) 0.46–0.47 → 0.56; but 3×384×51864 0.42–0.46 → 0.40).
///
/// # Safety
/// As `small_path`, for rows `[row0, row0 + rows)` with `1 <= rows <= small_max_rows`.
#[inline(always)]
unsafe fn small_rows<S: Simd, T: Element>(
    simd: S,
    ops: Operands<'_, T>,
    out: &Output<'_>,
    cols: Columns,
    (row0, rows): (usize, usize),
    reads: Reads,
) {
    debug_assert!((1..=small_max_rows(S::F32_LANES)).contains(&rows));
    let run = (simd, ops, out, cols, row0);
    // SAFETY: forwarded contract; each arm's `MB` equals `rows`.
    unsafe {
        match (S::F32_LANES, rows) {
            (16, 1) => small_tiles::<S, T, 1, 2, 2>(run),
            (16, 2) => small_tiles::<S, T, 2, 4, 2>(run),
            (16, 3) => small_tiles::<S, T, 3, 4, 2>(run),
            (16, 4) => small_tiles::<S, T, 4, 4, 2>(run),
            (16, 5) => small_tiles::<S, T, 5, 2, 2>(run),
            (16, 6) => small_tiles::<S, T, 6, 2, 2>(run),
            (16, 7) => small_tiles::<S, T, 7, 2, 2>(run),
            (16, _) => small_tiles::<S, T, 8, 2, 2>(run),
            (8, 1) => small_tiles::<S, T, 1, 4, 4>(run),
            (8, 2) => small_tiles::<S, T, 2, 4, 4>(run),
            (8, 3) if reads == Reads::Memory => small_tiles::<S, T, 3, 4, 4>(run),
            (8, 3) => small_tiles::<S, T, 3, 2, 2>(run),
            (8, 4) => small_tiles::<S, T, 4, 2, 2>(run),
            (8, 5) => small_tiles::<S, T, 5, 2, 2>(run),
            (8, _) => small_tiles::<S, T, 6, 2, 2>(run),
            (4, 1) => small_tiles::<S, T, 1, 8, 8>(run),
            (4, 2) => small_tiles::<S, T, 2, 8, 8>(run),
            (4, 3) => small_tiles::<S, T, 3, 4, 4>(run),
            (4, 4) => small_tiles::<S, T, 4, 4, 4>(run),
            (4, 5) => small_tiles::<S, T, 5, 4, 4>(run),
            (4, _) => small_tiles::<S, T, 6, 4, 4>(run),
            (_, 1) => small_tiles::<S, T, 1, 4, 4>(run),
            (_, 2) => small_tiles::<S, T, 2, 4, 4>(run),
            (_, 3) => small_tiles::<S, T, 3, 4, 4>(run),
            (_, _) => small_tiles::<S, T, 4, 4, 4>(run),
        }
    }
}

/// Sweeps the columns of `cols` with `MB × NV` tiles over the whole depth `k`, reading `A` in
/// place; where fewer than `NV` vectors of panels are left, `MB × NV_TAIL` tiles finish
/// (`NV_TAIL · lanes` divides 32).
///
/// # Safety
/// As `small_rows` with `rows == MB`.
#[inline(always)]
unsafe fn small_tiles<
    S: Simd,
    T: Element,
    const MB: usize,
    const NV: usize,
    const NV_TAIL: usize,
>(
    (simd, ops, out, cols, row0): (S, Operands<'_, T>, &Output<'_>, Columns, usize),
) {
    let k = ops.k;
    let panel_stride = ops.panel_stride();
    let padded_end = cols.panel1 * PANEL_COLS;
    let col_end = ops.n.min(padded_end);
    let a = ATile {
        // Not dereferenced when `k == 0` (then `A` may be empty).
        ptr: ops.a.data.as_ptr().wrapping_add(row0 * ops.a.stride),
        row_step: ops.a.stride,
        k_step: 1,
    };
    let at = |col0: usize, width: usize| TileAt {
        row0,
        rows: MB,
        col0,
        cols: width.min(col_end - col0),
        first: true,
        last: true,
    };
    let mut col0 = cols.panel0 * PANEL_COLS;
    while col0 < col_end {
        let b = ops.b_at(0, col0);
        let wide = NV * S::F32_LANES;
        let width = if col0 + wide <= padded_end {
            // SAFETY: `MB` rows of `A` by `k` from `row0`; the tile's columns lie in this
            // task's panels, all `k` rows of which are in the packed B.
            let acc = unsafe { accumulate_small::<S, T, MB, NV>(simd, k, a, b, panel_stride) };
            // SAFETY: rows inside `m`, columns inside this task's part of `n`.
            unsafe { out.store::<S, MB, NV>(simd, &acc, at(col0, wide)) };
            wide
        } else {
            let narrow = NV_TAIL * S::F32_LANES;
            // SAFETY: as above; `narrow` divides the panel width so the tile ends inside the
            // task's last panel.
            let acc = unsafe { accumulate_small::<S, T, MB, NV_TAIL>(simd, k, a, b, panel_stride) };
            // SAFETY: as above.
            unsafe { out.store::<S, MB, NV_TAIL>(simd, &acc, at(col0, narrow)) };
            narrow
        };
        col0 += width;
    }
}
