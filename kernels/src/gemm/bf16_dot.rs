//! The opt-in AVX-512 BF16 path for `bf16` weights (see
//! [`PackedB::with_bf16_dot`](super::PackedB::with_bf16_dot)).
//!
//! `vdpbf16ps` multiplies pairs of `bf16` by pairs of `bf16` and adds both products to an `f32`
//! lane: 32 multiply-adds per instruction where widening the weights and using FMA gives 16.
//! Its operands are exactly the packed `bf16` layout: a word per column holding rows `2q` and
//! `2q + 1`. `A` is rounded once per call into the same pairs (`bf16`, nearest even), rows
//! zero-padded to a whole tile, in the caller's scratch; then every tile reads whole words of
//! both. The loops mirror the `f32` paths: column spans that stay in L2, `k` blocks of up to
//! 1024 rows, and tiles of `MR` rows chosen from `m` (1, 2, 4 or 8) with enough accumulators
//! to hide the instruction's latency.

#[cfg(target_arch = "x86_64")]
use crate::gemm::{driver::Columns, packed_b::PANEL_COLS, tile::Output};
use crate::scratch::ScratchSpec;
use crate::view::View;
use half::bf16;

/// Tallest tile: `A`'s rows are padded to a multiple of this.
const MAX_MR: usize = 8;

/// Words of `A` (pairs of rows of `B`) per `k` block.
#[cfg(target_arch = "x86_64")]
const KC_WORDS: usize = 512;

/// Bytes of packed `B` a column span covers (half of L2).
#[cfg(target_arch = "x86_64")]
const SPAN_BYTES: usize = 512 * 1024;

/// Floats of scratch holding `A` as `bf16` pairs: `round_up(m, 8) × ceil(k / 2)` words.
pub(crate) fn a_len(m: usize, k: usize) -> usize {
    m.div_ceil(MAX_MR)
        .saturating_mul(MAX_MR)
        .saturating_mul(k.div_ceil(2))
}

/// Scratch one BF16-dot call needs (shared by every task; only read by them).
pub(crate) fn scratch(m: usize, k: usize) -> ScratchSpec {
    ScratchSpec::f32s(a_len(m, k))
}

/// Rounds `a` (`m × k`) to `bf16` pairs into `dst` (`a_len(m, k)` floats holding `u32` bit
/// patterns, row stride `ceil(k / 2)`): word `q` of a row is column `2q` in its low half and
/// `2q + 1` (zero past `k`) in its high half; rows past `m` are zero.
pub(crate) fn pack_a(a: View<'_>, dst: &mut [f32]) {
    let words = a.cols.div_ceil(2);
    let rounded = |i: usize, p: usize| -> u32 {
        if p < a.cols {
            u32::from(bf16::from_f32(a.data[i * a.stride + p]).to_bits())
        } else {
            0
        }
    };
    if words == 0 {
        return;
    }
    for (i, row) in dst.chunks_exact_mut(words).enumerate() {
        for (q, word) in row.iter_mut().enumerate() {
            *word = if i < a.rows {
                f32::from_bits(rounded(i, 2 * q) | rounded(i, 2 * q + 1) << 16)
            } else {
                0.0
            };
        }
    }
}

/// What one task of a BF16-dot call reads (only x86-64 has the path that reads it).
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct DotOperands<'a> {
    /// `A` packed by [`pack_a`].
    pub a_words: &'a [f32],
    /// The packed `bf16` panels of `B`, as their bits.
    pub b: &'a [u16],
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

/// Computes the task's columns of `C` with `vdpbf16ps`.
///
/// # Safety
/// The CPU has AVX-512 F/BW/CD/DQ/VL and BF16 (an `Isa` at `Avx512` with
/// `has_avx512_bf16()`); `ops.a_words` holds `a_len(m, k)` floats packed by `pack_a`; `ops.b`
/// points at the `round_up(k, 2) · round_up(n, 32)` packed `bf16` of a validated `PackedB`;
/// `out` is validated for `m × n`; `cols` is this task's panel range and no other thread writes
/// those columns of `C`.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn run(ops: DotOperands<'_>, out: &Output<'_>, cols: Columns) {
    // SAFETY: forwarded contract (the features are the caller's guarantee).
    unsafe { x86::run(ops, out, cols) }
}

