//! AVX-512 and AVX2 forms of [`super::exp_non_positive`] (and its unflushed twin
//! [`super::exp_in_range`]) and [`super::reciprocal`].
//!
//! `e^x` is computed as `2^(n/K) · e^r` with `n = round(x · K/ln 2)` and `|r| <= ln(2)/(2K)`:
//! the `K` values `2^(j/K)` sit in one register (`K = 16` lanes of a ZMM, `K = 8` of a YMM) and
//! one `vpermps` picks `2^((n mod K)/K)` per lane, so `e^r` needs only a cubic (AVX-512) or
//! quartic (AVX2) instead of the generic path's degree-6 polynomial. The rounding trick of the
//! generic path leaves `n` in the low mantissa bits of `x · K/ln 2 + 1.5 · 2^23`; shifted left by
//! `23 - log2 K` those bits are `(n div K) << 23` plus `(n mod K) << (23 - log2 K)`, and the
//! table entries are stored with the second term already subtracted, so one integer add puts
//! `2^(n div K) · 2^((n mod K)/K)` together. Per vector: 7 FMA-unit operations (8 on AVX2)
//! against the generic path's 11, plus a subtract, a shift, a permute, an integer add and a
//! compare.
//!
//! Error (relative, for normal results): the table entries are rounded to `f32` (at most
//! `2^-24`), the final `T + T·q` rounds once (`2^-24`), `q ≈ e^r - 1` carries the polynomial's
//! error (under `5e-9` for `K = 16`, `4e-10` for `K = 8`) and a few ulps of `|q| <= 0.045`:
//! about `1.3e-7` in all, within [`super::EXP_MAX_RELATIVE_ERROR`] (checked by the sweep test).

use super::exp::{MIN_INPUT, ROUND_MAGIC};
use core::arch::x86_64::{__m256, __m256i, __m512, __m512i, _CMP_NLT_UQ};
use pulp::x86::{V3, V4};
use pulp::{bytemuck, f32x16, f32x8, Simd};

/// `simd` as the concrete token `T`, when `S` is `T`.
#[inline(always)]
pub(super) fn token_as<S: Simd, T: Simd>(simd: S) -> Option<T> {
    if core::any::TypeId::of::<S>() == core::any::TypeId::of::<T>() {
        // SAFETY: `S` and `T` are the same type (equal `TypeId`s), so this copy is the
        // identity; the token proves its features as `S` did.
        Some(unsafe { core::mem::transmute_copy::<S, T>(&simd) })
    } else {
        None
    }
}

/// `$v4(token, x)` when `S` is AVX-512, `$v3(token, x)` when it is AVX2, else `None`. A macro,
/// not a function taking closures: a closure would not inherit the caller's target features
/// and its intrinsics would become calls.
macro_rules! on_x86 {
    ($S:ty, $simd:expr, $x:expr, $v4:path, $v3:path) => {{
        if let Some(token) = token_as::<$S, V4>($simd) {
            let x: f32x16 = bytemuck::try_cast($x).ok()?;
            return bytemuck::try_cast($v4(token, x)).ok();
        }
        if let Some(token) = token_as::<$S, V3>($simd) {
            let x: f32x8 = bytemuck::try_cast($x).ok()?;
            return bytemuck::try_cast($v3(token, x)).ok();
        }
        None
    }};
}

/// The table exponential when `S` is AVX-512 or AVX2 (see the module docs).
#[inline(always)]
pub(super) fn exp_non_positive<S: Simd>(simd: S, x: S::f32s) -> Option<S::f32s> {
    on_x86!(S, simd, x, exp_v4::<true>, exp_v3::<true>)
}

/// The table exponential without the flush of `x < MIN_INPUT` to 0 (the caller keeps `x` in
/// range).
#[inline(always)]
pub(super) fn exp_in_range<S: Simd>(simd: S, x: S::f32s) -> Option<S::f32s> {
    on_x86!(S, simd, x, exp_v4::<false>, exp_v3::<false>)
}

