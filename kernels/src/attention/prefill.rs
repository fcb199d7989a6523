//! The prefill path: many queries, SIMD lanes across queries.
//!
//! Per head and per block of [`block_tiles`] query tiles of `NR × lanes` queries:
//! 1. pack each tile's scaled queries transposed, `Qᵀ` (`d_head × tile`);
//! 2. for each tile of [`KEY_TILE`] keys inside the block's visible band, pack the K and V rows
//!    contiguously once, then for each query tile that sees some of those keys:
//!    `Sᵀ = K Qᵀ` (microkernel), add the bias, mask the band's edges, the online softmax lane by
//!    lane (running max `m`, running sum `l`, rescale `alpha`), and `Oᵀ = alpha ⊙ Oᵀ + Vᵀ Pᵀ`
//!    (microkernel, rescale fused into its store). Key tiles a query tile does not see at all
//!    (above the causal diagonal, outside the sliding window or the radius) are skipped.
//! 3. write `O / l` into the output (0 where `l = 0`).

use super::band::Band;
use super::prefetch::prefetch_rows;
use super::tile::{tile_of_width, Lhs, Product, Rows, Store};
use super::{Checked, Operands};
use crate::error::KernelError;
use crate::isa::Isa;
use crate::math::exp_non_positive;
use crate::scratch::{Scratch, ScratchSpec};
use crate::tiling::{self, AVX2, AVX512, MAX_ATTENTION_BLOCK_TILES, NEON, SCALAR};
use crate::view::ViewMut;
use core::ops::Range;
use pulp::Simd;

/// Keys per tile: `Sᵀ` is `KEY_TILE × query tile` floats (12 KiB on AVX-512).
pub(crate) const KEY_TILE: usize = 64;

/// Query tiles sharing each packed key tile at a level with `lanes` f32 lanes: K and V are
/// read from the caller's memory and packed once per block of this many query tiles.
const fn block_tiles(lanes: usize) -> usize {
    tiling::of_lanes(lanes).attention.block_tiles
}

/// Query vectors per tile (`NR`), from the level's [`tiling`] description.
const fn query_vectors(lanes: usize) -> usize {
    tiling::of_lanes(lanes).attention.query_vectors
}

/// Queries per tile at a level with `lanes` f32 lanes.
pub(crate) const fn query_tile(lanes: usize) -> usize {
    lanes * query_vectors(lanes)
}

/// Queries per block (the unit of the query loop, [`block_tiles`] tiles) at a level with
/// `lanes` f32 lanes.
pub(crate) const fn query_block_len(lanes: usize) -> usize {
    block_tiles(lanes) * query_tile(lanes)
}

/// Rows of the packed K and V tiles: a key tile, or a query tile staged before transposition.
const fn staging_rows(lanes: usize) -> usize {
    let tile = query_tile(lanes);
    if tile > KEY_TILE {
        tile
    } else {
        KEY_TILE
    }
}

/// Scratch of the prefill path: per query tile of a block `Qᵀ`, `Oᵀ`, running max and sum; a
/// packed tile of K and of V, `Sᵀ`, and two per-query rows of mask bounds.
pub(crate) fn scratch(lanes: usize, d_head: usize) -> ScratchSpec {
    let tile = query_tile(lanes);
    let blocks = block_tiles(lanes);
    let packed = ScratchSpec::f32s(d_head.saturating_mul(tile).saturating_mul(blocks));
    // The K tile also stages a query tile's rows before their transposition.
    let kv_tile = ScratchSpec::f32s(d_head.saturating_mul(staging_rows(lanes)));
    packed
        .and(packed)
        .and(ScratchSpec::f32s(2 * tile * blocks))
        .and(kv_tile)
        .and(kv_tile)
        .and(ScratchSpec::f32s(KEY_TILE * tile))
        .and(ScratchSpec::f32s(tile))
        .and(ScratchSpec::f32s(tile))
}