// The AVX-512 and AVX-512 BF16 intrinsics are stable since Rust 1.89, the workspace's MSRV.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
    use crate::gemm::tile::{prefetch, TileAt};
    use core::arch::x86_64::*;
    use pulp::x86::V4;

    /// Runs at the target features of pulp's `V4` plus AVX-512 BF16 (as do the functions it
    /// calls, so they inline into it).
    #[target_feature(enable = "avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512bf16")]
    #[target_feature(enable = "avx2,fma,avx,bmi1,bmi2,lzcnt,popcnt,sse4.2")]
    pub(super) unsafe fn run(ops: DotOperands<'_>, out: &Output<'_>, cols: Columns) {
        // SAFETY: forwarded contract; each arm's tile height suits `m`.
        unsafe {
            match ops.m {
                0 | 1 => columns::<1, 8>(ops, out, cols),
                2 => columns::<2, 4>(ops, out, cols),
                3 | 4 => columns::<4, 4>(ops, out, cols),
                _ => columns::<8, 2>(ops, out, cols),
            }
        }
    }

    /// Sweeps the task's columns in spans, `k` blocks and row blocks of `MR` with `MR × NV`
    /// tiles (`MR × 2` where fewer than `NV` vectors of panels are left).
    ///
    /// # Safety
    /// As `run`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512bf16")]
    #[target_feature(enable = "avx2,fma,avx,bmi1,bmi2,lzcnt,popcnt,sse4.2")]
    unsafe fn columns<const MR: usize, const NV: usize>(
        ops: DotOperands<'_>,
        out: &Output<'_>,
        cols: Columns,
    ) {
        // SAFETY: `run`'s caller guarantees every feature `V4` enables.
        let simd = unsafe { V4::new_unchecked() };
        let words = ops.k.div_ceil(2);
        let panel_words = words * PANEL_COLS;
        let k_blocks = words.div_ceil(KC_WORDS).max(1);
        let kc_step = words.div_ceil(k_blocks);
        let span = (SPAN_BYTES / (kc_step.max(1) * PANEL_COLS * 4)).max(1);
        let padded_end = cols.panel1 * PANEL_COLS;
        let col_end = ops.n.min(padded_end);
        let mut p = cols.panel0;
        while p < cols.panel1 {
            let span_end = (p + span).min(cols.panel1) * PANEL_COLS;
            let mut q0 = 0;
            loop {
                let kc = kc_step.min(words - q0);
                let (first, last) = (q0 == 0, q0 + kc >= words);
                let mut row0 = 0;
                while row0 < ops.m {
                    let a = ops.a_words.as_ptr().wrapping_add(row0 * words + q0) as *const u32;
                    let mut col0 = p * PANEL_COLS;
                    while col0 < span_end.min(col_end) {
                        let b = ops.b.as_ptr().wrapping_add(
                            (col0 / PANEL_COLS) * panel_words * 2
                                + q0 * 2 * PANEL_COLS
                                + (col0 % PANEL_COLS) * 2,
                        );
                        let at = |width: usize| TileAt {
                            row0,
                            rows: MR.min(ops.m - row0),
                            col0,
                            cols: width.min(col_end - col0),
                            first,
                            last,
                        };
                        let wide = NV * 16;
                        col0 += if col0 + wide <= span_end {
                            // SAFETY: `MR` padded rows of `A` from `row0`, `kc` words from
                            // `q0`, exist in the packed `A`; the tile's columns lie in this
                            // task's padded panels, whose `kc` words from `q0` exist.
                            let acc = unsafe { tile::<MR, NV>(kc, a, words, b, panel_words) };
                            // SAFETY: rows inside `m`, columns inside this task's part of `n`.
                            unsafe { out.store::<V4, MR, NV>(simd, &cast(acc), at(wide)) };
                            wide
                        } else {
                            // SAFETY: as above, for one panel's two vectors.
                            let acc = unsafe { tile::<MR, 2>(kc, a, words, b, panel_words) };
                            // SAFETY: as above.
                            unsafe { out.store::<V4, MR, 2>(simd, &cast(acc), at(32)) };
                            32
                        };
                    }
                    row0 += MR;
                }
                if last {
                    break;
                }
                q0 += kc;
            }
            p = span_end / PANEL_COLS;
        }
    }

    /// The accumulators as pulp's vector type.
    #[inline(always)]
    fn cast<const MR: usize, const NV: usize>(acc: [[__m512; NV]; MR]) -> [[pulp::f32x16; NV]; MR] {
        // SAFETY: both are 16 `f32` lanes (64 bytes); every bit pattern is valid in both.
        acc.map(|row| row.map(|v| unsafe { core::mem::transmute::<__m512, pulp::f32x16>(v) }))
    }

    /// `A(MR × 2kc) · B(2kc × NV·16)` from zero: `kc` words of both, `vdpbf16ps` per pair.
    ///
    /// # Safety
    /// `MR` rows of `kc` words at `a` (row stride `a_stride` words) and, for each vector `v`,
    /// `kc` rows of 16 words at `b + offset(v)` (rows `2 · PANEL_COLS` `u16` apart) must be
    /// readable.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512bf16")]
    #[target_feature(enable = "avx2,fma,avx,bmi1,bmi2,lzcnt,popcnt,sse4.2")]
    unsafe fn tile<const MR: usize, const NV: usize>(
        kc: usize,
        a: *const u32,
        a_stride: usize,
        b: *const u16,
        panel_words: usize,
    ) -> [[__m512; NV]; MR] {
        let offsets: [usize; NV] = core::array::from_fn(|v| {
            let col = v * 16;
            (col / PANEL_COLS) * panel_words * 2 + (col % PANEL_COLS) * 2
        });
        let mut acc = [[_mm512_setzero_ps(); NV]; MR];
        let mut b_row = b;
        for q in 0..kc {
            for (v, &offset) in offsets.iter().enumerate() {
                if v % 2 == 0 {
                    prefetch(b_row.wrapping_add(offset + 12 * PANEL_COLS));
                }
            }
            let mut bv = [_mm512_setzero_si512(); NV];
            for (v, b_v) in bv.iter_mut().enumerate() {
                // SAFETY: row `q` of vector `v`, readable by the caller's guarantee.
                *b_v = unsafe { _mm512_loadu_si512(b_row.add(offsets[v]) as *const __m512i) };
            }
            for (i, row) in acc.iter_mut().enumerate() {
                // SAFETY: word `q` of row `i` of `A`.
                let word = unsafe { *a.add(i * a_stride + q) };
                let ai = as_bh(_mm512_set1_epi32(word as i32));
                for (acc_iv, &b_v) in row.iter_mut().zip(&bv) {
                    *acc_iv = _mm512_dpbf16_ps(*acc_iv, ai, as_bh(b_v));
                }
            }
            b_row = b_row.wrapping_add(2 * PANEL_COLS);
        }
        acc
    }

    /// Reinterprets 32 `bf16` bit patterns as the BF16 vector type.
    #[inline(always)]
    fn as_bh(x: __m512i) -> __m512bh {
        // SAFETY: both are 64-byte vectors of plain bits; every pattern is a valid value.
        unsafe { core::mem::transmute::<__m512i, __m512bh>(x) }
    }
}
