//! The arithmetic of search over a step's logits: log-softmax, log-sum-exp, max and argmax.
//! Nothing here allocates.

use pulp::Simd;
use tessel_kernels::math::exp;
use tessel_kernels::Isa;

/// `kernel(simd, values)` at `isa`'s vector width: a slice reduced to one value.
macro_rules! reduce {
    ($isa:expr, $values:expr, $kernel:ident) => {{
        struct Reduce<'a>(&'a [f32]);
        impl pulp::WithSimd for Reduce<'_> {
            type Output = f32;
            #[inline(always)]
            fn with_simd<S: Simd>(self, simd: S) -> f32 {
                $kernel(simd, self.0)
            }
        }
        $isa.dispatch(Reduce($values))
    }};
}

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
    if values.is_empty() {
        return f32::NEG_INFINITY;
    }
    reduce!(isa, values, log_sum_exp)
}

/// Index and value of the largest element (the first on ties; NaN never wins). `None` when
/// empty or all NaN. Two passes at `isa`'s vector width: the maximum ([`max`]), then the
/// first element equal to it. (Where the maximum is a zero, `-0.0 == 0.0` finds the first zero
/// of either sign, as the one-pass fold that keeps the first strictly larger value does.)
pub fn argmax(isa: Isa, values: &[f32]) -> Option<(usize, f32)> {
    first_equal(values, max(isa, values)).map(|i| (i, values[i]))
}

/// The largest element, NaN ignored; negative infinity when there is none (as folding with
/// `f32::max` gives it, up to the sign of a zero maximum).
pub fn max(isa: Isa, values: &[f32]) -> f32 {
    reduce!(isa, values, max_value)
}

/// Values [`first_equal`] tests at once (a branch-free, vectorisable fold) before it looks
/// for the position.
const SCAN: usize = 64;

/// Index of the first element equal to `target` (never one that is NaN).
fn first_equal(values: &[f32], target: f32) -> Option<usize> {
    values
        .chunks(SCAN)
        .enumerate()
        .find(|(_, chunk)| chunk.iter().fold(false, |hit, &v| hit | (v == target)))
        .and_then(|(c, chunk)| {
            let at = chunk.iter().position(|&v| v == target)?;
            Some(c * SCAN + at)
        })
}

/// The largest element, NaN ignored (negative infinity when there is none), as folding with
/// `f32::max` gives it: lane-wise maxima by compare and select (a NaN compares false and is
/// never taken), then the lanes and the tail. The maximum of a set does not depend on the
/// order it is taken in, up to the sign of a zero, which `exp(x - max)` cannot tell apart.
#[inline(always)]
fn max_value<S: Simd>(simd: S, values: &[f32]) -> f32 {
    let (head, tail) = S::as_simd_f32s(values);
    let mut max = simd.splat_f32s(f32::NEG_INFINITY);
    for &v in head {
        max = simd.select_f32s(simd.greater_than_f32s(v, max), v, max);
    }
    let mut lanes = [f32::NEG_INFINITY; 16];
    let n = S::F32_LANES.min(lanes.len());
    if let Some(slot) = S::as_mut_simd_f32s(&mut lanes[..n]).0.first_mut() {
        *slot = max;
    }
    lanes
        .iter()
        .chain(tail)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

#[inline(always)]
fn log_sum_exp<S: Simd>(simd: S, values: &[f32]) -> f32 {
    let max = max_value(simd, values);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lane_maximum_is_the_folded_maximum() {
        let specials = [
            f32::NAN,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            1e-30,
            -7.5,
            f32::INFINITY,
        ];
        for len in [0usize, 1, 3, 7, 8, 15, 16, 17, 33, 100] {
            for (s, &special) in specials.iter().enumerate() {
                for at in [0, len / 2, len.saturating_sub(1)] {
                    let mut values: Vec<f32> = (0..len)
                        .map(|i| ((i * 37 + s * 11) % 23) as f32 - 11.0)
                        .collect();
                    if let Some(v) = values.get_mut(at) {
                        *v = special;
                    }
                    let want = values.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                    for isa in Isa::supported() {
                        let got = reduce!(isa, &values, max_value);
                        assert_eq!(got, want, "{isa}: len {len}, {special} at {at}");
                    }
                }
            }
        }
        let all_nan = [f32::NAN; 20];
        for isa in Isa::supported() {
            assert_eq!(
                reduce!(isa, &all_nan, max_value),
                f32::NEG_INFINITY,
                "{isa}"
            );
        }
    }
}