/// `1/d` by the hardware estimate and Newton steps when `S` is AVX-512 or AVX2.
#[inline(always)]
pub(super) fn reciprocal<S: Simd>(simd: S, d: S::f32s) -> Option<S::f32s> {
    on_x86!(S, simd, d, reciprocal_v4, reciprocal_v3)
}

/// Bits of `2^(j/K)` minus `j << (23 - log2 K)`, for `j < K`.
const fn table<const K: usize>() -> [u32; K] {
    // 2^(j/16) correctly rounded to f32 (every 2nd entry is 2^(j/8)).
    const POW2_SIXTEENTHS: [u32; 16] = [
        0x3f80_0000,
        0x3f85_aac3,
        0x3f8b_95c2,
        0x3f91_c3d3,
        0x3f98_37f0,
        0x3f9e_f532,
        0x3fa5_fed7,
        0x3fad_583f,
        0x3fb5_04f3,
        0x3fbd_08a4,
        0x3fc5_672a,
        0x3fce_248c,
        0x3fd7_44fd,
        0x3fe0_ccdf,
        0x3fea_c0c7,
        0x3ff5_257d,
    ];
    let shift = 23 - K.trailing_zeros();
    let mut out = [0u32; K];
    let mut j = 0;
    while j < K {
        out[j] = POW2_SIXTEENTHS[j * (16 / K)] - ((j as u32) << shift);
        j += 1;
    }
    out
}

const TABLE16: [u32; 16] = table::<16>();
const TABLE8: [u32; 8] = table::<8>();
/// `16 / ln 2` and `ln 2 / 16` split in two (`LN2_16_HI` is `f32(ln 2 / 16)`; with FMA,
/// `x - n · LN2_16_HI` is exact for the `n` that occur).
const LOG2E_16: f32 = 23.083_12;
const LN2_16_HI: f32 = 0.043_321_7;
const LN2_16_LO: f32 = -1.190_408_9e-10;
/// `(e^r - 1 - r)/r²` on `|r| <= ln(2)/32`: `C2 + C3 r` (Chebyshev fit, mpmath).
const C2_16: f32 = 0.500_009_8;
const C3_16: f32 = 0.166_668_62;
const LOG2E_8: f32 = 11.541_56;
const LN2_8_HI: f32 = 0.086_643_4;
const LN2_8_LO: f32 = -2.380_817_8e-10;
/// `(e^r - 1 - r)/r²` on `|r| <= ln(2)/16`: `0.5 + C3 r + C4 r²`.
const C3_8: f32 = 0.166_678_41;
const C4_8: f32 = 0.041_668_627;

/// `e^x` by the 16-entry table; lanes with `x < MIN_INPUT` become 0 when `FLUSH`.
#[inline(always)]
fn exp_v4<const FLUSH: bool>(simd: V4, x: f32x16) -> f32x16 {
    let f = simd.avx512f;
    let x: __m512 = pulp::cast(x);
    // SAFETY: 16 u32 and a ZMM of 16 f32 are the same 64 bytes, any bit pattern valid.
    let table = unsafe { core::mem::transmute::<[u32; 16], __m512>(TABLE16) };
    let shifted = f._mm512_fmadd_ps(x, f._mm512_set1_ps(LOG2E_16), f._mm512_set1_ps(ROUND_MAGIC));
    let n = f._mm512_sub_ps(shifted, f._mm512_set1_ps(ROUND_MAGIC));
    let r = f._mm512_fnmadd_ps(n, f._mm512_set1_ps(LN2_16_HI), x);
    let r = f._mm512_fnmadd_ps(n, f._mm512_set1_ps(LN2_16_LO), r);
    let p = f._mm512_fmadd_ps(f._mm512_set1_ps(C3_16), r, f._mm512_set1_ps(C2_16));
    let p = f._mm512_fmadd_ps(p, r, f._mm512_set1_ps(1.0));
    let q = f._mm512_mul_ps(p, r);
    let bits: __m512i = f._mm512_castps_si512(shifted);
    let scale_bits = f._mm512_add_epi32(
        f._mm512_slli_epi32::<19>(bits),
        f._mm512_castps_si512(f._mm512_permutexvar_ps(bits, table)),
    );
    let scale = f._mm512_castsi512_ps(scale_bits);
    // Lanes with x < MIN_INPUT (also -inf) become 0; NaN lanes compare unordered and keep
    // the NaN the arithmetic carried.
    if !FLUSH {
        return pulp::cast(f._mm512_fmadd_ps(scale, q, scale));
    }
    let keep = f._mm512_cmp_ps_mask::<_CMP_NLT_UQ>(x, f._mm512_set1_ps(MIN_INPUT));
    pulp::cast(f._mm512_maskz_fmadd_ps(keep, scale, q, scale))
}

