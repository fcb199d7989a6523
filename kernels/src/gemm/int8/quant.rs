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
use crate::gemm::MatRef;

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
    /// `q` as `i8` (`round_up(k, 4)` bytes), then `|q|` as `u8` (as many): the operands of the
    /// sign trick of `vpmaddubsw`.
    SignedAbs,
}

impl AFormat {
    /// Bytes per stored row for depth `k`.
    pub(crate) const fn row_bytes(self, k: usize) -> usize {
        let kp = k.div_ceil(K_GROUP) * K_GROUP;
        match self {
            AFormat::Signed | AFormat::Offset => kp,
            AFormat::SignedAbs => 2 * kp,
        }
    }
}

/// Bytes of quantised `A` for `m` rows of depth `k` in any format (rows padded to [`ROW_PAD`]).
pub(crate) fn a_bytes(m: usize, k: usize) -> usize {
    m.div_ceil(ROW_PAD)
        .saturating_mul(ROW_PAD)
        .saturating_mul(AFormat::SignedAbs.row_bytes(k))
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
pub(crate) fn quantize_a(a: MatRef<'_>, format: AFormat, bytes: &mut [i8], dequant: &mut [f32]) {
    let (m, k) = (a.rows, a.cols);
    let stride = format.row_bytes(k);
    let kp = AFormat::Signed.row_bytes(k);
    if stride == 0 {
        dequant[..m].fill(0.0);
        return;
    }
    let rows = m.div_ceil(ROW_PAD) * ROW_PAD;
    for (i, row) in bytes[..rows * stride].chunks_exact_mut(stride).enumerate() {
        let (q, rest) = row.split_at_mut(kp);
        if i < m {
            dequant[i] = quantize_row(&a.data[i * a.stride..i * a.stride + k], &mut q[..k]);
        }
        if i >= m {
            q.fill(0);
        }
        q[k.min(kp)..].fill(0);
        match format {
            AFormat::Signed => {}
            AFormat::Offset => q.iter_mut().for_each(|v| *v ^= i8::MIN),
            AFormat::SignedAbs => {
                for (abs, &v) in rest.iter_mut().zip(q.iter()) {
                    // |v| <= 127 fits in i8 and reads the same as u8.
                    *abs = v.abs();
                }
            }
        }
    }
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
    if row_bytes == 0 {
        return;
    }
    let rows = m.div_ceil(ROW_PAD) * ROW_PAD;
    for (i, row) in bytes[..rows * row_bytes]
        .chunks_exact_mut(row_bytes)
        .enumerate()
    {
        let (q, rest) = row.split_at_mut(kp);
        q.fill(0);
        if i < m {
            q[..k].copy_from_slice(&data[i * stride..i * stride + k]);
        }
        match format {
            AFormat::Signed => {}
            AFormat::Offset => q.iter_mut().for_each(|v| *v ^= i8::MIN),
            AFormat::SignedAbs => {
                for (abs, &v) in rest.iter_mut().zip(q.iter()) {
                    *abs = v.abs();
                }
            }
        }
    }
}
