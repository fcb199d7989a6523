//! `exp` for `f32` vectors: Cody–Waite range reduction and a degree-6 polynomial.

use crate::isa::Isa;
use pulp::Simd;

/// Largest relative error of [`exp`] against the exact `e^x`, for every `x` whose result is a
/// normal `f32` (checked by a test that sweeps the whole range at every level).
pub const EXP_MAX_RELATIVE_ERROR: f32 = 3.0e-7;

const LOG2_E: f32 = core::f32::consts::LOG2_E;
// ln 2 split so that n * LN2_HI is exact for |n| < 2^9.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
// Adding 1.5 * 2^23 rounds a float in (-2^22, 2^22) to an integer held in the low mantissa bits.
pub(super) const ROUND_MAGIC: f32 = 12_582_912.0;
// Above this e^x overflows to +inf; below MIN_INPUT it is below the smallest normal and flushes
// to 0 (the kernels' consumers, softmax weights, do not need subnormals).
const MAX_INPUT: f32 = 88.722_83;
pub(super) const MIN_INPUT: f32 = -87.336_55;
// Chebyshev fit (mpmath `chebyfit`, degree 4) of (e^r - 1 - r) / r^2 on |r| <= ln(2)/2:
// 1 + r + r^2 p(r) is within 1.1e-8 of e^r there, so the f32 evaluation's rounding dominates
// the error. Cephes' degree-5 `expf` fit (one more FMA per vector) is no more accurate in f32.
const P: [f32; 5] = [
    1.392_617_6e-3,
    8.363_173e-3,
    4.166_655_5e-2,
    1.666_657_7e-1,
    0.5,
];

/// `e^x` lane by lane. `+inf` for `x > 88.72`, `0` for `x < -87.34` (including `-inf`), and NaN
/// for NaN; otherwise within [`EXP_MAX_RELATIVE_ERROR`].
#[inline(always)]
pub fn exp<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    let clamped = simd.min_f32s(
        simd.max_f32s(x, simd.splat_f32s(MIN_INPUT)),
        simd.splat_f32s(MAX_INPUT),
    );
    let (shifted, e_r) = reduce(simd, clamped, ROUND_MAGIC);

    // 2^n: n + 127 into the exponent field. n is in [-126, 128] after clamping; 2^128 is split
    // as 2 * 2^127 by scaling e^r first so the exponent field never overflows.
    let n_bits = simd.sub_u32s(
        simd.transmute_u32s_f32s(shifted),
        simd.transmute_u32s_f32s(simd.splat_f32s(ROUND_MAGIC)),
    );
    let too_big = simd.greater_than_u32s(
        simd.add_u32s(n_bits, simd.splat_u32s(126)),
        simd.splat_u32s(253),
    );
    let n_bits = simd.select_u32s(too_big, simd.sub_u32s(n_bits, simd.splat_u32s(1)), n_bits);
    let e_r = simd.select_f32s(too_big, simd.add_f32s(e_r, e_r), e_r);
    let two_n = simd.transmute_f32s_u32s(simd.wrapping_dyn_shl_u32s(
        simd.add_u32s(n_bits, simd.splat_u32s(127)),
        simd.splat_u32s(23),
    ));
    let y = simd.mul_f32s(e_r, two_n);

    let y = simd.select_f32s(
        simd.greater_than_f32s(x, simd.splat_f32s(MAX_INPUT)),
        simd.splat_f32s(f32::INFINITY),
        y,
    );
    let y = simd.select_f32s(
        simd.less_than_f32s(x, simd.splat_f32s(MIN_INPUT)),
        simd.splat_f32s(0.0),
        y,
    );
    // NaN compares unequal to itself: pass it through.
    simd.select_f32s(simd.equal_f32s(x, x), y, x)
}

