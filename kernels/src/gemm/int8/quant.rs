//! Dynamic per-row quantisation of the activations `A` into the caller's scratch.
//!
//! Each row `x` of `A` gets its own symmetric scale, like the weights: `amax = max |x|`,
//! `scale = 127 / amax`, `q = round(x · scale)` (nearest, ties to even) clamped to `±127`, and
//! the row's dequantisation factor `d = 1 / scale`, so `|x - q · d| <= amax / 254 · (1 + 2^-14)`.
//! (With `u = 2^-24`: `scale` and `x · scale` each round by at most `u` relative, which moves
//! `x · scale` by at most `127 · 2u` before `round`, and `d` is off `amax / 127` by at most `2u`
//! relative, so the error is at most `amax / 254 · (1 + 1016u)`, below the `2^-14` stated; a
//! product landing near a half-integer is where the `0.5` is exceeded at all.)
//! A row whose `amax` is below `2^-120` becomes zeros with `d = 0`. A row holding a NaN or an
//! infinity becomes zeros with `d = NaN`, so every output of that row is NaN (as an `f32`
//! product with such a row would be NaN or infinite).
//!
//! The row is then stored in the form its microkernel reads (`AFormat`), with row stride
//! `AFormat::row_bytes` and zero values past `k` and for the padding rows up to a multiple of
//! `ROW_PAD`.

use crate::gemm::int8::packed::{round_clamp, K_GROUP, TINY};
use crate::view::View;

/// Rows of the quantised `A` are padded to a multiple of this (the tallest tile), so every tile
/// reads whole rows.
pub(crate) const ROW_PAD: usize = 8;

/// How a microkernel reads the quantised activations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AFormat {
    /// `q` as `i8`: `round_up(k, 4)` bytes per row (`sdot`, `smull`, scalar).
    Signed,
    /// `q + 128` as `u8`: the unsigned operand of `vpdpbusd`, compensated by `128 · Σ_p w`.
    Offset,
    /// The operands of `vpmaddubsw`'s sign tricks, group by group: the group's sign of `q` as a
    /// byte mask (`-1` where `q < 0`, else `0`; 4 bytes), then its `|q|` as `u8` (4 bytes); after
    /// the `round_up(k, 4) / 4` groups, the row's correction `Σ_{q_p < 0} |q_p|` as a
    /// native-endian `i32` ([`CORRECTION_BYTES`]).
    MaskAbs,
}

/// Bytes of the `i32` correction that ends an [`AFormat::MaskAbs`] row.
pub(crate) const CORRECTION_BYTES: usize = 4;

impl AFormat {
    /// Bytes of one group of 4 depths in a stored row.
    pub(crate) const fn group_bytes(self) -> usize {
        match self {
            AFormat::Signed | AFormat::Offset => K_GROUP,
            AFormat::MaskAbs => 2 * K_GROUP,
        }
    }

    /// Where in a stored row of depth `round_up(k, 4) = kp` the plain `q` are written first
    /// (the second half of the groups, for [`AFormat::MaskAbs`]).
    const fn q_offset(self, kp: usize) -> usize {
        match self {
            AFormat::Signed | AFormat::Offset => 0,
            AFormat::MaskAbs => kp,
        }
    }

    /// Bytes per stored row for depth `k`.
    pub(crate) const fn row_bytes(self, k: usize) -> usize {
        let kp = k.div_ceil(K_GROUP) * K_GROUP;
        match self {
            AFormat::Signed | AFormat::Offset => kp,
            AFormat::MaskAbs => 2 * kp + CORRECTION_BYTES,
        }
    }
}

/// Bytes of quantised `A` for `m` rows of depth `k` in any format (rows padded to [`ROW_PAD`]).
pub(crate) fn a_bytes(m: usize, k: usize) -> usize {
    m.div_ceil(ROW_PAD)
        .saturating_mul(ROW_PAD)
        .saturating_mul(AFormat::MaskAbs.row_bytes(k))
}

/// Quantises one row `x` into `q` (`q.len() == x.len()`), returning its dequantisation factor.
#[inline(always)]
pub(crate) fn quantize_row(x: &[f32], q: &mut [i8]) -> f32 {
    // The largest magnitude through the bit patterns: an integer maximum (which vectorises)
    // that also ranks infinities and NaN above every finite value.
    let amax_bits = x.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7FFF_FFFF));
    let amax = f32::from_bits(amax_bits);
    if !amax.is_finite() {
        q.fill(0);
        return f32::NAN;
    }
    if amax < TINY {
        q.fill(0);
        return 0.0;
    }
    let scale = 127.0 / amax;
    for (q, &v) in q.iter_mut().zip(x) {
        *q = round_clamp(v * scale);
    }
    1.0 / scale
}