/// Runs the prefill path of a validated call.
pub(crate) fn run(
    isa: Isa,
    checked: &Checked,
    operands: &Operands<'_>,
    out: ViewMut<'_>,
    scratch: &mut Scratch<'_>,
) -> Result<(), KernelError> {
    struct Prefill<'a, 'b, 's> {
        checked: &'a Checked,
        operands: &'a Operands<'b>,
        out: ViewMut<'b>,
        scratch: &'a mut Scratch<'s>,
    }
    impl pulp::WithSimd for Prefill<'_, '_, '_> {
        type Output = Result<(), KernelError>;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> Self::Output {
            let Prefill {
                checked,
                operands,
                out,
                scratch,
            } = self;
            // The microkernel shape of each level's `tiling` description.
            let run = (simd, checked, operands, out, scratch);
            match S::F32_LANES {
                16 => {
                    run_level::<S, { AVX512.attention.rows }, { AVX512.attention.query_vectors }>(
                        run,
                    )
                }
                8 => run_level::<S, { AVX2.attention.rows }, { AVX2.attention.query_vectors }>(run),
                4 => run_level::<S, { NEON.attention.rows }, { NEON.attention.query_vectors }>(run),
                _ => run_level::<S, { SCALAR.attention.rows }, { SCALAR.attention.query_vectors }>(
                    run,
                ),
            }
        }
    }
    isa.dispatch(Prefill {
        checked,
        operands,
        out,
        scratch,
    })
}

/// [`run_blocks`] with its arguments in one tuple (so the per-level dispatch stays short).
#[inline(always)]
fn run_level<S: Simd, const MR: usize, const NR: usize>(
    (simd, checked, operands, out, scratch): (
        S,
        &Checked,
        &Operands<'_>,
        ViewMut<'_>,
        &mut Scratch<'_>,
    ),
) -> Result<(), KernelError> {
    run_blocks::<S, MR, NR>(simd, checked, operands, out, scratch)
}

/// The scratch of the prefill path, as `f32`; viewed as vectors of `NR` per row where needed.
struct Tiles<'s> {
    /// Per query tile of the block: `Qᵀ · scale`, `d_head` rows of the query tile.
    q_t: &'s mut [f32],
    /// Per query tile: `Oᵀ`, unnormalised, `d_head` rows of the query tile.
    o_t: &'s mut [f32],
    /// Per query tile: running max then running sum, one row of the query tile each.
    stats: &'s mut [f32],
    /// The key tile's K rows, contiguous (`KEY_TILE × d_head`): no cache-set aliasing from the
    /// caller's row stride, sequential reads in the microkernel.
    k_tile: &'s mut [f32],
    /// The key tile's V rows, contiguous.
    v_tile: &'s mut [f32],
    /// Scores then probabilities of one key tile, `KEY_TILE` rows of the query tile.
    s_t: &'s mut [f32],
    /// First and end of each query's visible keys relative to the key tile; then `1 / l`.
    lo: &'s mut [f32],
    hi: &'s mut [f32],
}

#[inline(always)]
fn run_blocks<S: Simd, const MR: usize, const NR: usize>(
    simd: S,
    checked: &Checked,
    operands: &Operands<'_>,
    mut out: ViewMut<'_>,
    scratch: &mut Scratch<'_>,
) -> Result<(), KernelError> {
    let lanes = S::F32_LANES;
    let tile_len = NR * lanes;
    if tile_len != query_tile(lanes) {
        return Err(KernelError::InvalidArgument(
            "prefill tile geometry mismatch",
        ));
    }
    let d = checked.shape.d_head;
    let blocks = block_tiles(lanes);
    let mut tiles = Tiles {
        q_t: scratch.take(blocks * d * tile_len)?,
        o_t: scratch.take(blocks * d * tile_len)?,
        stats: scratch.take(blocks * 2 * tile_len)?,
        k_tile: scratch.take(d * staging_rows(lanes))?,
        v_tile: scratch.take(d * staging_rows(lanes))?,
        s_t: scratch.take(KEY_TILE * tile_len)?,
        lo: scratch.take(tile_len)?,
        hi: scratch.take(tile_len)?,
    };
    let block_len = query_block_len(lanes);
    for head in 0..checked.shape.heads {
        let mut i0 = 0;
        while i0 < checked.shape.q_len {
            let rows = block_len.min(checked.shape.q_len - i0);
            query_block::<S, MR, NR>(
                simd,
                checked,
                operands,
                &mut out,
                &mut tiles,
                head,
                i0..i0 + rows,
            );
            i0 += rows;
        }
    }
    Ok(())
}