/// `e^x` lane by lane for `x <= 0` (softmax weights `e^{z - max}`, `e^{-|t|}`): within
/// [`EXP_MAX_RELATIVE_ERROR`] for `-87.34 <= x <= 88`, `0` for `x < -87.34` (including
/// `-inf`), NaN for NaN. Unspecified (but never undefined behaviour) for `x > 88`.
///
/// On AVX-512 and AVX2 this is a table method: `2^(n/16)` (`2^(n/8)`) from one in-register
/// permute and a cubic (quartic) for `e^r`, about 12 vector operations of which 7 (8) use the
/// FMA units. Elsewhere it is [`exp`]'s reduction and polynomial without the clamping,
/// overflow split and NaN select (NaN propagates through the arithmetic), `2^n` one shift of
/// the rounded value's bits: about 16 operations against [`exp`]'s ~28.
#[inline(always)]
pub fn exp_non_positive<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    #[cfg(target_arch = "x86_64")]
    if let Some(y) = super::x86::exp_non_positive(simd, x) {
        return y;
    }
    let y = exp_in_range(simd, x);
    simd.select_f32s(
        simd.less_than_f32s(x, simd.splat_f32s(MIN_INPUT)),
        simd.splat_f32s(0.0),
        y,
    )
}

/// `e^x` lane by lane for `-87.33 <= x <= 88`, the caller's guarantee (outside it the result
/// is unspecified, never undefined behaviour): [`exp_non_positive`] without its flush of
/// `x < -87.34` to 0, one operation less. Within [`EXP_MAX_RELATIVE_ERROR`].
#[inline(always)]
pub(crate) fn exp_in_range<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    #[cfg(target_arch = "x86_64")]
    if let Some(y) = super::x86::exp_in_range(simd, x) {
        return y;
    }
    // The magic constant's low mantissa bits hold n + 127 after rounding, for
    // n = round(x / ln 2) in [-126, 127]: shifted left by 23 they are the bits of 2^n.
    const MAGIC_WITH_BIAS: f32 = ROUND_MAGIC + 127.0;
    let (shifted, e_r) = reduce(simd, x, MAGIC_WITH_BIAS);
    let two_n = simd.transmute_f32s_u32s(
        simd.wrapping_dyn_shl_u32s(simd.transmute_u32s_f32s(shifted), simd.splat_u32s(23)),
    );
    simd.mul_f32s(e_r, two_n)
}

/// Range reduction and polynomial shared by the `exp` variants: `x = n ln 2 + r` with
/// `|r| <= ln(2)/2`; returns `magic + n` (rounded, so `n` sits in its low mantissa bits) and
/// `e^r`.
#[inline(always)]
fn reduce<S: Simd>(simd: S, x: S::f32s, magic: f32) -> (S::f32s, S::f32s) {
    let shifted = simd.mul_add_f32s(x, simd.splat_f32s(LOG2_E), simd.splat_f32s(magic));
    let n = simd.sub_f32s(shifted, simd.splat_f32s(magic));
    // r = x - n ln 2, in two steps so the product's rounding error is not lost.
    let r = simd.negate_mul_add_f32s(n, simd.splat_f32s(LN2_HI), x);
    let r = simd.negate_mul_add_f32s(n, simd.splat_f32s(LN2_LO), r);

    let mut p = simd.splat_f32s(P[0]);
    for &coefficient in &P[1..] {
        p = simd.mul_add_f32s(p, r, simd.splat_f32s(coefficient));
    }
    let r2 = simd.mul_f32s(r, r);
    let e_r = simd.add_f32s(simd.mul_add_f32s(p, r2, r), simd.splat_f32s(1.0));
    (shifted, e_r)
}

/// Applies [`exp`] in place to every element of `values`.
pub fn exp_slice(isa: Isa, values: &mut [f32]) {
    map_slice::<FULL>(isa, values);
}

/// Which variant [`map_slice`] applies.
const FULL: u8 = 0;
#[cfg(test)]
const NON_POSITIVE: u8 = 1;
#[cfg(test)]
const IN_RANGE: u8 = 2;

