//! The decode path: a few queries (one per beam, or the single new token) over a long KV cache.
//!
//! Keys are processed in blocks of [`KEY_BLOCK`], and within a block in chunks of one vector's
//! lanes of keys (16 on AVX-512) across all heads, so K and V rows are read whole and in order:
//! one sequential stream each, which the hardware prefetchers follow (a head-by-head walk would
//! read `d_head` floats every `heads · d_head`). Software prefetch of the next block or chunk
//! was measured slower (it fills the miss queue the demand loads need) and is not used.
//! Each block is used by every query of the call while it sits in L2. Per query, head and chunk:
//! - scores: one partial vector per key along `d_head` (no horizontal sum per key), reduced for
//!   the whole chunk by one transpose-and-add tree into a vector of scores
//!   ([`super::lanes::transpose_sum`]);
//! - per head and block, the block's max, `exp` vectorised over its keys, the running sum;
//! - `o = alpha · o + Σ p_j v_j`, the head's accumulator held in registers for the chunk.

use super::lanes::{transpose_sum, MAX_LANES};
use super::{Checked, Operands, StridedMut};
use crate::error::KernelError;
use crate::isa::Isa;
use crate::math::exp;
use crate::scratch::{Scratch, ScratchSpec};
use pulp::Simd;

/// Keys per block: 64 rows of K and V (256 KiB at 8 heads × 64) stay in L2 for every query. A
/// multiple of every level's lane count, so chunks of keys never straddle two blocks' scores.
const KEY_BLOCK: usize = 64;

/// Largest `q_len` the decode path takes, at every level: a beam of up to 8. Each key block
/// is read from memory once for all the queries, so a beam costs little more than one query,
/// where the prefill path would fill a whole query tile (24 on AVX2) with a few queries.
pub(crate) const MAX_QUERIES: usize = 8;

/// Whether a call with `q_len` queries takes the decode path.
pub(crate) const fn handles(q_len: usize) -> bool {
    q_len <= MAX_QUERIES
}

/// Scratch of the decode path: per query and head the output accumulator (`d_head` rounded up
/// to whole vectors), running max and sum; per head a block of scores and a rescale factor.
pub(crate) fn scratch(lanes: usize, heads: usize, d_head: usize) -> ScratchSpec {
    let queries = MAX_QUERIES;
    let padded = d_head.div_ceil(lanes).saturating_mul(lanes);
    let per_query_head = queries.saturating_mul(heads);
    ScratchSpec::f32s(per_query_head.saturating_mul(padded))
        .and(ScratchSpec::f32s(heads.saturating_mul(KEY_BLOCK)))
        .and(ScratchSpec::f32s(per_query_head))
        .and(ScratchSpec::f32s(per_query_head))
        .and(ScratchSpec::f32s(heads))
}

/// Runs the decode path of a validated call with `q_len <= MAX_QUERIES`.
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
    if queries > MAX_QUERIES {
        return Err(KernelError::InvalidArgument(
            "too many queries for the decode path",
        ));
    }
    let o_all = scratch.take(MAX_QUERIES * heads * padded)?;
    let scores = scratch.take(heads * KEY_BLOCK)?;
    let max = scratch.take(MAX_QUERIES * heads)?;
    let sum = scratch.take(MAX_QUERIES * heads)?;
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
            let mut t = 0;
            while t < n {
                let chunk = lanes.min(n - t);
                let Some(rows) = ChunkRows::new(k, a + t, chunk, width) else {
                    break;
                };
                score_chunk::<S, VECS>(simd, q_row, rows, d, checked.scale, t, scores);
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
                let Some(rows) = ChunkRows::new(v, a + t, chunk, width) else {
                    break;
                };
                accumulate_chunk::<S, VECS>(simd, rows, (d, padded), t, scores, o_query);
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

/// `count` consecutive key rows of an operand, `stride` floats apart, each at least `width`
/// floats long, checked once so that the hot loops read them through a pointer.
#[derive(Clone, Copy)]
struct ChunkRows<'a> {
    data: &'a [f32],
    stride: usize,
    count: usize,
}