/// Attention of the queries `queries` (at most one block) of head `head`.
#[inline(always)]
fn query_block<S: Simd, const MR: usize, const NR: usize>(
    simd: S,
    checked: &Checked,
    operands: &Operands<'_>,
    out: &mut ViewMut<'_>,
    tiles: &mut Tiles<'_>,
    head: usize,
    queries: Range<usize>,
) {
    let tile_len = NR * S::F32_LANES;
    let d = checked.shape.d_head;
    let col = head * d;
    let band = &checked.band;
    let tile_count = queries.len().div_ceil(tile_len);
    let tile_rows = |t: usize| {
        let start = queries.start + t * tile_len;
        start..(start + tile_len).min(queries.end)
    };
    let mut first = [true; MAX_ATTENTION_BLOCK_TILES];

    // Qᵀ · scale per tile, zero in the lanes past the last query; max = -inf, sum = 0.
    for t in 0..tile_count {
        // Rows copied contiguously first (whole-vector reads of the caller's memory), then
        // transposed within L1 (the K tile is free until the key loop).
        let rows = tile_rows(t);
        let staged = &mut *tiles.k_tile;
        pack_rows(
            simd,
            &operands.q,
            rows.clone(),
            col,
            d,
            checked.scale,
            staged,
        );
        let q_t = &mut tiles.q_t[t * d * tile_len..][..d * tile_len];
        for (c, q_t_row) in q_t.chunks_exact_mut(tile_len).enumerate() {
            let (live, pad) = q_t_row.split_at_mut(rows.len());
            for (r, y) in live.iter_mut().enumerate() {
                *y = staged[r * d + c];
            }
            pad.fill(0.0);
        }
        let (max, sum) = tiles.stats[t * 2 * tile_len..][..2 * tile_len].split_at_mut(tile_len);
        max.fill(f32::NEG_INFINITY);
        sum.fill(0.0);
    }

    let one = opaque_one();
    // The global keys, then the local ones: two bands of one range per query, each key in one.
    let parts = band.parts();
    let visible = block_keys(&parts, &queries);
    let tile_total: usize = visible.iter().map(|v| v.len().div_ceil(KEY_TILE)).sum();
    // The next block's queries are prefetched a slice per key tile while this block computes
    // (all at once would be evicted again before use).
    let next_block = queries.end..(queries.end + queries.len()).min(checked.shape.q_len);
    let q_rows_per_tile = next_block.len().div_ceil(tile_total.max(1));
    let mut next_q = next_block.start;
    for (p, (part, range)) in parts.iter().zip(&visible).enumerate() {
        for (j0, keys) in key_tiles(range.clone()) {
            // The next key tile's K and V rows (after the global keys' last tile, the local
            // keys' first), a slice before each query tile's step.
            let next_tile = if j0 + keys < range.end {
                (j0 + keys)..(j0 + keys + KEY_TILE).min(range.end)
            } else if p == 0 {
                let local = &visible[1];
                local.start..(local.start + KEY_TILE).min(local.end)
            } else {
                0..0
            };
            let slice_len = KEY_TILE.div_ceil(tile_count);
            let q_slice = next_q..(next_q + q_rows_per_tile).min(next_block.end);
            next_q = q_slice.end;
            prefetch_rows(&operands.q, q_slice, col, d);
            let mut packed = false;
            for (t, first) in first.iter_mut().enumerate().take(tile_count) {
                let slice_start = (next_tile.start + t * slice_len).min(next_tile.end);
                let slice = slice_start..(slice_start + slice_len).min(next_tile.end);
                prefetch_rows(&operands.k, slice.clone(), col, d);
                prefetch_rows(&operands.v, slice, col, d);
                let Some(key_tile) = key_tile(part, tile_rows(t), j0, keys) else {
                    continue;
                };
                if !packed {
                    pack_rows(simd, &operands.k, j0..j0 + keys, col, d, one, tiles.k_tile);
                    pack_rows(simd, &operands.v, j0..j0 + keys, col, d, one, tiles.v_tile);
                    packed = true;
                }
                tile_step::<S, MR, NR>(
                    simd,
                    (checked, part),
                    operands,
                    tiles,
                    head,
                    t,
                    &tile_rows(t),
                    key_tile,
                    *first,
                );
                *first = false;
            }
        }
    }

    // out = Oᵀ / l, zero for queries that saw nothing.
    for (t, &first) in first.iter().enumerate().take(tile_count) {
        let sum = &tiles.stats[(2 * t + 1) * tile_len..][..tile_len];
        for (slot, &l) in tiles.lo.iter_mut().zip(sum) {
            *slot = if l > 0.0 { 1.0 / l } else { 0.0 };
        }
        let o_t = &tiles.o_t[t * d * tile_len..][..d * tile_len];
        for (r, i) in tile_rows(t).enumerate() {
            let out_row = &mut out.data[i * out.stride + col..][..d];
            if first {
                out_row.fill(0.0);
                continue;
            }
            let inverse = tiles.lo[r];
            for (c, y) in out_row.iter_mut().enumerate() {
                *y = o_t[c * tile_len + r] * inverse;
            }
        }
    }
}