/// Applies [`exp`] (`FULL`), [`exp_non_positive`] or [`exp_in_range`] in place.
fn map_slice<const VARIANT: u8>(isa: Isa, values: &mut [f32]) {
    struct ExpSlice<'a, const VARIANT: u8>(&'a mut [f32]);
    impl<const VARIANT: u8> pulp::WithSimd for ExpSlice<'_, VARIANT> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) {
            let f = |v| match VARIANT {
                FULL => exp(simd, v),
                1 => exp_non_positive(simd, v),
                _ => exp_in_range(simd, v),
            };
            let (head, tail) = S::as_mut_simd_f32s(self.0);
            for v in head {
                *v = f(*v);
            }
            if !tail.is_empty() {
                let v = simd.partial_load_f32s(tail);
                simd.partial_store_f32s(tail, f(v));
            }
        }
    }
    isa.dispatch(ExpSlice::<VARIANT>(values));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worst relative error of the variant over `steps` points evenly spread on
    /// `[low, high]`.
    fn worst_error<const VARIANT: u8>(isa: Isa, low: f32, high: f32) -> f64 {
        let mut buf = [0.0f32; 1024];
        let steps = 200_000usize;
        let mut worst = 0.0f64;
        let mut i = 0;
        while i < steps {
            let chunk = buf.len().min(steps - i);
            for (j, v) in buf[..chunk].iter_mut().enumerate() {
                *v = low + (high - low) * ((i + j) as f32 / steps as f32);
            }
            let inputs = buf;
            map_slice::<VARIANT>(isa, &mut buf[..chunk]);
            for (x, y) in inputs[..chunk].iter().zip(&buf[..chunk]) {
                let exact = libm::exp(*x as f64);
                let rel = ((*y as f64 - exact) / exact).abs();
                worst = worst.max(rel);
            }
            i += chunk;
        }
        worst
    }

    fn check_level(isa: Isa) {
        // Sweep [-87.3, 88.7] densely, plus the special values.
        let worst = worst_error::<FULL>(isa, MIN_INPUT, MAX_INPUT);
        assert!(
            worst <= EXP_MAX_RELATIVE_ERROR as f64,
            "{isa}: worst relative error {worst:e}"
        );

        let mut special = [
            0.0,
            -0.0,
            1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            89.0,
            -88.0,
            -1e4,
            1e4,
            MAX_INPUT,
        ];
        exp_slice(isa, &mut special);
        assert_eq!(special[0], 1.0);
        assert_eq!(special[1], 1.0);
        assert!((special[2] - core::f32::consts::E).abs() <= 1e-6);
        assert_eq!(special[3], f32::INFINITY);
        assert_eq!(special[4], 0.0);
        assert!(special[5].is_nan());
        assert_eq!(special[6], f32::INFINITY);
        assert_eq!(special[7], 0.0);
        assert_eq!(special[8], 0.0);
        assert_eq!(special[9], f32::INFINITY);
        assert!(special[10].is_finite() && special[10] > 3.4e38);
    }

    #[test]
    fn exp_non_positive_is_within_its_stated_error_at_every_level() {
        for isa in Isa::supported() {
            for (low, high) in [(MIN_INPUT, 0.0), (-1.0, 1.0), (0.0, 88.0)] {
                let worst = worst_error::<NON_POSITIVE>(isa, low, high);
                assert!(
                    worst <= EXP_MAX_RELATIVE_ERROR as f64,
                    "{isa} [{low}, {high}]: worst relative error {worst:e}"
                );
            }
            let mut special = [
                0.0,
                -0.0,
                -1.0,
                f32::NEG_INFINITY,
                f32::NAN,
                -88.0,
                -1e4,
                -1e30,
                f32::MIN,
            ];
            map_slice::<NON_POSITIVE>(isa, &mut special);
            assert_eq!(special[0], 1.0, "{isa}");
            assert_eq!(special[1], 1.0, "{isa}");
            assert!((special[2] - (-1.0f32).exp()).abs() <= 1e-7, "{isa}");
            assert!(special[4].is_nan(), "{isa}");
            assert!(
                special[3..]
                    .iter()
                    .filter(|v| !v.is_nan())
                    .all(|&v| v == 0.0),
                "{isa}: {special:?}"
            );
        }
    }

    #[test]
    fn exp_in_range_is_within_its_stated_error_at_every_level() {
        for isa in Isa::supported() {
            let worst = worst_error::<IN_RANGE>(isa, -87.33, 88.0);
            assert!(
                worst <= EXP_MAX_RELATIVE_ERROR as f64,
                "{isa}: worst relative error {worst:e}"
            );
        }
    }

    #[test]
    fn exp_is_within_its_stated_error_at_every_level() {
        for isa in Isa::supported() {
            check_level(isa);
        }
    }
}