impl<'a> ChunkRows<'a> {
    /// The rows `first..first + count` of `src`, or `None` if they are not all `width` floats
    /// inside `src` (never for a validated call).
    #[inline(always)]
    fn new(src: &super::Strided<'a>, first: usize, count: usize, width: usize) -> Option<Self> {
        let last = first.checked_add(count)?.checked_sub(1)?;
        let end = last.checked_mul(src.stride)?.checked_add(width)?;
        let data = src.data.get(first.checked_mul(src.stride)?..end)?;
        Some(ChunkRows {
            data,
            stride: src.stride,
            count,
        })
    }

    /// Whether every row holds the floats `col..col + len`.
    #[inline(always)]
    fn holds(&self, col: usize, len: usize) -> bool {
        self.count >= 1
            && (self.count - 1)
                .checked_mul(self.stride)
                .and_then(|n| n.checked_add(col))
                .and_then(|n| n.checked_add(len))
                .is_some_and(|n| n <= self.data.len())
    }

    /// Pointer to element `col` of row `j` (rows past `count` repeat the last one).
    #[inline(always)]
    fn ptr(&self, j: usize, col: usize) -> *const f32 {
        self.data
            .as_ptr()
            .wrapping_add(j.min(self.count.saturating_sub(1)) * self.stride + col)
    }
}

/// Reads one vector at `ptr`.
///
/// # Safety
/// `ptr..ptr + S::F32_LANES` must be readable floats.
#[inline(always)]
unsafe fn load<S: Simd>(ptr: *const f32) -> S::f32s {
    // SAFETY: the caller guarantees the lanes are in bounds; `read_unaligned` has no alignment
    // requirement and `S::f32s` is plain floats.
    unsafe { core::ptr::read_unaligned(ptr.cast::<S::f32s>()) }
}

/// The scores of the keys of `rows` for every head, into
/// `scores[h · KEY_BLOCK + t ..][..rows.count]`: per key a vector of partial products along
/// `d_head` (the query's vectors are loaded once per head), then one transpose-and-add tree for
/// the chunk's sums.
#[inline(always)]
fn score_chunk<S: Simd, const VECS: usize>(
    simd: S,
    q_row: &[f32],
    rows: ChunkRows<'_>,
    d: usize,
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
        let partial = partial_dots::<S, VECS>(simd, q_head, rows, h * d);
        let sums = simd.mul_f32s(transpose_sum(simd, partial), scale);
        if let Some(slots) = block.get_mut(t..t + rows.count) {
            if rows.count == lanes {
                if let Some(slot) = S::as_mut_simd_f32s(slots).0.first_mut() {
                    *slot = sums;
                }
            } else {
                simd.partial_store_f32s(slots, sums);
            }
        }
    }
}

/// Per key `j < S::F32_LANES` of `rows` (repeating the last one past `rows.count`), the
/// lane-wise products of `a` with the row's `a.len()` floats from `col`, summed over vectors:
/// a vector whose lanes add up to the dot product. Unrolled when `a` is exactly `VECS > 0`
/// vectors.
#[inline(always)]
fn partial_dots<S: Simd, const VECS: usize>(
    simd: S,
    a: &[f32],
    rows: ChunkRows<'_>,
    col: usize,
) -> [S::f32s; MAX_LANES] {
    let lanes = S::F32_LANES.min(MAX_LANES);
    let zero = simd.splat_f32s(0.0);
    let mut acc = [zero; MAX_LANES];
    let (a_head, a_tail) = S::as_simd_f32s(a);
    let fits = rows.holds(col, a.len());
    debug_assert!(fits, "decode rows out of bounds");
    if !fits {
        return acc;
    }
    if let (true, Ok(x)) = (VECS > 0, <&[S::f32s; VECS]>::try_from(a_head)) {
        for (j, acc) in acc.iter_mut().enumerate().take(lanes) {
            let row = rows.ptr(j, col);
            for (c, &x) in x.iter().enumerate() {
                // SAFETY: vector `c < VECS` of the row spans floats
                // `col + c·lanes..col + (c + 1)·lanes <= col + a.len()`, inside the row
                // (checked above).
                let y = unsafe { load::<S>(row.add(c * lanes)) };
                *acc = simd.mul_add_e_f32s(x, y, *acc);
            }
        }
        return acc;
    }
    for (j, acc) in acc.iter_mut().enumerate().take(lanes) {
        let row = rows.ptr(j, col);
        for (c, &x) in a_head.iter().enumerate() {
            // SAFETY: as above, `c < a_head.len()`.
            let y = unsafe { load::<S>(row.add(c * lanes)) };
            *acc = simd.mul_add_e_f32s(x, y, *acc);
        }
        if !a_tail.is_empty() {
            // SAFETY: the tail spans floats `col + a_head.len()·lanes..col + a.len()`, inside
            // the row (checked above).
            let tail =
                unsafe { core::slice::from_raw_parts(row.add(a_head.len() * lanes), a_tail.len()) };
            let y = simd.partial_load_f32s(tail);
            *acc = simd.mul_add_e_f32s(simd.partial_load_f32s(a_tail), y, *acc);
        }
    }
    acc
}