/// The keys a block of queries goes through, for each part of the band ([`Band::parts`]): the
/// keys any of its queries sees.
fn block_keys(parts: &[Band; 2], queries: &Range<usize>) -> [Range<usize>; 2] {
    parts
        .each_ref()
        .map(|part| part.keys_of_rows(queries.clone()).0)
}

/// The key tiles of `range`, `(first key, keys)`: [`KEY_TILE`] keys each from its start, the
/// last shorter.
fn key_tiles(range: Range<usize>) -> impl Iterator<Item = (usize, usize)> {
    let end = range.end;
    range
        .step_by(KEY_TILE)
        .map(move |j0| (j0, KEY_TILE.min(end - j0)))
}

/// The step of the query tile `rows` over the keys `j0..j0 + keys` of `part`, or `None` when
/// none of its queries sees any of them (the tile is skipped).
fn key_tile(part: &Band, rows: Range<usize>, j0: usize, keys: usize) -> Option<KeyTile> {
    let (seen, unmasked) = part.keys_of_rows(rows);
    if seen.end <= j0 || seen.start >= j0 + keys {
        return None;
    }
    Some(KeyTile {
        j0,
        keys,
        masked: !(unmasked.start <= j0 && j0 + keys <= unmasked.end),
    })
}

/// The key tile a step works on.
#[derive(Clone, Copy)]
struct KeyTile {
    /// First key.
    j0: usize,
    /// Keys in the tile.
    keys: usize,
    /// Whether some query of the query tile does not see some key of the tile.
    masked: bool,
}

/// The rows of a key tile (relative to its first key) that one query vector of a query tile
/// sees: `lo..hi` are seen by at least one of its queries (empty for a vector of padding lanes),
/// `all_lo..all_hi` (inside `lo..hi`) by all of them; rows of `lo..hi` outside it are masked
/// lane by lane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    lo: usize,
    hi: usize,
    all_lo: usize,
    all_hi: usize,
}

impl Span {
    /// Whether the vector sees row `row`.
    fn covers(&self, row: usize) -> bool {
        self.lo <= row && row < self.hi
    }
}

/// The [`Span`] of each of the `NR` query vectors (`lanes` queries each, from `queries.start`)
/// over the key tile `j0..j0 + keys`.
fn spans<const NR: usize>(
    band: &Band,
    queries: &Range<usize>,
    lanes: usize,
    j0: usize,
    keys: usize,
) -> [Span; NR] {
    core::array::from_fn(|n| {
        let first = queries.start + n * lanes;
        if first >= queries.end {
            return Span::default();
        }
        let (any, all) = band.keys_of_rows(first..(first + lanes).min(queries.end));
        let relative = |key: usize| key.saturating_sub(j0).min(keys);
        let (lo, hi) = (relative(any.start), relative(any.end));
        let (all_lo, all_hi) = if all.is_empty() {
            (hi, hi)
        } else {
            (
                relative(all.start).clamp(lo, hi),
                relative(all.end).clamp(lo, hi),
            )
        };
        Span {
            lo,
            hi: hi.max(lo),
            all_lo,
            all_hi: all_hi.max(all_lo),
        }
    })
}

