//! Rows of `A` against `f16` weights at AVX-512 and AVX2 (F16C), without separating the packed
//! row pairs: the decode step's products (one row; at AVX-512 also a beam's few rows).
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
//! multiply-adds and loads are the same in number. It takes twice the accumulators per column.
//! A tile of several rows ([`rows`]) makes one pass over the depth per panel (two AVX-512
//! vectors, `4·MR` accumulators), so it serves up to 6 rows at AVX-512 and none at AVX2, whose
//! 16 registers hold one row's panel only: passes of one vector (8 columns, `2·MR`
//! accumulators) each read part of every row pair's lines and ran at 0.7–0.8 of the generic
//! path's speed on the memory-sized `4×512×32000` and `8×512×32000` (Zen 4).
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

/// The vector operations of one level, on the interleaved pairs.
pub(crate) trait Pairs: Copy {
    /// One register of `f32`.
    type Acc: Copy;
    /// The level's `f32` vector as the tile returns it.
    type Out: Copy;
    /// `f32` lanes per register: columns per vector of the tile.
    const LANES: usize;

    /// A register of zeros.
    ///
    /// # Safety
    /// The level's features must be available.
    unsafe fn zero() -> Self::Acc;

    /// `LANES` halves from `words`, widened.
    ///
    /// # Safety
    /// `LANES` `f16` at `words` must be readable; the level's features and F16C available.
    unsafe fn widen(words: *const f16) -> Self::Acc;

    /// The activation pair (as the bits of one `f64`) in every lane pair.
    ///
    /// # Safety
    /// The level's features must be available.
    unsafe fn broadcast(pair: f64) -> Self::Acc;

    /// `a · b + c`, fused.
    ///
    /// # Safety
    /// The level's features must be available.
    unsafe fn mul_add(a: Self::Acc, b: Self::Acc, c: Self::Acc) -> Self::Acc;

    /// The `LANES` columns, in order, from the interleaved partial sums of the first
    /// (`lo`) and second (`hi`) half of them.
    ///
    /// # Safety
    /// The level's features must be available.
    unsafe fn fold(lo: Self::Acc, hi: Self::Acc) -> Self::Out;
}

impl Pairs for V4 {
    type Acc = __m512;
    type Out = pulp::f32x16;
    const LANES: usize = 16;

    #[inline(always)]
    unsafe fn zero() -> __m512 {
        // SAFETY: AVX-512F, the caller's guarantee.
        unsafe { _mm512_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn widen(words: *const f16) -> __m512 {
        // SAFETY: 32 readable bytes and AVX-512F, the caller's guarantee.
        unsafe { _mm512_cvtph_ps(core::ptr::read_unaligned(words as *const __m256i)) }
    }

    #[inline(always)]
    unsafe fn broadcast(pair: f64) -> __m512 {
        // SAFETY: AVX-512F, the caller's guarantee.
        unsafe { _mm512_castpd_ps(_mm512_set1_pd(pair)) }
    }

    #[inline(always)]
    unsafe fn mul_add(a: __m512, b: __m512, c: __m512) -> __m512 {
        // SAFETY: AVX-512F, the caller's guarantee.
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }

    /// Columns 0–15 from the interleaved partial sums of columns 0–7 (`lo`) and 8–15 (`hi`).
    #[inline(always)]
    unsafe fn fold(lo: __m512, hi: __m512) -> pulp::f32x16 {
        const EVEN: [i32; 16] = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30];
        const ODD: [i32; 16] = [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31];
        // SAFETY: 64 bytes of plain integers either way; AVX-512F is the caller's guarantee.
        unsafe {
            let even = core::mem::transmute::<[i32; 16], __m512i>(EVEN);
            let odd = core::mem::transmute::<[i32; 16], __m512i>(ODD);
            pulp::cast(_mm512_add_ps(
                _mm512_permutex2var_ps(lo, even, hi),
                _mm512_permutex2var_ps(lo, odd, hi),
            ))
        }
    }
}

impl Pairs for V3 {
    type Acc = __m256;
    type Out = pulp::f32x8;
    const LANES: usize = 8;

