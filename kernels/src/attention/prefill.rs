//! The prefill path: many queries, SIMD lanes across queries.
//!
//! Per head and per tile of `NR × lanes` queries:
//! 1. pack the scaled queries transposed, `Qᵀ` (`d_head × tile`);
//! 2. for each tile of [`KEY_TILE`] keys inside the tile's visible band:
//!    `Sᵀ = K Qᵀ` (microkernel, K read in place), add the bias, mask the band's edges, then the
//!    online softmax lane by lane (running max `m`, running sum `l`, rescale `alpha`), and
//!    `Oᵀ = alpha ⊙ Oᵀ + Vᵀ Pᵀ` (microkernel, V read in place, rescale fused into its store);
//! 3. write `O / l` into the output (0 where `l = 0`).

use super::band::Band;
use super::tile::{tile, Lhs};
use super::{Checked, Operands, StridedMut};
use crate::error::KernelError;
use crate::isa::Isa;
use crate::math::exp;
use crate::scratch::{Scratch, ScratchSpec};
use core::ops::Range;
use pulp::Simd;

/// Keys per tile: `Sᵀ` is `KEY_TILE × query tile` floats (16 KiB on AVX-512).
pub(crate) const KEY_TILE: usize = 64;

/// Query vectors per tile (`NR`): AVX2 has 16 registers, room for 6 × 2 accumulators; AVX-512
/// and NEON have 32, room for 6 × 4; scalar uses 4 × 4.
const fn query_vectors(lanes: usize) -> usize {
    if lanes == 8 {
        2
    } else {
        4
    }
}

/// Queries per tile at a level with `lanes` f32 lanes.
pub(crate) const fn query_tile(lanes: usize) -> usize {
    lanes * query_vectors(lanes)
}

/// Scratch of the prefill path: `Qᵀ`, `Oᵀ`, `Sᵀ` and two per-query vectors.
pub(crate) fn scratch(lanes: usize, d_head: usize) -> ScratchSpec {
    let tile = query_tile(lanes);
    let packed = ScratchSpec::f32s(d_head.saturating_mul(tile));
    packed
        .and(packed)
        .and(ScratchSpec::f32s(KEY_TILE * tile))
        .and(ScratchSpec::f32s(tile))
        .and(ScratchSpec::f32s(tile))
}