/// Calls `f(rows, vectors)` for each run of key rows seen by the same query vectors, one call
/// per contiguous run of those vectors. Rows and vectors no query sees are never visited.
#[inline(always)]
fn for_each_segment<const NR: usize>(
    spans: &[Span; NR],
    mut f: impl FnMut(Range<usize>, Range<usize>),
) {
    let live = || spans.iter().filter(|s| s.lo < s.hi);
    let (Some(mut row), Some(end)) = (live().map(|s| s.lo).min(), live().map(|s| s.hi).max())
    else {
        return;
    };
    while row < end {
        let next = live()
            .flat_map(|s| [s.lo, s.hi])
            .filter(|&b| b > row)
            .min()
            .unwrap_or(end);
        let mut n = 0;
        while n < NR {
            if spans[n].covers(row) {
                let first = n;
                while n < NR && spans[n].covers(row) {
                    n += 1;
                }
                f(row..next, first..n);
            } else {
                n += 1;
            }
        }
        row = next;
    }
}

/// One query tile × one packed key tile: scores, bias, mask, online softmax, `Oᵀ` update.
///
/// A tile every query vector sees whole is one register-blocked product per step. On a band
/// edge (the causal diagonal, a window edge, padding) each query vector computes only the key
/// rows it sees: the products run per segment of rows over the vectors that see them, so a
/// diagonal tile costs about half a full one.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn tile_step<S: Simd, const MR: usize, const NR: usize>(
    simd: S,
    (checked, band): (&Checked, &Band),
    operands: &Operands<'_>,
    tiles: &mut Tiles<'_>,
    head: usize,
    t: usize,
    queries: &Range<usize>,
    key_tile: KeyTile,
    first: bool,
) {
    let lanes = S::F32_LANES;
    let tile_len = NR * lanes;
    let d = checked.shape.d_head;
    let KeyTile { j0, keys, masked } = key_tile;
    let spans = if masked {
        spans::<NR>(band, queries, lanes, j0, keys)
    } else {
        [Span {
            lo: 0,
            hi: keys,
            all_lo: 0,
            all_hi: keys,
        }; NR]
    };
    let whole = spans.iter().all(|s| s.lo == 0 && s.hi == keys);
    let q_t = S::as_simd_f32s(&tiles.q_t[t * d * tile_len..][..d * tile_len]).0;
    // Sᵀ = K Qᵀ: MR keys × the query vectors that see them per microkernel call.
    {
        let s_t = S::as_mut_simd_f32s(tiles.s_t).0;
        for_each_segment(&spans, |rows, vectors| {
            let mut jr = rows.start;
            while jr < rows.end {
                let n = MR.min(rows.end - jr);
                let k_rows = Lhs {
                    data: &tiles.k_tile[jr * d..],
                    row_step: d,
                    depth_step: 1,
                };
                let product = Product {
                    a: k_rows,
                    rows: n,
                    depth: d,
                    b: Rows {
                        data: &q_t[vectors.start..],
                        stride: NR,
                    },
                    c: Rows {
                        data: &mut s_t[jr * NR + vectors.start..],
                        stride: NR,
                    },
                    store: Store::Overwrite,
                };
                tile_of_width::<S, MR>(simd, vectors.len(), product);
                jr += n;
            }
        });
    }
    if operands.has_bias() {
        for (r, i) in queries.clone().enumerate() {
            let span = spans[r / lanes];
            let Some(row) = operands.bias_of(head, i, j0..j0 + keys) else {
                break;
            };
            for (jj, &b) in row.iter().enumerate().take(span.hi).skip(span.lo) {
                tiles.s_t[jj * tile_len + r] += b;
            }
        }
    }
    if masked {
        mask_edges::<S, NR>(simd, band, queries, j0, &spans, tiles);
    }
    let (max, sum) = tiles.stats[t * 2 * tile_len..][..2 * tile_len].split_at_mut(tile_len);
    let max = S::as_mut_simd_f32s(max).0;
    let sum = S::as_mut_simd_f32s(sum).0;
    let s_t = S::as_mut_simd_f32s(tiles.s_t).0;
    let alpha = online_softmax::<S, NR>(simd, &spans, s_t, max, sum);
    // Oᵀ = alpha ⊙ Oᵀ + Vᵀ P: MR head dimensions × the query vectors per call; the rescale is
    // fused into the store when one product covers the whole tile.
    let p = S::as_simd_f32s(tiles.s_t).0;
    let o_t = S::as_mut_simd_f32s(&mut tiles.o_t[t * d * tile_len..][..d * tile_len]).0;
    let store = if whole {
        if first {
            Store::Overwrite
        } else {
            Store::Rescale(&alpha)
        }
    } else {
        for o_row in o_t.chunks_exact_mut(NR) {
            for (o, &scale) in o_row.iter_mut().zip(&alpha) {
                *o = if first {
                    simd.splat_f32s(0.0)
                } else {
                    simd.mul_f32s(*o, scale)
                };
            }
        }
        Store::Add
    };
    for_each_segment(&spans, |rows, vectors| {
        let store = match store {
            Store::Rescale(alpha) => Store::Rescale(&alpha[vectors.start..]),
            other => other,
        };
        let mut cr = 0;
        while cr < d {
            let n = MR.min(d - cr);
            let v_cols = Lhs {
                data: &tiles.v_tile[rows.start * d + cr..],
                row_step: 1,
                depth_step: d,
            };
            let product = Product {
                a: v_cols,
                rows: n,
                depth: rows.len(),
                b: Rows {
                    data: &p[rows.start * NR + vectors.start..],
                    stride: NR,
                },
                c: Rows {
                    data: &mut o_t[cr * NR + vectors.start..],
                    stride: NR,
                },
                store,
            };
            tile_of_width::<S, MR>(simd, vectors.len(), product);
            cr += n;
        }
    });
}

