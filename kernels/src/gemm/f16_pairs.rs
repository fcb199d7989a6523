//! One row of `A` against `f16` weights at AVX-512 and AVX2 (F16C), without separating the
//! packed row pairs: the decode step's product.
//!
//! A packed `f16` panel holds, per column, one word of rows `p` (low half) and `p + 1` (high
//! half) (see [`packed_b`](super::packed_b)). `vcvtph2ps` widens consecutive halves as they lie
//! in memory, so converting a panel row pair straight from memory gives vectors of
//! `[w(p, c), w(p+1, c), w(p, c+1), w(p+1, c+1), …]`. Multiplying them by the activation pair
//! `[a(p), a(p+1), a(p), a(p+1), …]` (one 64-bit broadcast) accumulates, per column, the sum
//! over even rows in one lane and over odd rows in the next. At the end each adjacent lane pair
//! is added and the columns are put back in order, once per tile.
//!
//! Against the generic path ([`accumulate`](super::tile::accumulate)), which separates each pair
//! into an even-row and an odd-row vector before converting, this saves the cross-lane permute
//! per loaded vector (AVX-512: `vpermw`; AVX2: `vpshufb`, `vpermq` and `vextracti128`); the
//! multiply-adds and loads are the same in number.
//!
//! # Numbers
//!
//! Each column's sum is split into two partial sums (even rows, odd rows), each accumulated in
//! `f32` in row order with fused multiply-adds, then added: the error bound of an `f32` dot
//! product of length `k` holds as for the generic path (`γ_k` relative to `Σ |a w|`), only the
//! rounding differs. An odd `k`'s last pair has the packer's zero padding as its odd row, and
//! the activation pair there is `(a(k - 1), 0)`: `A` is never read past its row.

use core::arch::x86_64::{
    __m128i, __m256, __m256i, __m512, __m512i, _mm256_castpd_ps, _mm256_castps_pd, _mm256_cvtph_ps,
    _mm256_fmadd_ps, _mm256_hadd_ps, _mm256_permute4x64_pd, _mm256_set1_pd, _mm256_setzero_ps,
    _mm512_add_ps, _mm512_castpd_ps, _mm512_cvtph_ps, _mm512_fmadd_ps, _mm512_permutex2var_ps,
    _mm512_set1_pd, _mm512_setzero_ps,
};
use half::f16;
use pulp::x86::{V3, V4};

use super::packed_b::PANEL_COLS;
use super::tile::{prefetch, ATile, STREAM_AHEAD_BYTES};

/// The activation pair `(a[0], a[1])` as the bits of one `f64`, or `(a[0], 0)` when `last`.
///
/// # Safety
/// `a[0]`, and `a[1]` unless `last`, must be readable.
#[inline(always)]
unsafe fn pair_bits(a: *const f32, last: bool) -> f64 {
    // SAFETY: the caller guarantees the elements read are readable.
    let (lo, hi) = unsafe { (*a, if last { 0.0 } else { *a.add(1) }) };
    f64::from_bits(u64::from(lo.to_bits()) | (u64::from(hi.to_bits()) << 32))
}

/// Offsets, in `f16` elements from the tile's first column, of each 16- or 8-column vector's
/// words in row pair 0 (`lanes` columns per vector).
fn offsets<const NV: usize>(lanes: usize, panel_stride: usize) -> [usize; NV] {
    core::array::from_fn(|v| {
        let col = v * lanes;
        (col / PANEL_COLS) * panel_stride + (col % PANEL_COLS) * 2
    })
}

/// Row pairs the one-row product prefetches ahead in each panel: `STREAM_AHEAD_BYTES` of
/// 128-byte pairs. On Zen 5 a 32 MB weight ran at 33 GB/s with 6 pairs ahead, 41–47 GB/s with
/// 24; on Zen 4 the f16 Transformer-base decode step took 0.80 (AVX2) and 0.85 (AVX-512) of its
/// time at 24 pairs with 128.
const PREFETCH_PAIRS: usize = STREAM_AHEAD_BYTES / (2 * PANEL_COLS * 2);