/// Runs the prefill path of a validated call.
pub(crate) fn run(
    isa: Isa,
    checked: &Checked,
    operands: &Operands<'_>,
    out: StridedMut<'_>,
    scratch: &mut Scratch<'_>,
) -> Result<(), KernelError> {
    struct Prefill<'a, 'b, 's> {
        checked: &'a Checked,
        operands: &'a Operands<'b>,
        out: StridedMut<'b>,
        scratch: &'a mut Scratch<'s>,
    }
    impl pulp::WithSimd for Prefill<'_, '_, '_> {
        type Output = Result<(), KernelError>;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> Self::Output {
            match (S::F32_LANES, query_vectors(S::F32_LANES)) {
                (1, _) => {
                    run_tiles::<S, 4, 4>(simd, self.checked, self.operands, self.out, self.scratch)
                }
                (_, 2) => {
                    run_tiles::<S, 6, 2>(simd, self.checked, self.operands, self.out, self.scratch)
                }
                _ => {
                    run_tiles::<S, 6, 4>(simd, self.checked, self.operands, self.out, self.scratch)
                }
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

/// The scratch of one query tile, as `f32`; viewed as vectors of `NR` per row where needed.
struct TileState<'s> {
    /// `Qᵀ · scale`, `d_head` rows of the query tile.
    q_t: &'s mut [f32],
    /// `Oᵀ`, unnormalised, `d_head` rows of the query tile.
    o_t: &'s mut [f32],
    /// Scores then probabilities of one key tile, `KEY_TILE` rows of the query tile.
    s_t: &'s mut [f32],
    /// First and end of each query's visible keys relative to the key tile; then `1 / l`.
    lo: &'s mut [f32],
    hi: &'s mut [f32],
}

#[inline(always)]
fn run_tiles<S: Simd, const MR: usize, const NR: usize>(
    simd: S,
    checked: &Checked,
    operands: &Operands<'_>,
    mut out: StridedMut<'_>,
    scratch: &mut Scratch<'_>,
) -> Result<(), KernelError> {
    let lanes = S::F32_LANES;
    let tile_len = NR * lanes;
    debug_assert_eq!(tile_len, query_tile(lanes));
    let d = checked.shape.d_head;
    let mut state = TileState {
        q_t: scratch.take(d * tile_len)?,
        o_t: scratch.take(d * tile_len)?,
        s_t: scratch.take(KEY_TILE * tile_len)?,
        lo: scratch.take(tile_len)?,
        hi: scratch.take(tile_len)?,
    };
    for head in 0..checked.shape.heads {
        let mut i0 = 0;
        while i0 < checked.shape.q_len {
            let rows = tile_len.min(checked.shape.q_len - i0);
            query_tile_body::<S, MR, NR>(
                simd,
                checked,
                operands,
                &mut out,
                &mut state,
                head,
                i0..i0 + rows,
            );
            i0 += rows;
        }
    }
    Ok(())
}

/// Attention of the queries `queries` (at most one tile) of head `head`.
#[inline(always)]
fn query_tile_body<S: Simd, const MR: usize, const NR: usize>(
    simd: S,
    checked: &Checked,
    operands: &Operands<'_>,
    out: &mut StridedMut<'_>,
    state: &mut TileState<'_>,
    head: usize,
    queries: Range<usize>,
) {
    let lanes = S::F32_LANES;
    let tile_len = NR * lanes;
    let d = checked.shape.d_head;
    let col = head * d;
    let band = &checked.band;
    let (visible, unmasked) = band.keys_of_rows(queries.clone());

    // Qᵀ · scale, zero in the lanes past the last query.
    {
        let q_t = &mut *state.q_t;
        q_t.fill(0.0);
        for (r, i) in queries.clone().enumerate() {
            let q_row = &operands.q.data[i * operands.q.stride + col..][..d];
            for (c, &x) in q_row.iter().enumerate() {
                q_t[c * tile_len + r] = x * checked.scale;
            }
        }
    }

    let mut max = [simd.splat_f32s(f32::NEG_INFINITY); NR];
    let mut sum = [simd.splat_f32s(0.0); NR];
    let mut alpha = sum;

    let mut first = true;
    let mut j0 = visible.start;
    while j0 < visible.end {
        let keys = KEY_TILE.min(visible.end - j0);
        // Sᵀ = K Qᵀ: MR keys × the query tile per microkernel call.
        let mut jr = 0;
        while jr < keys {
            let n = MR.min(keys - jr);
            let k_rows = Lhs {
                data: &operands.k.data[(j0 + jr) * operands.k.stride + col..],
                row_step: operands.k.stride,
                depth_step: 1,
            };
            let q_t = S::as_simd_f32s(state.q_t).0;
            let s_t = &mut S::as_mut_simd_f32s(state.s_t).0[jr * NR..];
            tile::<S, MR, NR>(simd, k_rows, n, d, q_t, s_t, None);
            jr += n;
        }
        if let Some(bias) = &operands.bias {
            let s_t = &mut *state.s_t;
            for (r, i) in queries.clone().enumerate() {
                let start = head * bias.head_stride + i * bias.row_stride + j0;
                for (jj, &b) in bias.data[start..][..keys].iter().enumerate() {
                    s_t[jj * tile_len + r] += b;
                }
            }
        }
        if !(unmasked.start <= j0 && j0 + keys <= unmasked.end) {
            mask_edges::<S, NR>(simd, band, &queries, j0, keys, state);
        }
        let s_t = S::as_mut_simd_f32s(state.s_t).0;
        online_softmax::<S, NR>(simd, keys, s_t, &mut max, &mut sum, &mut alpha);
        // Oᵀ = alpha ⊙ Oᵀ + Vᵀ P: MR head dimensions × the query tile per call.
        let mut cr = 0;
        while cr < d {
            let n = MR.min(d - cr);
            let v_cols = Lhs {
                data: &operands.v.data[j0 * operands.v.stride + col + cr..],
                row_step: 1,
                depth_step: operands.v.stride,
            };
            let rescale = if first { None } else { Some(&alpha) };
            let p = S::as_simd_f32s(state.s_t).0;
            let o_t = &mut S::as_mut_simd_f32s(state.o_t).0[cr * NR..];
            tile::<S, MR, NR>(simd, v_cols, n, keys, p, o_t, rescale);
            cr += n;
        }
        first = false;
        j0 += keys;
    }

    // out = Oᵀ / l, zero for queries that saw nothing.
    for (slot, l) in S::as_mut_simd_f32s(state.lo).0.iter_mut().zip(sum) {
        let positive = simd.greater_than_f32s(l, simd.splat_f32s(0.0));
        let inverse = simd.div_f32s(simd.splat_f32s(1.0), l);
        *slot = simd.select_f32s(positive, inverse, simd.splat_f32s(0.0));
    }
    let inverse = &*state.lo;
    let o_t = &*state.o_t;
    for (r, i) in queries.enumerate() {
        let out_row = &mut out.data[i * out.stride + col..][..d];
        if first {
            out_row.fill(0.0);
            continue;
        }
        let inv = inverse[r];
        for (c, y) in out_row.iter_mut().enumerate() {
            *y = o_t[c * tile_len + r] * inv;
        }
    }
}

/// Sets to `-inf` the scores of keys `j0..j0 + keys` a query of the tile does not see.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn mask_edges<S: Simd, const NR: usize>(
    simd: S,
    band: &Band,
    queries: &Range<usize>,
    j0: usize,
    keys: usize,
    state: &mut TileState<'_>,
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
    for (jj, s_row) in s_t.chunks_exact_mut(NR).take(keys).enumerate() {
        let key = simd.splat_f32s(jj as f32);
        for ((s, &lo), &hi) in s_row.iter_mut().zip(lo.iter()).zip(hi.iter()) {
            let seen = simd.and_m32s(
                simd.less_than_or_equal_f32s(lo, key),
                simd.less_than_f32s(key, hi),
            );
            *s = simd.select_f32s(seen, *s, minus_inf);
        }
    }
}

