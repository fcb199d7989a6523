//! The decode path: a few queries (one per beam, or the single new token) over a long KV cache.
//!
//! Keys are processed in blocks of [`KEY_BLOCK`], and within a block in chunks of one vector's
//! lanes of keys (16 on AVX-512) across all heads, so K and V rows are read whole and in order:
//! one sequential stream each, which the hardware prefetchers follow (a head-by-head walk would
//! read `d_head` floats every `heads · d_head`); the next block is also prefetched in software.
//! Each block is used by every query of the call while it sits in L2. Per query, head and chunk:
//! - scores: one partial vector per key along `d_head` (no horizontal sum per key), reduced for
//!   the whole chunk by one transpose-and-add tree into a vector of scores
//!   ([`super::lanes::transpose_sum`]);
//! - per head and block, the block's max, `exp` vectorised over its keys, the running sum;
//! - `o = alpha · o + Σ p_j v_j`, the head's accumulator held in registers for the chunk.

use super::lanes::{transpose_sum, MAX_LANES};
use super::prefetch::prefetch_rows;
use super::prefill::query_tile;
use super::{Checked, Operands, StridedMut};
use crate::error::KernelError;
use crate::isa::Isa;
use crate::math::exp;
use crate::scratch::{Scratch, ScratchSpec};
use pulp::Simd;

/// Keys per block: 64 rows of K and V (256 KiB at 8 heads × 64) stay in L2 for every query. A
/// multiple of every level's lane count, so chunks of keys never straddle two blocks' scores.
const KEY_BLOCK: usize = 64;

/// Largest `q_len` the decode path takes at a level with `lanes` lanes: below an eighth of a
/// prefill tile the prefill microkernels would mostly compute padding.
const fn max_queries(lanes: usize) -> usize {
    let n = query_tile(lanes) / 8;
    if n == 0 {
        1
    } else {
        n
    }
}

/// Whether a call with `q_len` queries takes the decode path.
pub(crate) const fn handles(lanes: usize, q_len: usize) -> bool {
    q_len <= max_queries(lanes)
}

/// Scratch of the decode path: per query and head the output accumulator (`d_head` rounded up
/// to whole vectors), running max and sum; per head a block of scores and a rescale factor.
pub(crate) fn scratch(lanes: usize, heads: usize, d_head: usize) -> ScratchSpec {
    let queries = max_queries(lanes);
    let padded = d_head.div_ceil(lanes).saturating_mul(lanes);
    let per_query_head = queries.saturating_mul(heads);
    ScratchSpec::f32s(per_query_head.saturating_mul(padded))
        .and(ScratchSpec::f32s(heads.saturating_mul(KEY_BLOCK)))
        .and(ScratchSpec::f32s(per_query_head))
        .and(ScratchSpec::f32s(per_query_head))
        .and(ScratchSpec::f32s(heads))
}

/// Runs the decode path of a validated call with `q_len <= max_queries`.
pub(crate) fn run(
    isa: Isa,
    checked: &Checked,
    operands: &Operands<'_>,
    out: StridedMut<'_>,
    scratch: &mut Scratch<'_>,
) -> Result<(), KernelError> {
    struct Decode<'a, 'b, 's> {
        checked: &'a Checked,
        operands: &'a Operands<'b>,
        out: StridedMut<'b>,
        scratch: &'a mut Scratch<'s>,
    }
    impl pulp::WithSimd for Decode<'_, '_, '_> {
        type Output = Result<(), KernelError>;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> Self::Output {
            let Decode {
                checked,
                operands,
                out,
                scratch,
            } = self;
            // Head sizes of whole vectors get fully unrolled dot products and updates.
            let d = checked.shape.d_head;
            match (d % S::F32_LANES == 0, d / S::F32_LANES) {
                (true, 1) => run_blocks::<S, 1>(simd, checked, operands, out, scratch),
                (true, 2) => run_blocks::<S, 2>(simd, checked, operands, out, scratch),
                (true, 4) => run_blocks::<S, 4>(simd, checked, operands, out, scratch),
                (true, 8) => run_blocks::<S, 8>(simd, checked, operands, out, scratch),
                _ => run_blocks::<S, 0>(simd, checked, operands, out, scratch),
            }
        }
    }
    isa.dispatch(Decode {
        checked,
        operands,
        out,
        scratch,
    })
}