    #[inline(always)]
    unsafe fn zero() -> __m256 {
        // SAFETY: AVX, the caller's guarantee.
        unsafe { _mm256_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn widen(words: *const f16) -> __m256 {
        // SAFETY: 16 readable bytes and F16C, the caller's guarantee.
        unsafe { _mm256_cvtph_ps(core::ptr::read_unaligned(words as *const __m128i)) }
    }

    #[inline(always)]
    unsafe fn broadcast(pair: f64) -> __m256 {
        // SAFETY: AVX, the caller's guarantee.
        unsafe { _mm256_castpd_ps(_mm256_set1_pd(pair)) }
    }

    #[inline(always)]
    unsafe fn mul_add(a: __m256, b: __m256, c: __m256) -> __m256 {
        // SAFETY: FMA, the caller's guarantee.
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }

    /// Columns 0–7 from the interleaved partial sums of columns 0–3 (`lo`) and 4–7 (`hi`):
    /// `vhaddps` gives `[c0, c1, c4, c5 | c2, c3, c6, c7]`, a 64-bit permute orders them.
    #[inline(always)]
    unsafe fn fold(lo: __m256, hi: __m256) -> pulp::f32x8 {
        // SAFETY: AVX2, the caller's guarantee.
        unsafe {
            let sums = _mm256_hadd_ps(lo, hi);
            pulp::cast(_mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(
                _mm256_castps_pd(sums),
            )))
        }
    }
}

/// The activation pair `(a[0], 0)` of an odd depth's last row pair, as the bits of one `f64`.
///
/// # Safety
/// `a[0]` must be readable.
#[inline(always)]
unsafe fn last_pair(a: *const f32) -> f64 {
    // SAFETY: the caller guarantees `a[0]` is readable.
    f64::from_bits(u64::from(unsafe { *a }.to_bits()))
}

/// Offsets, in `f16` elements from the tile's first column, of each `lanes`-column vector's
/// words in row pair 0.
fn offsets<const NV: usize>(lanes: usize, panel_stride: usize) -> [usize; NV] {
    core::array::from_fn(|v| {
        let col = v * lanes;
        (col / PANEL_COLS) * panel_stride + (col % PANEL_COLS) * 2
    })
}

/// Row pairs the products prefetch ahead in each panel: `STREAM_AHEAD_BYTES` of 128-byte
/// pairs. On Zen 5 a 32 MB weight ran at 33 GB/s with 6 pairs ahead, 41–47 GB/s with 24; on
/// Zen 4 the f16 Transformer-base decode step took 0.80 (AVX2) and 0.85 (AVX-512) of its time
/// at 24 pairs with 128.
const PREFETCH_PAIRS: usize = STREAM_AHEAD_BYTES / (2 * PANEL_COLS * 2);

/// Prefetches the row pair [`PREFETCH_PAIRS`] pairs ahead of `panel`, a panel's first column.
#[inline(always)]
fn prefetch_pair_ahead(panel: *const f16) {
    // A row pair of a panel is 128 bytes: two cache lines.
    let ahead = panel.wrapping_add(2 * PREFETCH_PAIRS * PANEL_COLS);
    prefetch(ahead);
    prefetch(ahead.wrapping_add(PANEL_COLS));
}

/// Vectors of a one-row tile accumulated in one pass over the depth: at AVX2, 8 accumulators
/// (even and odd halves of 4 vectors), the activation pair and two converted vectors fit the
/// 16 registers.
const ROW_GROUP: usize = 4;

/// `1 × NV·LANES` tile: `a.ptr` is the row of `A` (`k_step` 1), `b` the tile's first column in
/// row pair 0, `panel_stride` the `f16` elements of one packed panel. The vectors are taken in
/// groups of [`ROW_GROUP`] (one pass over the depth each) when they divide into them.
///
/// # Safety
/// `a.ptr` must hold `kc` readable `f32` with `a.k_step == 1`; the tile's `NV · LANES` columns
/// must lie in whole packed panels of `round_up(kc, 2)` rows; the CPU must have the level's
/// features and F16C (every `Avx2`-level [`Isa`](crate::Isa) was built after detection found
/// it; its code runs in a function that enables it).
#[inline(always)]
pub(crate) unsafe fn row<P: Pairs, const NV: usize>(
    kc: usize,
    a: ATile,
    b: *const f16,
    panel_stride: usize,
) -> [P::Out; NV] {
    let offsets = offsets::<NV>(P::LANES, panel_stride);
    if !NV.is_multiple_of(ROW_GROUP) {
        // SAFETY: forwarded contract; fewer than `ROW_GROUP` vectors (the tile shapes keep
        // `NV` at most 4) fit the registers too.
        return unsafe { row_group::<P, NV>(kc, a, b, &offsets) };
    }
    // SAFETY: the level's features, the caller's guarantee.
    let zero = unsafe { P::fold(P::zero(), P::zero()) };
    let mut out = [zero; NV];
    for (group, out) in offsets
        .chunks_exact(ROW_GROUP)
        .zip(out.chunks_exact_mut(ROW_GROUP))
    {
        let group: &[usize; ROW_GROUP] = group.try_into().unwrap_or(&[0; ROW_GROUP]);
        // SAFETY: forwarded contract, for this group's columns.
        let sums = unsafe { row_group::<P, ROW_GROUP>(kc, a, b, group) };
        out.copy_from_slice(&sums);
    }
    out
}

/// One group of `G` vectors of [`row`].
///
/// # Safety
/// As [`row`], for the columns at `offsets`.
#[inline(always)]
unsafe fn row_group<P: Pairs, const G: usize>(
    kc: usize,
    a: ATile,
    b: *const f16,
    offsets: &[usize; G],
) -> [P::Out; G] {
    // SAFETY: the level's features, the caller's guarantee.
    let zero = unsafe { P::zero() };
    let mut lo = [zero; G];
    let mut hi = [zero; G];
    let mut b_ptr = b;
    for p in 0..kc / 2 {
        // SAFETY: elements `2p` and `2p + 1 < kc` of the row (an unaligned 8-byte read); the
        // tile's columns of this row pair, the level's features and F16C are the caller's
        // guarantee.
        unsafe {
            let pair = P::broadcast(core::ptr::read_unaligned(a.ptr.add(2 * p) as *const f64));
            pair_step::<P, G>(pair, b_ptr, offsets, &mut lo, &mut hi);
        }
        b_ptr = b_ptr.wrapping_add(2 * PANEL_COLS);
    }
    if kc % 2 == 1 {
        // SAFETY: element `kc - 1`, the row's last, and the padded last row pair; as above.
        unsafe {
            let pair = P::broadcast(last_pair(a.ptr.add(kc - 1)));
            pair_step::<P, G>(pair, b_ptr, offsets, &mut lo, &mut hi);
        }
    }
    // A loop rather than `array::from_fn`: a closure would not inherit the caller's target
    // features, and the folds' intrinsics would become calls.
    // SAFETY: the level's features, the caller's guarantee.
    let mut out = [unsafe { P::fold(lo[0], hi[0]) }; G];
    for v in 1..G {
        // SAFETY: as above.
        out[v] = unsafe { P::fold(lo[v], hi[v]) };
    }
    out
}

/// One row pair of [`row_group`]: `lo`, `hi` += the activation `pair` times the widened words
/// of the pair at `b_ptr` (row pair `p` of the tile's first column), with the panels' hints.
///
/// # Safety
/// As [`row`], for the `G` vectors at `offsets` in this row pair.
#[inline(always)]
unsafe fn pair_step<P: Pairs, const G: usize>(
    pair: P::Acc,
    b_ptr: *const f16,
    offsets: &[usize; G],
    lo: &mut [P::Acc; G],
    hi: &mut [P::Acc; G],
) {
    for (v, &offset) in offsets.iter().enumerate() {
        if (v * P::LANES).is_multiple_of(PANEL_COLS) {
            prefetch_pair_ahead(b_ptr.wrapping_add(offset));
        }
    }
    for v in 0..G {
        // SAFETY: `2 · LANES` column words of this row pair lie in the tile's panel; the
        // level's features and F16C are the caller's guarantee.
        unsafe {
            let words = b_ptr.add(offsets[v]);
            lo[v] = P::mul_add(pair, P::widen(words), lo[v]);
            hi[v] = P::mul_add(pair, P::widen(words.add(P::LANES)), hi[v]);
        }
    }
}

/// Most rows of a several-row tile ([`rows`]): at [`PASS_VECTORS`] = 2 its `4·MR` sums, the
/// two loaded weight vectors and the broadcast pair fit AVX-512's 32 registers up to 6 rows.
pub(crate) const MAX_ROWS: usize = 6;

/// Vectors of columns per pass over the depth of a several-row tile: one AVX-512 panel.
pub(crate) const PASS_VECTORS: usize = 2;

/// `MR × NV·LANES` tile of several rows of `A` (`a.k_step` 1, `a.row_step` apart), one pass
/// over the depth per `G` vectors of columns (`4·MR` accumulators for `G = 2`).
///
/// # Safety
/// As [`row`], for each of the `MR` rows of `A`; `G` divides `NV`.
#[inline(always)]
pub(crate) unsafe fn rows<P: Pairs, const MR: usize, const NV: usize, const G: usize>(
    kc: usize,
    a: ATile,
    b: *const f16,
    panel_stride: usize,
) -> [[P::Out; NV]; MR] {
    let offsets = offsets::<NV>(P::LANES, panel_stride);
    // SAFETY: the level's features, the caller's guarantee.
    let zero = unsafe { P::fold(P::zero(), P::zero()) };
    let mut out = [[zero; NV]; MR];
    for (g, group) in offsets.chunks_exact(G).enumerate() {
        let group: &[usize; G] = group.try_into().unwrap_or(&[0; G]);
        // SAFETY: forwarded contract, for this group's columns.
        let sums = unsafe { rows_group::<P, MR, G>(kc, a, b, group) };
        for (row, sums) in out.iter_mut().zip(sums) {
            row[g * G..(g + 1) * G].copy_from_slice(&sums);
        }
    }
    out
}

/// One group of `G` vectors of [`rows`].
///
/// # Safety
/// As [`rows`], for the columns at `offsets`.
#[inline(always)]
unsafe fn rows_group<P: Pairs, const MR: usize, const G: usize>(
    kc: usize,
    a: ATile,
    b: *const f16,
    offsets: &[usize; G],
) -> [[P::Out; G]; MR] {
    // SAFETY: the level's features, the caller's guarantee.
    let zero = unsafe { P::zero() };
    let mut lo = [[zero; G]; MR];
    let mut hi = [[zero; G]; MR];
    let mut b_ptr = b;
    for p in 0..kc.div_ceil(2) {
        for (v, &offset) in offsets.iter().enumerate() {
            if (v * P::LANES).is_multiple_of(PANEL_COLS) {
                prefetch_pair_ahead(b_ptr.wrapping_add(offset));
            }
        }
        let mut w0 = [zero; G];
        let mut w1 = [zero; G];
        for v in 0..G {
            // SAFETY: `2 · LANES` column words of this row pair lie in the tile's panel; the
            // level's features and F16C are the caller's guarantee.
            unsafe {
                let words = b_ptr.add(offsets[v]);
                w0[v] = P::widen(words);
                w1[v] = P::widen(words.add(P::LANES));
            }
        }
        for i in 0..MR {
            // SAFETY: elements `2p` and, below `kc`, `2p + 1` of row `i`, readable by the
            // caller's guarantee; the level's features as above.
            unsafe {
                let at = a.ptr.add(i * a.row_step + 2 * p);
                let pair = if 2 * p + 1 < kc {
                    core::ptr::read_unaligned(at as *const f64)
                } else {
                    last_pair(at)
                };
                let pair = P::broadcast(pair);
                for v in 0..G {
                    lo[i][v] = P::mul_add(pair, w0[v], lo[i][v]);
                    hi[i][v] = P::mul_add(pair, w1[v], hi[i][v]);
                }
            }
        }
        b_ptr = b_ptr.wrapping_add(2 * PANEL_COLS);
    }
    // SAFETY: the level's features, the caller's guarantee.
    let mut out = [[unsafe { P::fold(zero, zero) }; G]; MR];
    for i in 0..MR {
        for v in 0..G {
            // SAFETY: the level's features, the caller's guarantee.
            out[i][v] = unsafe { P::fold(lo[i][v], hi[i][v]) };
        }
    }
    out
}