/// Prefetches the row pair [`PREFETCH_PAIRS`] pairs ahead of `b` in every panel the tile
/// covers.
#[inline(always)]
fn prefetch_ahead<const NV: usize>(b: *const f16, offsets: &[usize; NV], lanes: usize) {
    for (v, &offset) in offsets.iter().enumerate() {
        if (v * lanes).is_multiple_of(PANEL_COLS) {
            // A row pair of a panel is 128 bytes: two cache lines.
            let ahead = b.wrapping_add(offset + 2 * PREFETCH_PAIRS * PANEL_COLS);
            prefetch(ahead);
            prefetch(ahead.wrapping_add(PANEL_COLS));
        }
    }
}

/// `1 × NV·16` tile at AVX-512: `a.ptr` is the row of `A` (`k_step` 1), `b` the tile's first
/// column in row pair 0, `panel_stride` the `f16` elements of one packed panel.
///
/// # Safety
/// `a.ptr` must hold `kc` readable `f32` with `a.k_step == 1`; the tile's `NV · 16` columns
/// must lie in whole packed panels of `round_up(kc, 2)` rows.
#[inline(always)]
pub(crate) unsafe fn row_v4<const NV: usize>(
    simd: V4,
    kc: usize,
    a: ATile,
    b: *const f16,
    panel_stride: usize,
) -> [pulp::f32x16; NV] {
    let _ = simd;
    let offsets = offsets::<NV>(16, panel_stride);
    // SAFETY: `V4` proves AVX-512F (the caller's token).
    let zero = unsafe { _mm512_setzero_ps() };
    let mut lo = [zero; NV];
    let mut hi = [zero; NV];
    let mut b_ptr = b;
    for p in 0..kc.div_ceil(2) {
        prefetch_ahead(b_ptr, &offsets, 16);
        // SAFETY: elements `2p` and (unless this is an odd `kc`'s last pair) `2p + 1` of the
        // row are below `kc`; AVX-512F is the token's.
        let pair = unsafe {
            _mm512_castpd_ps(_mm512_set1_pd(pair_bits(a.ptr.add(2 * p), 2 * p + 1 == kc)))
        };
        for v in 0..NV {
            // SAFETY: 16 column words (64 bytes) of this row pair lie in the tile's panel;
            // AVX-512F is the token's.
            unsafe {
                let words = b_ptr.add(offsets[v]);
                let w0 = _mm512_cvtph_ps(core::ptr::read_unaligned(words as *const __m256i));
                let w1 =
                    _mm512_cvtph_ps(core::ptr::read_unaligned(words.add(16) as *const __m256i));
                lo[v] = _mm512_fmadd_ps(pair, w0, lo[v]);
                hi[v] = _mm512_fmadd_ps(pair, w1, hi[v]);
            }
        }
        b_ptr = b_ptr.wrapping_add(2 * PANEL_COLS);
    }
    // SAFETY: AVX-512F (the caller's token).
    core::array::from_fn(|v| pulp::cast(unsafe { fold_v4(lo[v], hi[v]) }))
}

/// Columns 0–15 from the interleaved partial sums of columns 0–7 (`lo`) and 8–15 (`hi`).
///
/// # Safety
/// AVX-512F must be available.
#[inline(always)]
unsafe fn fold_v4(lo: __m512, hi: __m512) -> __m512 {
    const EVEN: [i32; 16] = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30];
    const ODD: [i32; 16] = [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31];
    // SAFETY: 64 bytes of plain integers either way; AVX-512F is the caller's guarantee.
    unsafe {
        let even = core::mem::transmute::<[i32; 16], __m512i>(EVEN);
        let odd = core::mem::transmute::<[i32; 16], __m512i>(ODD);
        _mm512_add_ps(
            _mm512_permutex2var_ps(lo, even, hi),
            _mm512_permutex2var_ps(lo, odd, hi),
        )
    }
}

/// Vectors of a tile [`row_v3`] accumulates at once: 8 accumulators (even and odd halves of 4
/// vectors), the activation pair and two converted vectors fit AVX2's 16 registers.
const V3_GROUP: usize = 4;

