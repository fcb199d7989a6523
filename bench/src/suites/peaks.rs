//! The same-run ceilings the suites' ratios are taken against: the core's multiply-add peak
//! and the rate of reading bytes once.

use tessel_kernels::Isa;

/// Steps of one timed [`fma_peak`] run (~1 ms at AVX-512 speed).
pub const PEAK_ITERATIONS: usize = 1 << 18;

/// Independent multiply-add chains of [`fma_peak`].
pub const PEAK_ACCUMULATORS: usize = 12;

/// Reads `data` once (a vectorised sum over four interleaved streams, as many as the `m = 1`
/// kernel reads at once).
pub fn stream_read(isa: Isa, data: &[f32]) -> f32 {
    struct Sum<'a>(&'a [f32]);
    impl pulp::WithSimd for Sum<'_> {
        type Output = f32;
        #[inline(always)]
        fn with_simd<S: pulp::Simd>(self, simd: S) -> f32 {
            let (head, tail) = S::as_simd_f32s(self.0);
            let quarter = head.len() / 4;
            let zero = simd.splat_f32s(0.0);
            let mut acc = [zero; 8];
            let mut i = 0;
            while i + 2 <= quarter {
                for (s, pair) in acc.chunks_exact_mut(2).enumerate() {
                    let at = s * quarter + i;
                    pair[0] = simd.add_f32s(pair[0], head[at]);
                    pair[1] = simd.add_f32s(pair[1], head[at + 1]);
                }
                i += 2;
            }
            let rest = (0..4)
                .flat_map(|s| s * quarter + i..(s + 1) * quarter)
                .chain(4 * quarter..head.len())
                .map(|at| head[at]);
            let total = rest.chain(acc).fold(zero, |s, v| simd.add_f32s(s, v));
            simd.reduce_sum_f32s(total) + tail.iter().sum::<f32>()
        }
    }
    isa.dispatch(Sum(data))
}

/// The core's measured fp32 peak: [`PEAK_ACCUMULATORS`] independent chains of vector
/// multiply-adds held in registers, `iterations` steps each. Returns the floating-point
/// operations done (2 per lane per multiply-add); time it to get GFLOP/s.
pub fn fma_peak(isa: Isa, iterations: usize) -> f64 {
    struct Chains(usize);
    impl pulp::WithSimd for Chains {
        type Output = f64;
        #[inline(always)]
        fn with_simd<S: pulp::Simd>(self, simd: S) -> f64 {
            // Enough chains to cover the multiply-add latency on every pipe, few enough to
            // stay in the 16 registers of AVX2 (32 of AVX-512) with the two operands.
            let (scale, offset) = (simd.splat_f32s(0.999_9), simd.splat_f32s(1e-6));
            let mut acc = [simd.splat_f32s(0.5); PEAK_ACCUMULATORS];
            // The chains are serial in floating point, so nothing folds them; the count is
            // opaque so the loop is not specialised.
            for _ in 0..std::hint::black_box(self.0) {
                for chain in &mut acc {
                    *chain = simd.mul_add_e_f32s(*chain, scale, offset);
                }
            }
            let total = acc
                .iter()
                .fold(simd.splat_f32s(0.0), |s, &v| simd.add_f32s(s, v));
            std::hint::black_box(simd.reduce_sum_f32s(total));
            (self.0 * PEAK_ACCUMULATORS * S::F32_LANES * 2) as f64
        }
    }
    isa.dispatch(Chains(iterations))
}
