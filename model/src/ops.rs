//! The arithmetic of search over a step's logits: log-softmax, log-sum-exp and argmax.
//! Nothing here allocates.

use pulp::Simd;
use tessel_kernels::math::exp;
use tessel_kernels::Isa;

/// Replaces `values` by their log-softmax; returns the log of the normaliser
/// (`max + ln Σ exp(x - max)`). Empty input returns negative infinity.
pub fn log_softmax(isa: Isa, values: &mut [f32]) -> f32 {
    struct Run<'a>(&'a mut [f32]);
    impl pulp::WithSimd for Run<'_> {
        type Output = f32;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> f32 {
            let values = self.0;
            let lse = log_sum_exp(simd, values);
            let (head, tail) = S::as_mut_simd_f32s(values);
            let shift = simd.splat_f32s(lse);
            for v in head {
                *v = simd.sub_f32s(*v, shift);
            }
            for v in tail {
                *v -= lse;
            }
            lse
        }
    }
    if values.is_empty() {
        return f32::NEG_INFINITY;
    }
    isa.dispatch(Run(values))
}

/// `ln Σ exp(values)`, computed stably; negative infinity for empty input.
pub fn logsumexp(isa: Isa, values: &[f32]) -> f32 {
    struct Run<'a>(&'a [f32]);
    impl pulp::WithSimd for Run<'_> {
        type Output = f32;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> f32 {
            log_sum_exp(simd, self.0)
        }
    }
    if values.is_empty() {
        return f32::NEG_INFINITY;
    }
    isa.dispatch(Run(values))
}

/// Index and value of the largest element (the first on ties; NaN never wins). `None` when
/// empty.
pub fn argmax(values: &[f32]) -> Option<(usize, f32)> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in values.iter().enumerate() {
        let better = match best {
            Some((_, b)) => v > b,
            None => !v.is_nan(),
        };
        if better {
            best = Some((i, v));
        }
    }
    best
}

#[inline(always)]
fn log_sum_exp<S: Simd>(simd: S, values: &[f32]) -> f32 {
    let max = values.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    if max == f32::NEG_INFINITY || !max.is_finite() {
        return max;
    }
    let shift = simd.splat_f32s(max);
    let (head, tail) = S::as_simd_f32s(values);
    let mut total = simd.splat_f32s(0.0);
    for v in head {
        total = simd.add_f32s(total, exp(simd, simd.sub_f32s(*v, shift)));
    }
    let mut sum = simd.reduce_sum_f32s(total);
    if !tail.is_empty() {
        let v = simd.partial_load_f32s(tail);
        let e = exp(simd, simd.sub_f32s(v, shift));
        let mut lanes = [0.0f32; 16];
        let n = tail.len().min(lanes.len());
        simd.partial_store_f32s(&mut lanes[..n], e);
        sum += lanes[..n].iter().sum::<f32>();
    }
    max + libm::logf(sum)
}