/// `1 × NV·8` tile at AVX2 with F16C, as [`row_v4`], in groups of [`V3_GROUP`] vectors (one
/// pass over the depth each).
///
/// # Safety
/// As [`row_v4`], and the CPU must have F16C (every `Avx2`-level [`Isa`](crate::Isa) was built
/// after detection found it; its code runs in a function that enables it).
#[inline(always)]
pub(crate) unsafe fn row_v3<const NV: usize>(
    simd: V3,
    kc: usize,
    a: ATile,
    b: *const f16,
    panel_stride: usize,
) -> [pulp::f32x8; NV] {
    let offsets = offsets::<NV>(8, panel_stride);
    let zero = pulp::cast(simd.splat_f32x8(0.0));
    let mut out = [zero; NV];
    if NV.is_multiple_of(V3_GROUP) {
        for (group, out) in offsets
            .chunks_exact(V3_GROUP)
            .zip(out.chunks_exact_mut(V3_GROUP))
        {
            let group: &[usize; V3_GROUP] = group.try_into().unwrap_or(&[0; V3_GROUP]);
            // SAFETY: forwarded contract, for this group's columns.
            let sums = unsafe { row_v3_group::<V3_GROUP>(kc, a, b, group) };
            out.copy_from_slice(&sums);
        }
    } else {
        // SAFETY: forwarded contract; `NV < V3_GROUP` vectors fit the registers too.
        out = unsafe { row_v3_group::<NV>(kc, a, b, &offsets) };
    }
    out
}

/// One group of `G` vectors of [`row_v3`].
///
/// # Safety
/// As [`row_v3`], for the columns at `offsets`.
#[inline(always)]
unsafe fn row_v3_group<const G: usize>(
    kc: usize,
    a: ATile,
    b: *const f16,
    offsets: &[usize; G],
) -> [pulp::f32x8; G] {
    // SAFETY: `V3` proves AVX2 (the caller's token).
    let zero = unsafe { _mm256_setzero_ps() };
    let mut lo = [zero; G];
    let mut hi = [zero; G];
    let mut b_ptr = b;
    for p in 0..kc.div_ceil(2) {
        prefetch_ahead(b_ptr, offsets, 8);
        // SAFETY: elements `2p` and (unless this is an odd `kc`'s last pair) `2p + 1` of the
        // row are below `kc`; AVX is implied by the token.
        let pair = unsafe {
            _mm256_castpd_ps(_mm256_set1_pd(pair_bits(a.ptr.add(2 * p), 2 * p + 1 == kc)))
        };
        for v in 0..G {
            // SAFETY: 8 column words (32 bytes) of this row pair lie in the tile's panel;
            // F16C and FMA are the caller's guarantee.
            unsafe {
                let words = b_ptr.add(offsets[v]);
                let w0 = _mm256_cvtph_ps(core::ptr::read_unaligned(words as *const __m128i));
                let w1 = _mm256_cvtph_ps(core::ptr::read_unaligned(words.add(8) as *const __m128i));
                lo[v] = _mm256_fmadd_ps(pair, w0, lo[v]);
                hi[v] = _mm256_fmadd_ps(pair, w1, hi[v]);
            }
        }
        b_ptr = b_ptr.wrapping_add(2 * PANEL_COLS);
    }
    // SAFETY: AVX2 (the caller's token).
    core::array::from_fn(|v| pulp::cast(unsafe { fold_v3(lo[v], hi[v]) }))
}

/// Columns 0–7 from the interleaved partial sums of columns 0–3 (`lo`) and 4–7 (`hi`):
/// `vhaddps` gives `[c0, c1, c4, c5 | c2, c3, c6, c7]`, a 64-bit permute orders them.
///
/// # Safety
/// AVX2 must be available.
#[inline(always)]
unsafe fn fold_v3(lo: __m256, hi: __m256) -> __m256 {
    // SAFETY: AVX2 is the caller's guarantee.
    unsafe {
        let sums = _mm256_hadd_ps(lo, hi);
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(
            sums,
        )))
    }
}
