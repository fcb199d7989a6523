//! The decode path: a few queries (one per beam, the single new token, or a short forced
//! prefix) over a long KV cache.
//!
//! Keys are processed in blocks of [`KEY_BLOCK`]. Every K and V vector of a block is loaded
//! once and used by every query of the call while it sits in a register, so `q_len` queries
//! cost `q_len` times the arithmetic of one but the memory traffic of one. Per block:
//! - **scores**, a vector's lanes of keys (a chunk) at a time, all heads: per key and vector of
//!   `d_head`, one load of K and one FMA per query into that query's partial vector (lanes run
//!   along `d_head`, no horizontal sum per key); per query, one transpose-and-add tree turns the
//!   chunk's partial vectors into a vector of scores ([`super::lanes::transpose_sum`]). The
//!   queries, copied once per call into scratch padded with zeros to whole vectors, are read
//!   from L1. K rows are read whole and in order, one sequential stream the hardware prefetchers
//!   follow.
//! - **online softmax**, per query and head: keys the query does not see (causal offset, window,
//!   radius, padding: one range per query; the blocks of the global keys come first, then
//!   those of the queries' own ranges above them) get weight 0; over the seen keys the block's
//!   max, `exp` vectorised over them, the running sum and the factor
//!   `alpha = e^(old max − new max)`.
//! - **`o = alpha · o + Σ p_j v_j`**, per head and run of consecutive vectors of `d_head`: the
//!   accumulators of every query for those vectors stay in registers over all the keys of the
//!   block; each V vector is loaded once and multiplied by every query's broadcast weight
//!   ([`crate::tiling::DecodeTiling`] sets how many accumulators). With two or more queries the
//!   block's V rows are prefetched while its keys are scored ([`prefetches`]).
//!
//! Error: every score is an f32 dot product of length `d_head` (as a single query's), and the
//! softmax is the same online softmax as the prefill path's, so the bound of [`super`] holds.
//! A NaN in the V row of a key that one query of the call does not see, but another does, may
//! reach the first query too (its weight 0 times NaN), as for keys masked inside a prefill tile.

use super::kv::KvElement;
use super::lanes::{transpose_sum, MAX_LANES};
use super::prefetch::{prefetch_line, prefetch_rows};
use super::{Checked, Operands};
use crate::error::KernelError;
use crate::isa::Isa;
use crate::math::exp_non_positive;
use crate::scratch::{Scratch, ScratchSpec};
use crate::tiling;
use crate::view::{View, ViewMut};
use pulp::Simd;

/// Keys per block: 128 rows of K and V (192 KiB each at 6 heads × 64) stay in L2 between the
/// scores and the `P V` update; the scores of a block are `q_len × heads × 128` floats. 128
/// measured 3–5% faster than 64 at 5 queries over 1500 keys on AVX-512 (per-block work: the
/// softmax reductions, the accumulators' loads and stores), 256 no faster. A multiple of every
/// level's lane count, so chunks of keys never straddle two blocks.
const KEY_BLOCK: usize = 128;

/// How many rows ahead the `P V` update asks for the V vectors it will read.
const PREFETCH_ROWS: usize = 8;

/// Bytes of K and V from which one query prefetches V too: a span larger than L2, which in a
/// decoder step (the encoder memory of cross-attention, a long cache) the weights streamed
/// between two steps have evicted from every cache.
const PREFETCH_SPAN_BYTES: usize = 1 << 20;

/// Whether a call of `queries` queries over `kv_bytes` bytes of K and V prefetches V: each
/// block's rows while its keys are scored, and [`PREFETCH_ROWS`] rows ahead inside the `P V`
/// update. Several queries give the prefetches enough arithmetic to hide behind. One query over
/// K and V in cache does not: a V row is a prefetch per cache line (24 at 6 heads × 64), about as
/// many load slots as the scores' K loads; 1 × 1500 keys at 6 × 64 in L3 measured ~17% faster
/// without them at AVX-512 and AVX2 (AMD Zen 5). Over K and V in memory they pay: Whisper
/// tiny's greedy step (1500 `f16` positions, 2.3 MB a layer, read after the weights' 56 MB)
/// measured ~2% faster per token with them at AVX2 and AVX-512 (medians of 6: 2.65 against
/// 2.71 ms at AVX2).
const fn prefetches(queries: usize, kv_bytes: usize) -> bool {
    queries > 1 || kv_bytes >= PREFETCH_SPAN_BYTES
}