/// Copies the `d` elements at column `col` of the rows `rows` of `src`, times `factor`, into
/// `dst` back to back. An inline vector loop: a `memcpy` call per row costs more than the copy.
#[inline(always)]
fn pack_rows<S: Simd>(
    simd: S,
    src: &super::View<'_>,
    rows: Range<usize>,
    col: usize,
    d: usize,
    factor: f32,
    dst: &mut [f32],
) {
    if d == 0 {
        return;
    }
    let factor = simd.splat_f32s(factor);
    for (j, dst_row) in rows.zip(dst.chunks_exact_mut(d)) {
        let src_row = &src.data[j * src.stride + col..][..d];
        let (src_head, src_tail) = S::as_simd_f32s(src_row);
        let (dst_head, dst_tail) = S::as_mut_simd_f32s(dst_row);
        for (y, &x) in dst_head.iter_mut().zip(src_head) {
            *y = simd.mul_f32s(x, factor);
        }
        if !src_tail.is_empty() {
            let x = simd.partial_load_f32s(src_tail);
            simd.partial_store_f32s(dst_tail, simd.mul_f32s(x, factor));
        }
    }
}

/// `1.0`, hidden from the optimiser so that a [`pack_rows`] by it stays an inline vector loop
/// instead of being turned back into `memcpy` calls. Multiplying by 1 is exact.
#[inline(always)]
fn opaque_one() -> f32 {
    core::hint::black_box(1.0)
}

/// Sets to `-inf` the scores of the key rows of `spans` (relative to `j0`) that some query of
/// their vector does not see; rows a whole vector sees are not visited.
#[inline(always)]
fn mask_edges<S: Simd, const NR: usize>(
    simd: S,
    band: &Band,
    queries: &Range<usize>,
    j0: usize,
    spans: &[Span; NR],
    state: &mut Tiles<'_>,
) {
    // Visible keys of each query relative to j0, clamped to 0..=KEY_TILE (exact in f32).
    {
        let lo = &mut *state.lo;
        let hi = &mut *state.hi;
        lo.fill(0.0);
        hi.fill(0.0);
        for (r, i) in queries.clone().enumerate() {
            let range = band.keys(i);
            lo[r] = range.start.saturating_sub(j0).min(KEY_TILE) as f32;
            hi[r] = range.end.saturating_sub(j0).min(KEY_TILE) as f32;
        }
    }
    let lo = S::as_simd_f32s(state.lo).0;
    let hi = S::as_simd_f32s(state.hi).0;
    let s_t = S::as_mut_simd_f32s(state.s_t).0;
    let minus_inf = simd.splat_f32s(f32::NEG_INFINITY);
    for (n, span) in spans.iter().enumerate() {
        let (Some(&lo), Some(&hi)) = (lo.get(n), hi.get(n)) else {
            continue;
        };
        for jj in (span.lo..span.all_lo).chain(span.all_hi..span.hi) {
            let key = simd.splat_f32s(jj as f32);
            let seen = simd.and_m32s(
                simd.less_than_or_equal_f32s(lo, key),
                simd.less_than_f32s(key, hi),
            );
            if let Some(s) = s_t.get_mut(jj * NR + n) {
                *s = simd.select_f32s(seen, *s, minus_inf);
            }
        }
    }
}