/// Turns the scores of one key tile into probabilities relative to the updated running max,
/// updates the running sum, and leaves in `alpha` the factor that rescales the earlier output.
#[inline(always)]
fn online_softmax<S: Simd, const NR: usize>(
    simd: S,
    keys: usize,
    s_t: &mut [S::f32s],
    max: &mut [S::f32s; NR],
    sum: &mut [S::f32s; NR],
    alpha: &mut [S::f32s; NR],
) {
    let zero = simd.splat_f32s(0.0);
    let minus_inf = simd.splat_f32s(f32::NEG_INFINITY);
    let scores = &mut s_t[..keys * NR];
    for n in 0..NR {
        let old = max[n];
        let mut new = old;
        for row in scores.chunks_exact(NR) {
            new = simd.max_f32s(new, row[n]);
        }
        // A query that has seen only masked keys keeps max = -inf; subtract 0 instead so its
        // probabilities are exp(-inf) = 0, not NaN.
        let reference = simd.select_f32s(simd.equal_f32s(new, minus_inf), zero, new);
        let rescale = exp(simd, simd.sub_f32s(old, reference));
        let mut total = zero;
        for row in scores.chunks_exact_mut(NR) {
            let p = exp(simd, simd.sub_f32s(row[n], reference));
            row[n] = p;
            total = simd.add_f32s(total, p);
        }
        sum[n] = simd.mul_add_e_f32s(sum[n], rescale, total);
        max[n] = new;
        alpha[n] = rescale;
    }
}
