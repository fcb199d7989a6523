//! The decode path: a few queries (one per beam, or the single new token) over a long KV cache.
//!
//! SIMD lanes run along `d_head`. Keys are processed in blocks of [`KEY_BLOCK`], and within a
//! block key by key across all heads, so K and V rows are read whole and in order: one
//! sequential stream each, which the hardware prefetchers follow (a head-by-head walk would read
//! `d_head` floats every `heads · d_head`). The next block is prefetched while this one is
//! computed, and each block is used by every query of the call while it sits in L2. Per query,
//! head and block: the scores (one vector dot product per key), the block's max, `exp`
//! vectorised over the block's keys, `o = alpha · o + Σ p_j v_j` (the accumulators of all heads
//! of a query, `heads · d_head` floats, stay in L1).

use super::prefill::query_tile;
use super::{Checked, Operands, StridedMut};
use crate::error::KernelError;
use crate::isa::Isa;
use crate::math::exp;
use crate::scratch::{Scratch, ScratchSpec};
use pulp::Simd;

/// Keys whose dot products and value updates are computed together (ILP, fewer accumulator
/// loads and stores).
const KEY_GROUP: usize = 2;

/// Keys per block: 64 rows of K and V (256 KiB at 8 heads × 64) stay in L2 for every query.
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
        for i in 0..queries {
            let seen = band.keys(i);
            let (a, b) = (seen.start.max(j0), seen.end.min(block_end));
            if a >= b {
                continue;
            }
            let n = b - a;
            let q_row = &q.data[i * q.stride..][..width];
            // Scores KEY_GROUP keys at a time: the query vectors are loaded once for the group
            // and KEY_GROUP independent dot products are in flight.
            let mut t = 0;
            while t < n {
                if t + KEY_GROUP <= n {
                    let rows: [&[f32]; KEY_GROUP] =
                        core::array::from_fn(|g| &k.data[(a + t + g) * k.stride..][..width]);
                    score_group::<S, VECS, KEY_GROUP>(
                        simd,
                        q_row,
                        rows,
                        d,
                        checked.scale,
                        t,
                        scores,
                    );
                    t += KEY_GROUP;
                } else {
                    let rows = [&k.data[(a + t) * k.stride..][..width]];
                    score_group::<S, VECS, 1>(simd, q_row, rows, d, checked.scale, t, scores);
                    t += 1;
                }
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
            // o += p_j v_j, KEY_GROUP keys at a time: each accumulator is loaded and stored
            // once per group.
            let mut t = 0;
            while t < n {
                if t + KEY_GROUP <= n {
                    let rows: [&[f32]; KEY_GROUP] =
                        core::array::from_fn(|g| &v.data[(a + t + g) * v.stride..][..width]);
                    accumulate_group::<S, VECS, KEY_GROUP>(
                        simd,
                        rows,
                        (d, padded),
                        t,
                        scores,
                        o_query,
                    );
                    t += KEY_GROUP;
                } else {
                    let rows = [&v.data[(a + t) * v.stride..][..width]];
                    accumulate_group::<S, VECS, 1>(simd, rows, (d, padded), t, scores, o_query);
                    t += 1;
                }
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

/// `o += p · x`, `o` holding `x.len()` rounded up to whole vectors; unrolled when `x` is
/// exactly `VECS > 0` vectors.
#[inline(always)]
fn axpy<S: Simd, const VECS: usize>(simd: S, p: f32, x: &[f32], o: &mut [S::f32s]) {
    let p = simd.splat_f32s(p);
    let (head, tail) = S::as_simd_f32s(x);
    if VECS > 0 {
        if let (Ok(x), Some(Ok(o))) = (
            <&[S::f32s; VECS]>::try_from(head),
            o.get_mut(..VECS).map(<&mut [S::f32s; VECS]>::try_from),
        ) {
            for (slot, &x) in o.iter_mut().zip(x) {
                *slot = simd.mul_add_e_f32s(p, x, *slot);
            }
            return;
        }
    }
    for (slot, &x) in o.iter_mut().zip(head) {
        *slot = simd.mul_add_e_f32s(p, x, *slot);
    }
    if !tail.is_empty() {
        if let Some(slot) = o.get_mut(head.len()) {
            *slot = simd.mul_add_e_f32s(p, simd.partial_load_f32s(tail), *slot);
        }
    }
}

/// `Σ a_c b_c` over equal-length rows, vectorised, two accumulators; unrolled when the rows
/// are exactly `VECS > 0` vectors.
#[inline(always)]
fn dot<S: Simd, const VECS: usize>(simd: S, a: &[f32], b: &[f32]) -> f32 {
    let (a_head, a_tail) = S::as_simd_f32s(a);
    let (b_head, b_tail) = S::as_simd_f32s(b);
    let mut even = simd.splat_f32s(0.0);
    let mut odd = even;
    if VECS > 0 {
        if let (Ok(x), Ok(y)) = (
            <&[S::f32s; VECS]>::try_from(a_head),
            <&[S::f32s; VECS]>::try_from(b_head),
        ) {
            for t in 0..VECS {
                if t % 2 == 0 {
                    even = simd.mul_add_e_f32s(x[t], y[t], even);
                } else {
                    odd = simd.mul_add_e_f32s(x[t], y[t], odd);
                }
            }
            return simd.reduce_sum_f32s(simd.add_f32s(even, odd));
        }
    }
    let mut a_pairs = a_head.chunks_exact(2);
    let mut b_pairs = b_head.chunks_exact(2);
    for (x, y) in (&mut a_pairs).zip(&mut b_pairs) {
        even = simd.mul_add_e_f32s(x[0], y[0], even);
        odd = simd.mul_add_e_f32s(x[1], y[1], odd);
    }
    for (x, y) in a_pairs.remainder().iter().zip(b_pairs.remainder()) {
        even = simd.mul_add_e_f32s(*x, *y, even);
    }
    if !a_tail.is_empty() {
        let x = simd.partial_load_f32s(a_tail);
        let y = simd.partial_load_f32s(b_tail);
        odd = simd.mul_add_e_f32s(x, y, odd);
    }
    simd.reduce_sum_f32s(simd.add_f32s(even, odd))
}

/// Scores of the `N` keys whose rows (all heads) are `rows`, for every head, into
/// `scores[h · KEY_BLOCK + t ..][..N]`.
#[inline(always)]
fn score_group<S: Simd, const VECS: usize, const N: usize>(
    simd: S,
    q_row: &[f32],
    rows: [&[f32]; N],
    d: usize,
    scale: f32,
    t: usize,
    scores: &mut [f32],
) {
    for (h, (q_head, block)) in q_row
        .chunks_exact(d)
        .zip(scores.chunks_exact_mut(KEY_BLOCK))
        .enumerate()
    {
        let heads = rows.map(|row| row.get(h * d..(h + 1) * d).unwrap_or(&[]));
        let dots = dot_n::<S, VECS, N>(simd, q_head, heads);
        for (slot, s) in block.iter_mut().skip(t).zip(dots) {
            *slot = s * scale;
        }
    }
}

/// `o_h += Σ_n p_h[t + n] · v_n[h]` for every head `h`, the `N` value rows (all heads) `rows`;
/// each head's accumulator is `padded` floats (`d` rounded up to whole vectors).
#[inline(always)]
fn accumulate_group<S: Simd, const VECS: usize, const N: usize>(
    simd: S,
    rows: [&[f32]; N],
    (d, padded): (usize, usize),
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
        let heads = rows.map(|row| row.get(h * d..(h + 1) * d).unwrap_or(&[]));
        let p: [f32; N] = core::array::from_fn(|n| block.get(t + n).copied().unwrap_or(0.0));
        axpy_n::<S, VECS, N>(simd, p, heads, S::as_mut_simd_f32s(o_head).0);
    }
}

/// `N` dot products sharing the left row, `a · b[n]`; unrolled when the rows are exactly
/// `VECS > 0` vectors.
#[inline(always)]
fn dot_n<S: Simd, const VECS: usize, const N: usize>(
    simd: S,
    a: &[f32],
    b: [&[f32]; N],
) -> [f32; N] {
    if VECS > 0 {
        let x = <&[S::f32s; VECS]>::try_from(S::as_simd_f32s(a).0);
        let y = b.map(|row| <&[S::f32s; VECS]>::try_from(S::as_simd_f32s(row).0).ok());
        if let (Ok(x), true) = (x, y.iter().all(Option::is_some)) {
            let y = y.map(|row| row.map_or([simd.splat_f32s(0.0); VECS], |r| *r));
            let mut acc = y.map(|row| simd.mul_f32s(x[0], row[0]));
            for t in 1..VECS {
                for (acc, row) in acc.iter_mut().zip(&y) {
                    *acc = simd.mul_add_e_f32s(x[t], row[t], *acc);
                }
            }
            return acc.map(|acc| simd.reduce_sum_f32s(acc));
        }
    }
    b.map(|row| dot::<S, VECS>(simd, a, row))
}

/// `o += Σ_n p[n] · x[n]`, `o` holding the rows' length rounded up to whole vectors: each
/// accumulator is loaded and stored once for the `N` rows.
#[inline(always)]
fn axpy_n<S: Simd, const VECS: usize, const N: usize>(
    simd: S,
    p: [f32; N],
    x: [&[f32]; N],
    o: &mut [S::f32s],
) {
    if VECS > 0 {
        let rows = x.map(|row| <&[S::f32s; VECS]>::try_from(S::as_simd_f32s(row).0).ok());
        if rows.iter().all(Option::is_some) {
            if let Some(Ok(o)) = o.get_mut(..VECS).map(<&mut [S::f32s; VECS]>::try_from) {
                let rows = rows.map(|row| row.map_or([simd.splat_f32s(0.0); VECS], |r| *r));
                let p = p.map(|p| simd.splat_f32s(p));
                for (v, slot) in o.iter_mut().enumerate() {
                    let mut acc = *slot;
                    for (p, row) in p.iter().zip(&rows) {
                        acc = simd.mul_add_e_f32s(*p, row[v], acc);
                    }
                    *slot = acc;
                }
                return;
            }
        }
    }
    for (p, row) in p.into_iter().zip(x) {
        axpy::<S, VECS>(simd, p, row, o);
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