/// Largest `q_len` the decode path takes, at every level: a beam of up to 8.
pub(crate) const MAX_QUERIES: usize = 8;

/// Whether a call with `q_len` queries takes the decode path.
pub(crate) const fn handles(q_len: usize) -> bool {
    q_len <= MAX_QUERIES
}

/// Scratch of the decode path, for up to [`MAX_QUERIES`] queries: per query and head the output
/// accumulator and the zero-padded query (`d_head` rounded up to whole vectors), a block of
/// scores, the running max and sum and the rescale factor.
pub(crate) fn scratch(lanes: usize, heads: usize, d_head: usize) -> ScratchSpec {
    let padded = d_head.div_ceil(lanes).saturating_mul(lanes);
    let per_query_head = MAX_QUERIES.saturating_mul(heads);
    ScratchSpec::f32s(per_query_head.saturating_mul(padded))
        .and(ScratchSpec::f32s(per_query_head.saturating_mul(padded)))
        .and(ScratchSpec::f32s(per_query_head.saturating_mul(KEY_BLOCK)))
        .and(ScratchSpec::f32s(per_query_head))
        .and(ScratchSpec::f32s(per_query_head))
        .and(ScratchSpec::f32s(per_query_head))
}

/// Runs the decode path of a validated call with `q_len >= 1`: in consecutive runs of
/// [`MAX_QUERIES`] queries (the last one shorter) when it has more, each run with its own rows of
/// Q, the output and the bias, and its queries' positions under a causal mask.
pub(crate) fn run_all<E: KvElement>(
    isa: Isa,
    checked: &Checked,
    operands: &Operands<'_, E>,
    out: ViewMut<'_>,
    scratch: &mut [f32],
    spec: ScratchSpec,
) -> Result<(), KernelError> {
    let q_len = checked.shape.q_len;
    if handles(q_len) {
        return run(
            isa,
            checked,
            operands,
            out,
            &mut Scratch::new(scratch, spec)?,
        );
    }
    let mut out = out;
    let mut first = 0;
    while first < q_len {
        let rows = MAX_QUERIES.min(q_len - first);
        let part = checked.rows(first..first + rows);
        let operands = operands.rows(first..first + rows)?;
        let out = out.reborrow().slice_rows(first, rows)?;
        run(
            isa,
            &part,
            &operands,
            out,
            &mut Scratch::new(&mut *scratch, spec)?,
        )?;
        first += rows;
    }
    Ok(())
}