/// The decode loop; `VECS > 0` when `d_head` is exactly `VECS` vectors, 0 for any `d_head`.
#[inline(always)]
fn run_blocks<S: Simd, const VECS: usize>(
    simd: S,
    checked: &Checked,
    operands: &Operands<'_>,
    out: StridedMut<'_>,
    scratch: &mut Scratch<'_>,
) -> Result<(), KernelError> {
    let lanes = S::F32_LANES;
    let shape = &checked.shape;
    let (heads, d, width) = (shape.heads, shape.d_head, checked.width);
    let padded = d.div_ceil(lanes) * lanes;
    let queries = shape.q_len;
    if queries > max_queries(lanes) {
        return Err(KernelError::InvalidArgument(
            "too many queries for the decode path",
        ));
    }
    let o_all = scratch.take(max_queries(lanes) * heads * padded)?;
    let scores = scratch.take(heads * KEY_BLOCK)?;
    let max = scratch.take(max_queries(lanes) * heads)?;
    let sum = scratch.take(max_queries(lanes) * heads)?;
    let alpha = scratch.take(heads)?;
    o_all.fill(0.0);
    max.fill(f32::NEG_INFINITY);
    sum.fill(0.0);
    let band = &checked.band;
    let (q, k, v) = (&operands.q, &operands.k, &operands.v);

    let (visible, _) = band.keys_of_rows(0..queries);
    let mut j0 = visible.start;
    while j0 < visible.end {
        let block_end = (j0 + KEY_BLOCK).min(visible.end);
        let next_block = block_end..(block_end + KEY_BLOCK).min(visible.end);
        prefetch_rows(k, next_block.clone(), 0, width);
        prefetch_rows(v, next_block, 0, width);
        for i in 0..queries {
            let seen = band.keys(i);
            let (a, b) = (seen.start.max(j0), seen.end.min(block_end));
            if a >= b {
                continue;
            }
            let n = b - a;
            let q_row = &q.data[i * q.stride..][..width];
            let mut t = 0;
            while t < n {
                let chunk = lanes.min(n - t);
                let rows = chunk_rows(k, a + t, chunk);
                score_chunk::<S, VECS>(simd, q_row, rows, (d, chunk), checked.scale, t, scores);
                t += chunk;
            }
            let states = i * heads..(i + 1) * heads;
            for (h, ((s, (max, sum)), alpha)) in scores
                .chunks_exact_mut(KEY_BLOCK)
                .zip(max[states.clone()].iter_mut().zip(&mut sum[states]))
                .zip(alpha.iter_mut())
                .enumerate()
            {
                let s = &mut s[..n];
                if let Some(bias) = operands.bias_row(h, i) {
                    for (slot, &x) in s.iter_mut().zip(&bias[a..b]) {
                        *slot += x;
                    }
                }
                let new_max = max.max(slice_max(simd, s));
                if new_max == f32::NEG_INFINITY {
                    // Nothing seen yet by this head: zero weights, nothing to rescale.
                    s.fill(0.0);
                    *alpha = 1.0;
                    continue;
                }
                *alpha = exp_scalar(simd, *max - new_max);
                let total = exp_shifted(simd, s, new_max);
                *sum = *sum * *alpha + total;
                *max = new_max;
            }
            let o_query = &mut o_all[i * heads * padded..][..heads * padded];
            for (o_head, &alpha) in o_query.chunks_exact_mut(padded).zip(alpha.iter()) {
                if alpha != 1.0 {
                    let alpha = simd.splat_f32s(alpha);
                    for o in S::as_mut_simd_f32s(o_head).0 {
                        *o = simd.mul_f32s(*o, alpha);
                    }
                }
            }
            // o += p_j v_j a chunk of keys at a time: each accumulator is loaded and stored
            // once per chunk.
            let mut t = 0;
            while t < n {
                let chunk = lanes.min(n - t);
                let rows = chunk_rows(v, a + t, chunk);
                accumulate_chunk::<S, VECS>(simd, rows, (d, padded, chunk), t, scores, o_query);
                t += chunk;
            }
        }
        j0 = block_end;
    }
    for i in 0..queries {
        let out_row = &mut out.data[i * out.stride..][..width];
        let o_query = &o_all[i * heads * padded..][..heads * padded];
        for (h, (y_head, o_head)) in out_row
            .chunks_exact_mut(d)
            .zip(o_query.chunks_exact(padded))
            .enumerate()
        {
            let l = sum[i * heads + h];
            let inverse = if l > 0.0 { 1.0 / l } else { 0.0 };
            for (y, &o) in y_head.iter_mut().zip(o_head) {
                *y = o * inverse;
            }
        }
    }
    Ok(())
}

