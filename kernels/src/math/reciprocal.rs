//! `1/d` without a division where the hardware has a reciprocal estimate.

use pulp::Simd;

/// Largest relative error of [`reciprocal`] against the exact `1/d`, for `2^-125 <= |d| <=
/// 2^125` (checked by a test that sweeps that range at every level).
pub const RECIPROCAL_MAX_RELATIVE_ERROR: f32 = 2.5e-7;

/// `1/d` lane by lane, within [`RECIPROCAL_MAX_RELATIVE_ERROR`] for `2^-125 <= |d| <= 2^125`;
/// unspecified (NaN or a wrong value, never undefined behaviour) outside that range.
///
/// AVX-512: `vrcp14ps` (relative error below `2^-14`) and one Newton step `r + r(1 - d r)`,
/// error `2^-28` plus one rounding (`6.3e-8`). AVX2: `vrcpps` (below `1.5 · 2^-12`) and two
/// such steps. Three (five) operations against a division that occupies the divider for 5–10
/// cycles per vector. Other levels divide (correctly rounded). `1/1` is exactly 1 everywhere.
#[inline(always)]
pub fn reciprocal<S: Simd>(simd: S, d: S::f32s) -> S::f32s {
    #[cfg(target_arch = "x86_64")]
    if let Some(r) = super::x86::reciprocal(simd, d) {
        return r;
    }
    simd.div_f32s(simd.splat_f32s(1.0), d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::Isa;

    /// Applies [`reciprocal`] to `values` in place (a whole number of vectors and a tail).
    fn apply(isa: Isa, values: &mut [f32]) {
        struct Apply<'a>(&'a mut [f32]);
        impl pulp::WithSimd for Apply<'_> {
            type Output = ();
            #[inline(always)]
            fn with_simd<S: Simd>(self, simd: S) {
                let (head, tail) = S::as_mut_simd_f32s(self.0);
                for v in head {
                    *v = reciprocal(simd, *v);
                }
                let v = simd.partial_load_f32s(tail);
                simd.partial_store_f32s(tail, reciprocal(simd, v));
            }
        }
        isa.dispatch(Apply(values));
    }

    #[test]
    fn reciprocal_is_within_its_stated_error_at_every_level() {
        for isa in Isa::supported() {
            let mut worst = 0.0f64;
            // Every 32nd mantissa of a binade, both signs, the extreme exponents and a few
            // between (the estimate tables index the mantissa, the exponent only scales).
            for exponent in [-125i32, -126 + 37, -1, 0, 1, 60, 124] {
                for chunk in 0..(1u32 << 18) / 4096 {
                    let mut values: [f32; 4096] = core::array::from_fn(|i| {
                        let mantissa = (chunk * 4096 + i as u32) << 5;
                        let bits = ((exponent + 127) as u32) << 23 | mantissa;
                        let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
                        sign * f32::from_bits(bits)
                    });
                    let inputs = values;
                    apply(isa, &mut values);
                    for (d, r) in inputs.iter().zip(&values) {
                        let exact = 1.0 / *d as f64;
                        worst = worst.max(((*r as f64 - exact) / exact).abs());
                    }
                }
            }
            assert!(
                worst <= RECIPROCAL_MAX_RELATIVE_ERROR as f64,
                "{isa}: worst relative error {worst:e}"
            );
        }
    }
}
