//! The decode path: a few queries (one per beam, or the single new token) over a long KV cache.
//!
//! SIMD lanes run along `d_head`. Keys are processed in blocks of [`KEY_BLOCK`]; each block of K
//! and V is read from memory once and used by every query of the call while it sits in L1. Per
//! query and block: scores `q·k` (one vector dot product per key), the block's max, `exp`
//! vectorised over the block's keys, then `o = alpha · o + Σ p_j v_j` with the output held in
//! registers a few vectors at a time while the block's V rows stream past.

use super::prefill::query_tile;
use super::{Checked, Operands, StridedMut};
use crate::error::KernelError;
use crate::isa::Isa;
use crate::math::exp;
use crate::scratch::{Scratch, ScratchSpec};
use pulp::Simd;

/// Keys per block: 128 rows of K and V of one head (64 KiB at `d_head = 64`) stay in L1/L2
/// while every query of the call uses them.
const KEY_BLOCK: usize = 128;

/// Largest `q_len` the decode path takes at a level with `lanes` lanes: below a quarter of a
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

/// Scratch of the decode path: each query's output accumulator (`d_head` rounded up to whole
/// vectors), one block of scores, and each query's running max and sum.
pub(crate) fn scratch(lanes: usize, d_head: usize) -> ScratchSpec {
    let queries = max_queries(lanes);
    let padded = d_head.div_ceil(lanes).saturating_mul(lanes);
    ScratchSpec::f32s(queries.saturating_mul(padded))
        .and(ScratchSpec::f32s(KEY_BLOCK))
        .and(ScratchSpec::f32s(queries))
        .and(ScratchSpec::f32s(queries))
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
            run_blocks(simd, self.checked, self.operands, self.out, self.scratch)
        }
    }
    isa.dispatch(Decode {
        checked,
        operands,
        out,
        scratch,
    })
}

#[inline(always)]
fn run_blocks<S: Simd>(
    simd: S,
    checked: &Checked,
    operands: &Operands<'_>,
    out: StridedMut<'_>,
    scratch: &mut Scratch<'_>,
) -> Result<(), KernelError> {
    let lanes = S::F32_LANES;
    let shape = &checked.shape;
    let d = shape.d_head;
    let padded = d.div_ceil(lanes) * lanes;
    let queries = shape.q_len;
    if queries > max_queries(lanes) {
        return Err(KernelError::InvalidArgument(
            "too many queries for the decode path",
        ));
    }
    let o_all = scratch.take(max_queries(lanes) * padded)?;
    let scores = scratch.take(KEY_BLOCK)?;
    let max = scratch.take(max_queries(lanes))?;
    let sum = scratch.take(max_queries(lanes))?;
    let band = &checked.band;
    let (k, v) = (&operands.k, &operands.v);

    for head in 0..shape.heads {
        let col = head * d;
        o_all.fill(0.0);
        max.fill(f32::NEG_INFINITY);
        sum.fill(0.0);
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
                let q_row = &operands.q.data[i * operands.q.stride + col..][..d];
                let s = &mut scores[..b - a];
                for (slot, j) in s.iter_mut().zip(a..b) {
                    *slot = dot(simd, q_row, &k.data[j * k.stride + col..][..d]) * checked.scale;
                }
                if let Some(bias) = operands.bias_row(head, i) {
                    for (slot, &x) in s.iter_mut().zip(&bias[a..b]) {
                        *slot += x;
                    }
                }
                let new_max = max[i].max(slice_max(simd, s));
                if new_max == f32::NEG_INFINITY {
                    continue;
                }
                let alpha = exp_scalar(simd, max[i] - new_max);
                let total = exp_shifted(simd, s, new_max);
                sum[i] = sum[i] * alpha + total;
                max[i] = new_max;
                let o = S::as_mut_simd_f32s(&mut o_all[i * padded..][..padded]).0;
                let v_rows = &v.data[a * v.stride + col..];
                accumulate_pv(simd, o, alpha, s, v_rows, v.stride, d);
            }
            j0 = block_end;
        }
        for i in 0..queries {
            let out_row = &mut out.data[i * out.stride + col..][..d];
            let inverse = if sum[i] > 0.0 { 1.0 / sum[i] } else { 0.0 };
            for (y, &o) in out_row.iter_mut().zip(&o_all[i * padded..]) {
                *y = o * inverse;
            }
        }
    }
    Ok(())
}

/// `Σ a_c b_c` over equal-length rows, vectorised, two accumulators.
#[inline(always)]
fn dot<S: Simd>(simd: S, a: &[f32], b: &[f32]) -> f32 {
    let (a_head, a_tail) = S::as_simd_f32s(a);
    let (b_head, b_tail) = S::as_simd_f32s(b);
    let mut even = simd.splat_f32s(0.0);
    let mut odd = even;
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

/// `o = alpha · o + Σ_j p_j · v_rows[j · stride ..][..d]`, `o` holding `d` rounded up to whole
/// vectors. Four vectors of `o` stay in registers while the rows stream past.
#[inline(always)]
fn accumulate_pv<S: Simd>(
    simd: S,
    o: &mut [S::f32s],
    alpha: f32,
    p: &[f32],
    v_rows: &[f32],
    stride: usize,
    d: usize,
) {
    let lanes = S::F32_LANES;
    let full = d / lanes;
    let mut first = 0;
    while first + 4 <= full {
        pv_vectors::<S, 4>(
            simd,
            &mut o[first..],
            alpha,
            p,
            v_rows,
            stride,
            first * lanes,
        );
        first += 4;
    }
    while first < full {
        pv_vectors::<S, 1>(
            simd,
            &mut o[first..],
            alpha,
            p,
            v_rows,
            stride,
            first * lanes,
        );
        first += 1;
    }
    if full * lanes < d {
        let alpha = simd.splat_f32s(alpha);
        let width = d - full * lanes;
        let Some(slot) = o.get_mut(full) else {
            return;
        };
        let mut acc = simd.mul_f32s(*slot, alpha);
        for (j, &pj) in p.iter().enumerate() {
            let row = &v_rows[j * stride + full * lanes..][..width];
            acc = simd.mul_add_e_f32s(simd.splat_f32s(pj), simd.partial_load_f32s(row), acc);
        }
        *slot = acc;
    }
}

/// [`accumulate_pv`] for the `C` whole vectors of `o` starting at element `offset` of each row.
#[inline(always)]
fn pv_vectors<S: Simd, const C: usize>(
    simd: S,
    o: &mut [S::f32s],
    alpha: f32,
    p: &[f32],
    v_rows: &[f32],
    stride: usize,
    offset: usize,
) {
    let alpha = simd.splat_f32s(alpha);
    let Some(o) = o.get_mut(..C) else {
        return;
    };
    let mut acc: [S::f32s; C] = core::array::from_fn(|t| simd.mul_f32s(o[t], alpha));
    for (j, &pj) in p.iter().enumerate() {
        let row = &v_rows[j * stride + offset..][..C * S::F32_LANES];
        let vectors = S::as_simd_f32s(row).0;
        let pj = simd.splat_f32s(pj);
        for (slot, &x) in acc.iter_mut().zip(vectors) {
            *slot = simd.mul_add_e_f32s(pj, x, *slot);
        }
    }
    o.copy_from_slice(&acc);
}