/// Quantises every row of `a` into `bytes` (`round_up(m, 8)` rows of `format.row_bytes(k)`)
/// and their factors into `dequant` (`m` values).
#[inline(always)]
pub(crate) fn quantize_a(a: View<'_>, format: AFormat, bytes: &mut [i8], dequant: &mut [f32]) {
    let (m, k) = (a.rows, a.cols);
    let stride = format.row_bytes(k);
    let kp = AFormat::Signed.row_bytes(k);
    let rows = m.div_ceil(ROW_PAD) * ROW_PAD;
    if k == 0 {
        // No values: every sum is 0 (a `MaskAbs` row is just its zero correction).
        dequant[..m].fill(0.0);
        bytes[..rows * stride].fill(0);
        return;
    }
    let (real, padding) = bytes[..rows * stride].split_at_mut(m * stride);
    for (i, row) in real.chunks_exact_mut(stride).enumerate() {
        let q = &mut row[format.q_offset(kp)..][..kp];
        dequant[i] = quantize_row(&a.data[i * a.stride..i * a.stride + k], &mut q[..k]);
        q[k..].fill(0);
        finish_row(format, row, kp);
    }
    zero_rows(format, padding);
}

/// Fills whole stored rows with `format`'s form of `q = 0` (`0x80` bytes for
/// [`AFormat::Offset`]; zero bytes otherwise, a `MaskAbs` row's correction included).
#[inline(always)]
fn zero_rows(format: AFormat, rows: &mut [i8]) {
    match format {
        AFormat::Offset => rows.fill(i8::MIN),
        AFormat::Signed | AFormat::MaskAbs => rows.fill(0),
    }
}

/// Turns a stored row whose plain `q` (depth `kp`) sit at `format.q_offset(kp)` into `format`.
#[inline(always)]
fn finish_row(format: AFormat, row: &mut [i8], kp: usize) {
    match format {
        AFormat::Signed => {}
        AFormat::Offset => row[..kp].iter_mut().for_each(|v| *v ^= i8::MIN),
        AFormat::MaskAbs => {
            let (groups, correction) = row.split_at_mut(2 * kp);
            let negative = interleave_mask_abs(groups, kp);
            correction.copy_from_slice(&negative.to_ne_bytes().map(|b| b as i8));
        }
    }
}

/// Depths [`interleave_mask_abs`] moves per step (16 groups).
const CHUNK: usize = 64;

/// Rewrites the plain `q` at `groups[kp..2 kp]` as [`AFormat::MaskAbs`] groups over the whole
/// of `groups` (`2 kp` bytes) and returns the correction `Σ_{q < 0} |q|`.
#[inline(always)]
fn interleave_mask_abs(groups: &mut [i8], kp: usize) -> i32 {
    let mut negative = 0i32;
    let mut p = 0;
    // Chunk `c` (depths `64c..`) is copied out before its groups are written to bytes
    // `128c..128c + 128`, and those end at or before the next chunk's `q` (`kp + 64(c + 1)`)
    // as `64(c + 1) <= kp` for every chunk but the last.
    while p < kp {
        let len = CHUNK.min(kp - p);
        let mut q = [0i8; CHUNK];
        q[..len].copy_from_slice(&groups[kp + p..kp + p + len]);
        let mut out = [0i8; 2 * CHUNK];
        for (o, q) in out
            .chunks_exact_mut(2 * K_GROUP)
            .zip(q.chunks_exact(K_GROUP))
        {
            for j in 0..K_GROUP {
                o[j] = q[j] >> 7;
                // |q| <= 127 fits in i8 and reads the same as u8.
                o[K_GROUP + j] = q[j].abs();
            }
        }
        negative += q
            .iter()
            .map(|&v| i32::from(v < 0) * i32::from(v.unsigned_abs()))
            .sum::<i32>();
        groups[2 * p..2 * (p + len)].copy_from_slice(&out[..2 * len]);
        p += len;
    }
    negative
}

/// Stores an already quantised `m × k` `i8` matrix (`data[i · stride + p]`, every value in
/// `±127`) in `format`, as [`quantize_a`] would.
pub(crate) fn store_quantized(
    data: &[i8],
    m: usize,
    k: usize,
    stride: usize,
    format: AFormat,
    bytes: &mut [i8],
) {
    let row_bytes = format.row_bytes(k);
    let kp = AFormat::Signed.row_bytes(k);
    let rows = m.div_ceil(ROW_PAD) * ROW_PAD;
    if k == 0 {
        // As in `quantize_a`: zero rows, zero corrections.
        bytes[..rows * row_bytes].fill(0);
        return;
    }
    let (real, padding) = bytes[..rows * row_bytes].split_at_mut(m * row_bytes);
    for (i, row) in real.chunks_exact_mut(row_bytes).enumerate() {
        let q = &mut row[format.q_offset(kp)..][..kp];
        q[..k].copy_from_slice(&data[i * stride..i * stride + k]);
        q[k..].fill(0);
        finish_row(format, row, kp);
    }
    zero_rows(format, padding);
}