/// The rows (all heads) of the `count` keys from `first` of `src`, padded to [`MAX_LANES`] by
/// repeating the last one (computed, never stored). The keys are inside the validated view.
#[inline(always)]
fn chunk_rows<'a>(src: &super::Strided<'a>, first: usize, count: usize) -> [&'a [f32]; MAX_LANES] {
    core::array::from_fn(|j| {
        let key = first + j.min(count.saturating_sub(1));
        src.data.get(key * src.stride..).unwrap_or(&[])
    })
}

/// The scores of the `chunk` keys whose rows (all heads, from their start) are `rows`, for every
/// head, into `scores[h · KEY_BLOCK + t ..][..chunk]`: per key a vector of partial products
/// along `d_head` (the query vectors are loaded once for the chunk), then one transpose-and-add
/// tree for the chunk's sums.
#[inline(always)]
fn score_chunk<S: Simd, const VECS: usize>(
    simd: S,
    q_row: &[f32],
    rows: [&[f32]; MAX_LANES],
    (d, chunk): (usize, usize),
    scale: f32,
    t: usize,
    scores: &mut [f32],
) {
    let lanes = S::F32_LANES;
    let scale = simd.splat_f32s(scale);
    for (h, (q_head, block)) in q_row
        .chunks_exact(d)
        .zip(scores.chunks_exact_mut(KEY_BLOCK))
        .enumerate()
    {
        let partial = partial_dots::<S, VECS>(simd, q_head, rows.map(|row| head_of(row, h, d)));
        let sums = simd.mul_f32s(transpose_sum(simd, &partial), scale);
        if let Some(slots) = block.get_mut(t..t + chunk) {
            if chunk == lanes {
                if let Some(slot) = S::as_mut_simd_f32s(slots).0.first_mut() {
                    *slot = sums;
                }
            } else {
                simd.partial_store_f32s(slots, sums);
            }
        }
    }
}

/// Per row `j` of the first `S::F32_LANES` rows, the lane-wise products `a · b[j]` summed over
/// the rows' vectors (a vector whose lanes add up to the dot product); unrolled when the rows
/// are exactly `VECS > 0` vectors. A row shorter than `a` contributes nothing.
#[inline(always)]
fn partial_dots<S: Simd, const VECS: usize>(
    simd: S,
    a: &[f32],
    b: [&[f32]; MAX_LANES],
) -> [S::f32s; MAX_LANES] {
    let lanes = S::F32_LANES.min(MAX_LANES);
    let zero = simd.splat_f32s(0.0);
    let mut acc = [zero; MAX_LANES];
    let (a_head, a_tail) = S::as_simd_f32s(a);
    if b.iter().take(lanes).any(|row| row.len() != a.len()) {
        debug_assert!(false, "decode rows shorter than the query");
        return acc;
    }
    if VECS > 0 {
        if let Ok(x) = <&[S::f32s; VECS]>::try_from(a_head) {
            let y: [Option<&[S::f32s; VECS]>; MAX_LANES] =
                b.map(|row| <&[S::f32s; VECS]>::try_from(S::as_simd_f32s(row).0).ok());
            for (c, &x) in x.iter().enumerate() {
                for (acc, row) in acc.iter_mut().zip(&y).take(lanes) {
                    if let Some(row) = row {
                        *acc = simd.mul_add_e_f32s(x, row[c], *acc);
                    }
                }
            }
            return acc;
        }
    }
    for (c, &x) in a_head.iter().enumerate() {
        for (acc, row) in acc.iter_mut().zip(&b).take(lanes) {
            if let Some(&y) = S::as_simd_f32s(row).0.get(c) {
                *acc = simd.mul_add_e_f32s(x, y, *acc);
            }
        }
    }
    if !a_tail.is_empty() {
        let x = simd.partial_load_f32s(a_tail);
        for (acc, row) in acc.iter_mut().zip(&b).take(lanes) {
            let y = simd.partial_load_f32s(S::as_simd_f32s(row).1);
            *acc = simd.mul_add_e_f32s(x, y, *acc);
        }
    }
    acc
}

