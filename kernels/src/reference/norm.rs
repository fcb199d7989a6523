//! Reference LayerNorm, RMSNorm and softmax over one row, accumulating in `f64`, and the
//! residual add as the fused kernels define it.

use crate::norm::Norm;

/// `sum = x + residual`, each element rounded to `f32` once: the input the fused kernels
/// normalise (what an unfused `x + residual` produces). Stops at the shortest slice.
pub fn add(x: &[f32], residual: &[f32], sum: &mut [f32]) {
    for ((s, a), b) in sum.iter_mut().zip(x).zip(residual) {
        *s = a + b;
    }
}

/// Mean and biased variance of `row` (two-pass, `f64`); `(NaN, NaN)` for an empty row.
pub fn mean_variance(row: &[f32]) -> (f64, f64) {
    let n = row.len() as f64;
    let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
    let variance = row
        .iter()
        .map(|&v| {
            let d = v as f64 - mean;
            d * d
        })
        .sum::<f64>()
        / n;
    (mean, variance)
}

/// Mean of the squares of `row` in `f64`; NaN for an empty row.
pub fn mean_square(row: &[f32]) -> f64 {
    row.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>() / row.len() as f64
}

/// `out = N(row)` exactly (in `f64`). `gamma`/`beta` shorter than `row` end the output early.
pub fn normalize_row(norm: Norm<'_>, row: &[f32], out: &mut [f64]) {
    match norm {
        Norm::Layer {
            gamma,
            beta,
            epsilon,
        } => {
            let (mean, variance) = mean_variance(row);
            let rstd = 1.0 / libm::sqrt(variance + epsilon as f64);
            let params = gamma.iter().zip(beta);
            for ((o, &v), (&g, &b)) in out.iter_mut().zip(row).zip(params) {
                *o = (v as f64 - mean) * rstd * g as f64 + b as f64;
            }
        }
        Norm::Rms { gamma, epsilon } => {
            let rstd = 1.0 / libm::sqrt(mean_square(row) + epsilon as f64);
            for ((o, &v), &g) in out.iter_mut().zip(row).zip(gamma) {
                *o = v as f64 * rstd * g as f64;
            }
        }
    }
}

/// The logit of softmax input `v`: exactly `scale · v`, or `-inf` when `v` is `-inf` (a masked
/// entry whatever `scale` is, also `0` or negative).
pub fn softmax_logit(scale: f32, v: f32) -> f64 {
    if v == f32::NEG_INFINITY {
        f64::NEG_INFINITY
    } else {
        scale as f64 * v as f64
    }
}

/// `out = softmax(logits)` exactly (in `f64`) with the logits of [`softmax_logit`]: all NaN
/// when a logit is NaN or `+inf`, all zeros when every element is masked.
pub fn softmax_row(scale: f32, row: &[f32], out: &mut [f64]) {
    let logit = |v: f32| softmax_logit(scale, v);
    let max = row
        .iter()
        .map(|&v| logit(v))
        .fold(f64::NEG_INFINITY, f64::max);
    if row.iter().any(|&v| logit(v).is_nan()) || max == f64::INFINITY {
        out.iter_mut().for_each(|o| *o = f64::NAN);
        return;
    }
    if max == f64::NEG_INFINITY {
        out.iter_mut().for_each(|o| *o = 0.0);
        return;
    }
    let sum: f64 = row.iter().map(|&v| libm::exp(logit(v) - max)).sum();
    for (o, &v) in out.iter_mut().zip(row) {
        *o = libm::exp(logit(v) - max) / sum;
    }
}