/// `o_h += Σ_{j < rows.count} p_h[t + j] · v_j[h]` for every head `h`; each head's accumulator
/// is `padded` floats (`d` rounded up to whole vectors). With `d = VECS > 0` vectors the
/// accumulator stays in registers for the chunk (two sets, even and odd keys, for independent
/// FMA chains).
#[inline(always)]
fn accumulate_chunk<S: Simd, const VECS: usize>(
    simd: S,
    rows: ChunkRows<'_>,
    (d, padded): (usize, usize),
    t: usize,
    scores: &[f32],
    o_query: &mut [f32],
) {
    let lanes = S::F32_LANES;
    if padded == 0 {
        return;
    }
    for (h, (o_head, block)) in o_query
        .chunks_exact_mut(padded)
        .zip(scores.chunks_exact(KEY_BLOCK))
        .enumerate()
    {
        let col = h * d;
        let (Some(p), true) = (block.get(t..t + rows.count), rows.holds(col, d)) else {
            debug_assert!(false, "decode rows out of bounds");
            continue;
        };
        let o = S::as_mut_simd_f32s(o_head).0;
        if let (true, Some(Ok(o))) = (
            VECS > 0 && d == VECS * lanes,
            o.get_mut(..VECS).map(<&mut [S::f32s; VECS]>::try_from),
        ) {
            let mut even = *o;
            let mut odd = [simd.splat_f32s(0.0); VECS];
            let mut pairs = p.chunks_exact(2);
            let mut j = 0;
            for pair in &mut pairs {
                let (p0, p1) = (simd.splat_f32s(pair[0]), simd.splat_f32s(pair[1]));
                let (r0, r1) = (rows.ptr(j, col), rows.ptr(j + 1, col));
                for c in 0..VECS {
                    // SAFETY: rows `j, j + 1 < count`; vector `c` spans floats
                    // `col + c·lanes..col + (c + 1)·lanes <= col + d`, inside the row
                    // (checked above).
                    let (x0, x1) =
                        unsafe { (load::<S>(r0.add(c * lanes)), load::<S>(r1.add(c * lanes))) };
                    even[c] = simd.mul_add_e_f32s(p0, x0, even[c]);
                    odd[c] = simd.mul_add_e_f32s(p1, x1, odd[c]);
                }
                j += 2;
            }
            if let [p0] = pairs.remainder() {
                let p0 = simd.splat_f32s(*p0);
                let r0 = rows.ptr(j, col);
                for (c, slot) in even.iter_mut().enumerate() {
                    // SAFETY: as above, row `j < count`.
                    let x0 = unsafe { load::<S>(r0.add(c * lanes)) };
                    *slot = simd.mul_add_e_f32s(p0, x0, *slot);
                }
            }
            for ((slot, e), o) in o.iter_mut().zip(even).zip(odd) {
                *slot = simd.add_f32s(e, o);
            }
            continue;
        }
        for (j, &p) in p.iter().enumerate() {
            // SAFETY: row `j < count` holds floats `col..col + d` (checked above).
            let row = unsafe { core::slice::from_raw_parts(rows.ptr(j, col), d) };
            axpy(simd, p, row, o);
        }
    }
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