/// `o_h += Σ_{j < chunk} p_h[t + j] · v_j[h]` for every head `h`, the value rows (all heads,
/// from their start) `rows`; each head's accumulator is `padded` floats (`d` rounded up to whole
/// vectors). With `d = VECS > 0` vectors the accumulator stays in registers for the chunk (two
/// sets, even and odd keys, for two independent FMA chains).
#[inline(always)]
fn accumulate_chunk<S: Simd, const VECS: usize>(
    simd: S,
    rows: [&[f32]; MAX_LANES],
    (d, padded, chunk): (usize, usize, usize),
    t: usize,
    scores: &[f32],
    o_query: &mut [f32],
) {
    if padded == 0 {
        return;
    }
    for (h, (o_head, block)) in o_query
        .chunks_exact_mut(padded)
        .zip(scores.chunks_exact(KEY_BLOCK))
        .enumerate()
    {
        let Some(p) = block.get(t..t + chunk) else {
            continue;
        };
        let o = S::as_mut_simd_f32s(o_head).0;
        if VECS > 0 {
            let o: Option<&mut [S::f32s; VECS]> = o.get_mut(..VECS).and_then(|o| o.try_into().ok());
            let x: [Option<&[S::f32s; VECS]>; MAX_LANES] = rows.map(|row| {
                <&[S::f32s; VECS]>::try_from(S::as_simd_f32s(head_of(row, h, d)).0).ok()
            });
            if let Some(o) = o {
                let zero = simd.splat_f32s(0.0);
                let mut even = *o;
                let mut odd = [zero; VECS];
                for (j, (&p, x)) in p.iter().zip(&x).enumerate() {
                    let Some(x) = x else { continue };
                    let p = simd.splat_f32s(p);
                    let acc = if j % 2 == 0 { &mut even } else { &mut odd };
                    for (slot, &x) in acc.iter_mut().zip(x.iter()) {
                        *slot = simd.mul_add_e_f32s(p, x, *slot);
                    }
                }
                for ((slot, e), o) in o.iter_mut().zip(even).zip(odd) {
                    *slot = simd.add_f32s(e, o);
                }
                continue;
            }
        }
        for (&p, row) in p.iter().zip(&rows) {
            axpy(simd, p, head_of(row, h, d), o);
        }
    }
}

/// Head `h` (`d` floats) of a row of all heads; empty if the row is too short.
#[inline(always)]
fn head_of(row: &[f32], h: usize, d: usize) -> &[f32] {
    row.get(h * d..(h + 1) * d).unwrap_or(&[])
}

/// `o += p · x`, `o` holding `x.len()` rounded up to whole vectors.
#[inline(always)]
fn axpy<S: Simd>(simd: S, p: f32, x: &[f32], o: &mut [S::f32s]) {
    let p = simd.splat_f32s(p);
    let (head, tail) = S::as_simd_f32s(x);
    for (slot, &x) in o.iter_mut().zip(head) {
        *slot = simd.mul_add_e_f32s(p, x, *slot);
    }
    if !tail.is_empty() {
        if let Some(slot) = o.get_mut(head.len()) {
            *slot = simd.mul_add_e_f32s(p, simd.partial_load_f32s(tail), *slot);
        }
    }
}

/// The largest element (`-inf` for an empty slice).
#[inline(always)]
fn slice_max<S: Simd>(simd: S, values: &[f32]) -> f32 {
    let (head, tail) = S::as_simd_f32s(values);
    let mut best = simd.splat_f32s(f32::NEG_INFINITY);
    for &x in head {
        best = simd.max_f32s(best, x);
    }
    tail.iter()
        .fold(simd.reduce_max_f32s(best), |m, &x| m.max(x))
}

/// `e^x` for one value, through the vector [`exp`].
#[inline(always)]
fn exp_scalar<S: Simd>(simd: S, x: f32) -> f32 {
    simd.reduce_max_f32s(exp(simd, simd.splat_f32s(x)))
}

/// Replaces each `s` by `e^(s - shift)` and returns their sum.
#[inline(always)]
fn exp_shifted<S: Simd>(simd: S, values: &mut [f32], shift: f32) -> f32 {
    let shift_v = simd.splat_f32s(shift);
    let (head, tail) = S::as_mut_simd_f32s(values);
    let mut total = simd.splat_f32s(0.0);
    for x in head {
        *x = exp(simd, simd.sub_f32s(*x, shift_v));
        total = simd.add_f32s(total, *x);
    }
    let mut total = simd.reduce_sum_f32s(total);
    if !tail.is_empty() {
        let x = simd.partial_load_f32s(tail);
        simd.partial_store_f32s(tail, exp(simd, simd.sub_f32s(x, shift_v)));
        total += tail.iter().sum::<f32>();
    }
    total
}