/// `e^x` by the 8-entry table; lanes with `x < MIN_INPUT` become 0 when `FLUSH`.
#[inline(always)]
fn exp_v3<const FLUSH: bool>(simd: V3, x: f32x8) -> f32x8 {
    let (f, i) = (simd.fma, simd.avx2);
    let a = simd.avx;
    let x: __m256 = pulp::cast(x);
    // SAFETY: 8 u32 and a YMM of 8 f32 are the same 32 bytes, any bit pattern valid.
    let table = unsafe { core::mem::transmute::<[u32; 8], __m256>(TABLE8) };
    let shifted = f._mm256_fmadd_ps(x, a._mm256_set1_ps(LOG2E_8), a._mm256_set1_ps(ROUND_MAGIC));
    let n = a._mm256_sub_ps(shifted, a._mm256_set1_ps(ROUND_MAGIC));
    let r = f._mm256_fnmadd_ps(n, a._mm256_set1_ps(LN2_8_HI), x);
    let r = f._mm256_fnmadd_ps(n, a._mm256_set1_ps(LN2_8_LO), r);
    let p = f._mm256_fmadd_ps(a._mm256_set1_ps(C4_8), r, a._mm256_set1_ps(C3_8));
    let p = f._mm256_fmadd_ps(p, r, a._mm256_set1_ps(0.5));
    let p = f._mm256_fmadd_ps(p, r, a._mm256_set1_ps(1.0));
    let q = a._mm256_mul_ps(p, r);
    let bits: __m256i = a._mm256_castps_si256(shifted);
    let scale_bits = i._mm256_add_epi32(
        i._mm256_slli_epi32::<20>(bits),
        a._mm256_castps_si256(i._mm256_permutevar8x32_ps(table, bits)),
    );
    let scale = a._mm256_castsi256_ps(scale_bits);
    let y = f._mm256_fmadd_ps(scale, q, scale);
    if !FLUSH {
        return pulp::cast(y);
    }
    // As in `exp_v4`: all ones (keep) unless x < MIN_INPUT; NaN keeps.
    let keep = a._mm256_cmp_ps::<_CMP_NLT_UQ>(x, a._mm256_set1_ps(MIN_INPUT));
    pulp::cast(a._mm256_and_ps(y, keep))
}

#[inline(always)]
fn reciprocal_v4(simd: V4, d: f32x16) -> f32x16 {
    let f = simd.avx512f;
    let d: __m512 = pulp::cast(d);
    let r = f._mm512_rcp14_ps(d);
    let e = f._mm512_fnmadd_ps(d, r, f._mm512_set1_ps(1.0));
    pulp::cast(f._mm512_fmadd_ps(r, e, r))
}

#[inline(always)]
fn reciprocal_v3(simd: V3, d: f32x8) -> f32x8 {
    let (f, a) = (simd.fma, simd.avx);
    let d: __m256 = pulp::cast(d);
    let one = a._mm256_set1_ps(1.0);
    // Two Newton steps: 12 bits, 24, then correctly rounded nearly always (`1/1` is exactly 1).
    let r = a._mm256_rcp_ps(d);
    let r = f._mm256_fmadd_ps(r, f._mm256_fnmadd_ps(d, r, one), r);
    pulp::cast(f._mm256_fmadd_ps(r, f._mm256_fnmadd_ps(d, r, one), r))
}