/// Turns the scores each query vector sees (its span's rows) of one key tile into
/// probabilities relative to the updated running max, updates the running max and sum, and
/// returns the factor that rescales the earlier output.
#[inline(always)]
fn online_softmax<S: Simd, const NR: usize>(
    simd: S,
    spans: &[Span; NR],
    s_t: &mut [S::f32s],
    max: &mut [S::f32s],
    sum: &mut [S::f32s],
) -> [S::f32s; NR] {
    let zero = simd.splat_f32s(0.0);
    let minus_inf = simd.splat_f32s(f32::NEG_INFINITY);
    let mut alpha = [zero; NR];
    for (n, span) in spans.iter().enumerate().take(max.len().min(sum.len())) {
        let scores = s_t.get_mut(span.lo * NR..span.hi * NR).unwrap_or_default();
        let old = max[n];
        let mut new = old;
        for row in scores.chunks_exact(NR) {
            new = simd.max_f32s(new, row[n]);
        }
        // A query that has seen only masked keys keeps max = -inf; subtract 0 instead so its
        // probabilities are exp(-inf) = 0, not NaN.
        let reference = simd.select_f32s(simd.equal_f32s(new, minus_inf), zero, new);
        let rescale = exp_non_positive(simd, simd.sub_f32s(old, reference));
        let mut total = zero;
        for row in scores.chunks_exact_mut(NR) {
            let p = exp_non_positive(simd, simd.sub_f32s(row[n], reference));
            row[n] = p;
            total = simd.add_f32s(total, p);
        }
        sum[n] = simd.mul_add_e_f32s(sum[n], rescale, total);
        max[n] = new;
        alpha[n] = rescale;
    }
    alpha
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The (query tile, key tile) steps the prefill path computes per head for `q_len` queries
    /// at a level with `lanes` lanes: the blocks, key tiles and skips of [`query_block`].
    fn steps(band: &Band, q_len: usize, lanes: usize) -> usize {
        let (tile_len, block_len) = (query_tile(lanes), query_block_len(lanes));
        let parts = band.parts();
        let mut count = 0;
        for i0 in (0..q_len).step_by(block_len) {
            let queries = i0..(i0 + block_len).min(q_len);
            for (part, range) in parts.iter().zip(block_keys(&parts, &queries)) {
                for (j0, keys) in key_tiles(range) {
                    for t0 in queries.clone().step_by(tile_len) {
                        let rows = t0..(t0 + tile_len).min(queries.end);
                        count += usize::from(key_tile(part, rows, j0, keys).is_some());
                    }
                }
            }
        }
        count
    }

    #[test]
    fn a_radius_and_global_keys_compute_linear_work() {
        for lanes in [1, 4, 8, 16] {
            let tile_len = query_tile(lanes);
            for (q_len, r, g) in [
                (4096, 0, 0),
                (4096, 64, 0),
                (4096, 256, 1),
                (8192, 256, 16),
                (4096, 100, 200),
            ] {
                let band = Band {
                    global: g,
                    ..Band::new(q_len, None, None, Some(r))
                };
                let q_tiles = q_len.div_ceil(tile_len);
                // A query tile's own keys span at most `2r + tile_len` keys, so that many keys'
                // tiles and one more (key tiles start at the block's first key, not the query
                // tile's); then the global keys' tiles.
                let per_tile = (2 * r + tile_len).div_ceil(KEY_TILE) + 1 + g.div_ceil(KEY_TILE);
                let count = steps(&band, q_len, lanes);
                assert!(
                    count <= q_tiles * per_tile,
                    "{lanes} lanes, {q_len} queries, r {r}, g {g}: {count} steps"
                );
                assert!(count >= q_tiles * (1 + g.div_ceil(KEY_TILE)));
                let dense = steps(&Band::new(q_len, None, None, None), q_len, lanes);
                assert_eq!(dense, q_tiles * q_len.div_ceil(KEY_TILE));
                assert!(4 * count < dense, "{lanes} lanes: {count} of {dense}");
            }
        }
    }
}