/// Runs the decode path of a validated call with `1 <= q_len <= MAX_QUERIES`.
fn run<E: KvElement>(
    isa: Isa,
    checked: &Checked,
    operands: &Operands<'_, E>,
    out: ViewMut<'_>,
    scratch: &mut Scratch<'_>,
) -> Result<(), KernelError> {
    struct Decode<'a, 'b, 's, E> {
        checked: &'a Checked,
        operands: &'a Operands<'b, E>,
        out: ViewMut<'b>,
        scratch: &'a mut Scratch<'s>,
    }
    impl<E: KvElement> pulp::WithSimd for Decode<'_, '_, '_, E> {
        type Output = Result<(), KernelError>;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> Self::Output {
            let Decode {
                checked,
                operands,
                out,
                scratch,
            } = self;
            let call = (checked, operands, out, scratch);
            match checked.shape.q_len {
                1 => run_queries::<S, E, 1>(simd, call),
                2 => run_queries::<S, E, 2>(simd, call),
                3 => run_queries::<S, E, 3>(simd, call),
                4 => run_queries::<S, E, 4>(simd, call),
                5 => run_queries::<S, E, 5>(simd, call),
                6 => run_queries::<S, E, 6>(simd, call),
                7 => run_queries::<S, E, 7>(simd, call),
                8 => run_queries::<S, E, 8>(simd, call),
                _ => Err(KernelError::InvalidArgument(
                    "the decode path takes 1 to 8 queries",
                )),
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

/// The arguments of a decode call.
type Call<'a, 'b, 's, E> = (
    &'a Checked,
    &'a Operands<'b, E>,
    ViewMut<'b>,
    &'a mut Scratch<'s>,
);

/// The sizes the block loops share.
#[derive(Clone, Copy)]
struct Dims {
    heads: usize,
    d: usize,
    /// `d` rounded up to whole vectors.
    padded: usize,
    /// Row width, `heads × d`.
    width: usize,
}

/// The decode loop for exactly `Q` queries.
#[inline(always)]
fn run_queries<S: Simd, E: KvElement, const Q: usize>(
    simd: S,
    (checked, operands, out, scratch): Call<'_, '_, '_, E>,
) -> Result<(), KernelError> {
    let lanes = S::F32_LANES;
    let shape = &checked.shape;
    let dims = Dims {
        heads: shape.heads,
        d: shape.d_head,
        padded: shape.d_head.div_ceil(lanes) * lanes,
        width: checked.width,
    };
    let (heads, padded) = (dims.heads, dims.padded);
    if shape.q_len != Q {
        return Err(KernelError::InvalidArgument("decode query count mismatch"));
    }
    let o_all = scratch.take(MAX_QUERIES * heads * padded)?;
    let q_pad = scratch.take(MAX_QUERIES * heads * padded)?;
    let scores = scratch.take(MAX_QUERIES * heads * KEY_BLOCK)?;
    let max = scratch.take(MAX_QUERIES * heads)?;
    let sum = scratch.take(MAX_QUERIES * heads)?;
    let alpha = scratch.take(MAX_QUERIES * heads)?;
    // Only the `Q` queries' accumulators and running values are read.
    o_all[..Q * heads * padded].fill(0.0);
    max[..Q * heads].fill(f32::NEG_INFINITY);
    sum[..Q * heads].fill(0.0);
    let q = &operands.q;
    for (i, q_query) in q_pad.chunks_exact_mut(heads * padded).take(Q).enumerate() {
        let q_row = &q.data[i * q.stride..][..dims.width];
        for (slot, q_head) in q_query
            .chunks_exact_mut(padded)
            .zip(q_row.chunks_exact(dims.d))
        {
            slot[..dims.d].copy_from_slice(q_head);
            slot[dims.d..].fill(0.0);
        }
    }
    let q_pad: &[f32] = q_pad;
    let mut partial = [[simd.splat_f32s(0.0); MAX_LANES]; Q];
    // The global keys, then the local ones: two bands of one range per query.
    let parts = checked.band.parts();
    let seen: usize = parts.iter().map(|p| p.keys_of_rows(0..Q).0.len()).sum();
    let kv_bytes = seen * dims.width * 2 * core::mem::size_of::<E>();
    let prefetch = prefetches(Q, kv_bytes);
    for band in &parts {
        let (visible, _) = band.keys_of_rows(0..Q);
        let mut j0 = visible.start;
        while j0 < visible.end {
            let block_end = (j0 + KEY_BLOCK).min(visible.end);
            let n = block_end - j0;
            let mut t = 0;
            while t < n {
                let chunk = lanes.min(n - t);
                let Some(rows) = ChunkRows::new(&operands.k, j0 + t, chunk, dims.width) else {
                    break;
                };
                if prefetch {
                    // The same keys' V rows, whole and in order (a stream the memory system
                    // serves at full speed), into L2 for the `P V` update, which walks them a
                    // head at a time.
                    prefetch_rows(&operands.v, j0 + t..j0 + t + chunk, 0, dims.width);
                }
                score_chunk::<S, E, Q>(
                    simd,
                    q_pad,
                    rows,
                    dims,
                    checked.scale,
                    t,
                    &mut partial,
                    scores,
                );
                t += chunk;
            }
            for i in 0..Q {
                let seen = band.keys(i);
                let (a, b) = (seen.start.max(j0), seen.end.min(block_end));
                for h in 0..heads {
                    let state = i * heads + h;
                    let s = &mut scores[state * KEY_BLOCK..][..n];
                    if a >= b {
                        s.fill(0.0);
                        alpha[state] = 1.0;
                        continue;
                    }
                    let (before, rest) = s.split_at_mut(a - j0);
                    let (s, after) = rest.split_at_mut(b - a);
                    before.fill(0.0);
                    after.fill(0.0);
                    if let Some(bias) = operands.bias_of(h, i, a..b) {
                        for (slot, &x) in s.iter_mut().zip(bias) {
                            *slot += x;
                        }
                    }
                    let new_max = max[state].max(slice_max(simd, s));
                    if new_max == f32::NEG_INFINITY {
                        // Nothing seen yet by this query and head: zero weights, nothing to
                        // rescale.
                        s.fill(0.0);
                        alpha[state] = 1.0;
                        continue;
                    }
                    alpha[state] = exp_scalar(simd, max[state] - new_max);
                    let total = exp_shifted(simd, s, new_max);
                    sum[state] = sum[state] * alpha[state] + total;
                    max[state] = new_max;
                }
            }
            if let Some(rows) = ChunkRows::new(&operands.v, j0, n, dims.width) {
                for h in 0..heads {
                    let weights = (&*scores, &*alpha);
                    accumulate_head::<S, E, Q>(simd, rows, dims, h, weights, o_all, prefetch);
                }
            }
            j0 = block_end;
        }
    }
    for i in 0..Q {
        let out_row = &mut out.data[i * out.stride..][..dims.width];
        let o_query = &o_all[i * heads * padded..][..heads * padded];
        for (h, (y_head, o_head)) in out_row
            .chunks_exact_mut(dims.d)
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

/// `count` consecutive key rows of an operand, `stride` elements apart, each at least `width`
/// elements long, checked once so that the hot loops read them through a pointer.
struct ChunkRows<'a, E> {
    data: &'a [E],
    stride: usize,
    count: usize,
}

impl<E> Clone for ChunkRows<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for ChunkRows<'_, E> {}

impl<'a, E> ChunkRows<'a, E> {
    /// The rows `first..first + count` of `src`, or `None` if they are not all `width` elements
    /// inside `src` (never for a validated call).
    #[inline(always)]
    fn new(src: &View<'a, E>, first: usize, count: usize, width: usize) -> Option<Self> {
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

    /// Pointer to element `col` of row `j < count` (no clamping: the hot loops step it by
    /// `stride`).
    #[inline(always)]
    fn row(&self, j: usize, col: usize) -> *const E {
        self.data.as_ptr().wrapping_add(j * self.stride + col)
    }

    /// Pointer to element `col` of row `j` (rows past `count` repeat the last one).
    #[inline(always)]
    fn ptr(&self, j: usize, col: usize) -> *const E {
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

/// The scores of the keys of `rows` for every query and head, into
/// `scores[(i · heads + h) · KEY_BLOCK + t..][..S::F32_LANES]` (lanes past `rows.count` hold the
/// last key's score again): per group of keys and vector of `d_head`, each vector of K and of
/// every query is loaded once and multiplied into the `queries × keys` partial vectors held in
/// registers; then one transpose-and-add tree per query. `partial` is room for the trees'
/// inputs.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn score_chunk<S: Simd, E: KvElement, const Q: usize>(
    simd: S,
    q_pad: &[f32],
    rows: ChunkRows<'_, E>,
    dims: Dims,
    scale: f32,
    t: usize,
    partial: &mut [[S::f32s; MAX_LANES]; Q],
    scores: &mut [f32],
) {
    let lanes = S::F32_LANES;
    let Dims {
        heads, d, padded, ..
    } = dims;
    let scale = simd.splat_f32s(scale);
    let fits = t + lanes <= KEY_BLOCK
        && q_pad.len() >= Q * heads * padded
        && scores.len() >= Q * heads * KEY_BLOCK;
    debug_assert!(fits, "decode scratch too small");
    if !fits {
        return;
    }
    // Keys per group: the most whose accumulators for every query fit the level's budget.
    let budget = tiling::of_lanes(lanes).decode.accumulators;
    let mut keys = lanes.min(MAX_LANES);
    while keys > 1 && Q * keys > budget {
        keys /= 2;
    }
    for h in 0..heads {
        let col = h * d;
        if !rows.holds(col, d) {
            debug_assert!(false, "decode rows out of bounds");
            return;
        }
        let group = KeyGroup::<Q, E> {
            rows,
            col,
            d,
            // The query vectors of head `h`: `padded / lanes` whole vectors from each pointer.
            q: core::array::from_fn(|i| q_pad.as_ptr().wrapping_add((i * heads + h) * padded)),
        };
        let mut j = 0;
        while j < lanes.min(MAX_LANES) {
            match keys {
                16 => group.partial_dots::<S, 16>(simd, j, partial),
                8 => group.partial_dots::<S, 8>(simd, j, partial),
                4 => group.partial_dots::<S, 4>(simd, j, partial),
                2 => group.partial_dots::<S, 2>(simd, j, partial),
                _ => group.partial_dots::<S, 1>(simd, j, partial),
            }
            j += keys;
        }
        for (i, partial) in partial.iter().enumerate() {
            let sums = simd.mul_f32s(transpose_sum(simd, *partial), scale);
            let start = (i * heads + h) * KEY_BLOCK + t;
            // SAFETY: `start + lanes <= (i · heads + h + 1) · KEY_BLOCK <= scores.len()`
            // (checked above); `write_unaligned` has no alignment requirement.
            unsafe {
                core::ptr::write_unaligned(scores.as_mut_ptr().add(start).cast::<S::f32s>(), sums)
            };
        }
    }
}

/// One head of a chunk of keys, checked: the key rows (at least `col + d` floats each) and,
/// per query, its zero-padded head (`d` rounded up to whole vectors).
struct KeyGroup<'a, const Q: usize, E> {
    rows: ChunkRows<'a, E>,
    col: usize,
    d: usize,
    q: [*const f32; Q],
}

impl<const Q: usize, E: KvElement> KeyGroup<'_, Q, E> {
    /// `partial[i][j + g]` for keys `j + g`, `g < G`: the lane-wise products of query `i` with
    /// the key's head, summed over the vectors of `d_head`, for every query.
    #[inline(always)]
    fn partial_dots<S: Simd, const G: usize>(
        &self,
        simd: S,
        j: usize,
        partial: &mut [[S::f32s; MAX_LANES]; Q],
    ) {
        let lanes = S::F32_LANES;
        let (full, tail) = (self.d / lanes, self.d % lanes);
        let zero = simd.splat_f32s(0.0);
        let mut acc = [[zero; G]; Q];
        let row: [*const E; G] = core::array::from_fn(|g| self.rows.ptr(j + g, self.col));
        for c in 0..full {
            // SAFETY: vector `c < d / lanes` of a row spans floats
            // `col + c·lanes..col + (c + 1)·lanes <= col + d`, inside the row (checked by the
            // caller).
            let k: [S::f32s; G] =
                core::array::from_fn(|g| unsafe { E::load(simd, row[g].add(c * lanes)) });
            for (acc, q) in acc.iter_mut().zip(self.q) {
                // SAFETY: `(c + 1)·lanes <= padded`: inside query `i`'s padded head (checked
                // by the caller).
                let q = unsafe { load::<S>(q.add(c * lanes)) };
                for (acc, k) in acc.iter_mut().zip(k) {
                    *acc = simd.mul_add_e_f32s(q, k, *acc);
                }
            }
        }
        if tail > 0 {
            // SAFETY: the tail spans floats `col + full·lanes..col + d`, inside the row.
            let k: [S::f32s; G] = core::array::from_fn(|g| unsafe {
                E::load_tail(simd, row[g].add(full * lanes), tail)
            });
            for (acc, q) in acc.iter_mut().zip(self.q) {
                // SAFETY: `full < padded / lanes`, as above; lanes past `tail` are zero.
                let q = unsafe { load::<S>(q.add(full * lanes)) };
                for (acc, k) in acc.iter_mut().zip(k) {
                    *acc = simd.mul_add_e_f32s(q, k, *acc);
                }
            }
        }
        for (partial, acc) in partial.iter_mut().zip(acc) {
            if let Some(slots) = partial.get_mut(j..j + G) {
                slots.copy_from_slice(&acc);
            }
        }
    }
}

/// `o_(i,h) = alpha_(i,h) · o_(i,h) + Σ_j p_(i,h)[j] · v_j[h]` over the `rows.count` keys of
/// the block, for every query `i` and head `h`: the head's vectors of `d_head` in runs of as many
/// as the level's accumulators allow for `Q` queries, then the last partial vector; with
/// `prefetch`, V rows are asked for [`PREFETCH_ROWS`] ahead.
#[inline(always)]
fn accumulate_head<S: Simd, E: KvElement, const Q: usize>(
    simd: S,
    rows: ChunkRows<'_, E>,
    dims: Dims,
    h: usize,
    (scores, alpha): (&[f32], &[f32]),
    o_all: &mut [f32],
    prefetch: bool,
) {
    let lanes = S::F32_LANES;
    let Dims {
        heads, d, padded, ..
    } = dims;
    let col = h * d;
    let fits = rows.holds(col, d)
        && rows.count <= KEY_BLOCK
        && scores.len() >= Q * heads * KEY_BLOCK
        && alpha.len() >= Q * heads
        && o_all.len() >= Q * heads * padded;
    debug_assert!(fits, "decode rows or scratch out of bounds");
    if !fits {
        return;
    }
    // Every query's pointer is an offset of one base pointer taken once: a second `as_mut_ptr`
    // (a fresh `&mut` reborrow of `o_all`) would invalidate the pointers derived before it.
    let (p_base, o_base) = (scores.as_ptr(), o_all.as_mut_ptr());
    let head = Head::<Q, E> {
        rows,
        col,
        p: core::array::from_fn(|i| p_base.wrapping_add((i * heads + h) * KEY_BLOCK)),
        alpha: core::array::from_fn(|i| alpha[i * heads + h]),
        o: core::array::from_fn(|i| o_base.wrapping_add((i * heads + h) * padded)),
        prefetch,
    };
    let tiling = tiling::of_lanes(lanes).decode;
    let full = d / lanes;
    // Vectors per run: the largest power of two whose accumulators fit, at most the head's.
    let mut run = 8;
    while run > 1 && (Q * run > tiling.accumulators || run > full) {
        run /= 2;
    }
    // Too few independent chains: split the keys into even and odd sets.
    let split = Q * run < tiling.min_chains && 2 * Q * run <= tiling.accumulators;
    let mut c = 0;
    while c + run <= full {
        match (run, split) {
            (8, _) => head.update::<S, 8, false>(simd, c),
            (4, false) => head.update::<S, 4, false>(simd, c),
            (4, true) => head.update::<S, 4, true>(simd, c),
            (2, false) => head.update::<S, 2, false>(simd, c),
            (2, true) => head.update::<S, 2, true>(simd, c),
            (_, false) => head.update::<S, 1, false>(simd, c),
            (_, true) => head.update::<S, 1, true>(simd, c),
        }
        c += run;
    }
    while c < full {
        head.update::<S, 1, false>(simd, c);
        c += 1;
    }
    if d % lanes > 0 {
        head.update_tail(simd, full, d % lanes);
    }
}

/// One head of a block, checked: the key rows (at least `col + d_head` floats each), per query
/// the block's weights (`rows.count` floats), the rescale factor and the output accumulator
/// (`d_head` rounded up to whole vectors). The `o` pointers are offsets of one pointer to the
/// accumulators, taken after the last `&mut` reborrow of them, so that reads and writes through
/// any of them leave the others valid.
struct Head<'a, const Q: usize, E> {
    rows: ChunkRows<'a, E>,
    col: usize,
    p: [*const f32; Q],
    alpha: [f32; Q],
    o: [*mut f32; Q],
    prefetch: bool,
}

impl<const Q: usize, E: KvElement> Head<'_, Q, E> {
    /// The update of vectors `c..c + R` of every query's accumulator (whole vectors inside
    /// `d_head`), accumulators in registers over every key; with `SPLIT`, odd keys go to a
    /// second set of accumulators, added at the end.
    #[inline(always)]
    fn update<S: Simd, const R: usize, const SPLIT: bool>(&self, simd: S, c: usize) {
        let lanes = S::F32_LANES;
        let zero = simd.splat_f32s(0.0);
        let mut even = [[zero; R]; Q];
        let mut odd = [[zero; R]; Q];
        for ((acc, &o), &alpha) in even.iter_mut().zip(&self.o).zip(&self.alpha) {
            let alpha = simd.splat_f32s(alpha);
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: vector `c + r` is whole inside `d_head`, so inside the padded
                // accumulator (checked by `accumulate_head`); `o` derives from the one base
                // pointer of every query's accumulator, valid for the whole update.
                *acc = simd.mul_f32s(unsafe { load::<S>(o.add((c + r) * lanes)) }, alpha);
            }
        }
        let count = self.rows.count;
        let step = if SPLIT { 2 } else { 1 };
        let mut j = 0;
        while j + step <= count {
            let row = self.rows.row(j, self.col + c * lanes);
            if self.prefetch {
                prefetch_line(row.wrapping_add(PREFETCH_ROWS * self.rows.stride));
                if SPLIT {
                    prefetch_line(row.wrapping_add((PREFETCH_ROWS + 1) * self.rows.stride));
                }
            }
            for r in 0..R {
                // SAFETY: row `j < count`; vector `c + r` lies inside the row's `d_head` floats
                // from `col` (checked by `accumulate_head`).
                let v = unsafe { E::load(simd, row.add(r * lanes)) };
                for (acc, p) in even.iter_mut().zip(self.p) {
                    // SAFETY: `j < count <= KEY_BLOCK` weights of each query.
                    let p = simd.splat_f32s(unsafe { *p.add(j) });
                    acc[r] = simd.mul_add_e_f32s(p, v, acc[r]);
                }
            }
            if SPLIT {
                let row = self.rows.row(j + 1, self.col + c * lanes);
                for r in 0..R {
                    // SAFETY: as above, row `j + 1 < count`.
                    let v = unsafe { E::load(simd, row.add(r * lanes)) };
                    for (acc, p) in odd.iter_mut().zip(self.p) {
                        // SAFETY: as above, `j + 1 < count`.
                        let p = simd.splat_f32s(unsafe { *p.add(j + 1) });
                        acc[r] = simd.mul_add_e_f32s(p, v, acc[r]);
                    }
                }
            }
            j += step;
        }
        if j < count {
            let row = self.rows.row(j, self.col + c * lanes);
            for r in 0..R {
                // SAFETY: as above, row `j < count`.
                let v = unsafe { E::load(simd, row.add(r * lanes)) };
                for (acc, p) in even.iter_mut().zip(self.p) {
                    // SAFETY: as above.
                    let p = simd.splat_f32s(unsafe { *p.add(j) });
                    acc[r] = simd.mul_add_e_f32s(p, v, acc[r]);
                }
            }
        }
        for ((even, odd), &o) in even.iter().zip(&odd).zip(&self.o) {
            for (r, (&e, &x)) in even.iter().zip(odd).enumerate() {
                let sum = if SPLIT { simd.add_f32s(e, x) } else { e };
                // SAFETY: as for the load above; the accumulators of different queries and
                // heads do not overlap, and no reference to them is alive during the update.
                unsafe { core::ptr::write_unaligned(o.add((c + r) * lanes).cast(), sum) };
            }
        }
    }

    /// The update of the last, partial vector `c` (its first `len < lanes` floats inside
    /// `d_head`; the accumulator's lanes above stay zero).
    #[inline(always)]
    fn update_tail<S: Simd>(&self, simd: S, c: usize, len: usize) {
        let lanes = S::F32_LANES;
        let mut acc: [S::f32s; Q] = core::array::from_fn(|i| {
            // SAFETY: vector `c` is the last of the padded accumulator; `self.o[i]` derives
            // from the one base pointer of every query's accumulator (see `Head`).
            let o = unsafe { load::<S>(self.o[i].add(c * lanes)) };
            simd.mul_f32s(o, simd.splat_f32s(self.alpha[i]))
        });
        for j in 0..self.rows.count {
            let row = self.rows.row(j, self.col + c * lanes);
            // SAFETY: row `j < count` holds floats `col + c·lanes..col + d_head`, `len` of them.
            let v = unsafe { E::load_tail(simd, row, len) };
            for (acc, p) in acc.iter_mut().zip(self.p) {
                // SAFETY: `j < count <= KEY_BLOCK` weights of each query.
                let p = simd.splat_f32s(unsafe { *p.add(j) });
                *acc = simd.mul_add_e_f32s(p, v, *acc);
            }
        }
        for (acc, o) in acc.into_iter().zip(self.o) {
            // SAFETY: as for the load above.
            unsafe { core::ptr::write_unaligned(o.add(c * lanes).cast(), acc) };
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

/// `e^x` for one value `x <= 0`, through the vector [`exp_non_positive`].
#[inline(always)]
fn exp_scalar<S: Simd>(simd: S, x: f32) -> f32 {
    simd.reduce_max_f32s(exp_non_positive(simd, simd.splat_f32s(x)))
}

/// Replaces each `s` by `e^(s - shift)` and returns their sum; `shift` is at least every `s`
/// (the running maximum).
#[inline(always)]
fn exp_shifted<S: Simd>(simd: S, values: &mut [f32], shift: f32) -> f32 {
    let shift_v = simd.splat_f32s(shift);
    let (head, tail) = S::as_mut_simd_f32s(values);
    let mut total = simd.splat_f32s(0.0);
    for x in head {
        *x = exp_non_positive(simd, simd.sub_f32s(*x, shift_v));
        total = simd.add_f32s(total, *x);
    }
    let mut total = simd.reduce_sum_f32s(total);
    if !tail.is_empty() {
        let x = simd.partial_load_f32s(tail);
        simd.partial_store_f32s(tail, exp_non_positive(simd, simd.sub_f32s(x, shift_v)));
        total += tail.iter().sum::<f32>();
    }
    total
}
