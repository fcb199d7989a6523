//! Hand-written AVX-512 LayerNorm (with residual) and RMSNorm: the straightforward two-pass
//! kernels one writes with intrinsics (statistics pass, then output pass, two accumulators,
//! nothing else), used by the `norm` suite as a yardstick next to the copy: when tessel's
//! kernel matches these, the remaining distance to the copy is the cost of the work, not of
//! tessel's code. They take rows whose width is a multiple of 16 and compute in `f32` (the
//! LayerNorm variance around the row's first element, as tessel's shift does).

/// Whether this CPU and `width` run the hand-written kernels (AVX-512F, `width` a non-zero
/// multiple of 16).
pub fn available(width: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        width > 0 && width.is_multiple_of(16) && std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = width;
        false
    }
}

/// `sum = x + residual`, `out = LayerNorm(sum) · gamma + beta` row by row. Returns false (and
/// writes nothing) unless [`available`] and every slice fits `width`.
pub fn layer_norm_residual(
    x: &[f32],
    residual: &[f32],
    gamma: &[f32],
    beta: &[f32],
    epsilon: f32,
    sum: &mut [f32],
    out: &mut [f32],
) -> bool {
    let width = gamma.len();
    let fits = available(width)
        && beta.len() == width
        && x.len().is_multiple_of(width)
        && [residual.len(), sum.len(), out.len()] == [x.len(); 3];
    #[cfg(target_arch = "x86_64")]
    if fits {
        // SAFETY: AVX-512F is present (`available`), every row slice has `width` elements, a
        // multiple of 16, and the four tensors have the same length.
        unsafe { x86::layer_norm_residual(x, residual, gamma, beta, epsilon, sum, out) };
    }
    fits
}

/// `out = x / sqrt(mean(x²) + epsilon) · gamma` row by row. Returns false (and writes
/// nothing) unless [`available`] and every slice fits `width`.
pub fn rms_norm(x: &[f32], gamma: &[f32], epsilon: f32, out: &mut [f32]) -> bool {
    let width = gamma.len();
    let fits = available(width) && x.len().is_multiple_of(width) && out.len() == x.len();
    #[cfg(target_arch = "x86_64")]
    if fits {
        // SAFETY: as in `layer_norm_residual`.
        unsafe { x86::rms_norm(x, gamma, epsilon, out) };
    }
    fits
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// # Safety
    /// AVX-512F must be present; `gamma.len()` is a multiple of 16 dividing `x.len()`, and
    /// `residual`, `sum`, `out` are as long as `x`, `beta` as `gamma`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn layer_norm_residual(
        x: &[f32],
        residual: &[f32],
        gamma: &[f32],
        beta: &[f32],
        epsilon: f32,
        sum: &mut [f32],
        out: &mut [f32],
    ) {
        let width = gamma.len();
        let rows = x.chunks_exact(width).zip(residual.chunks_exact(width));
        let outputs = sum.chunks_exact_mut(width).zip(out.chunks_exact_mut(width));
        for ((x, r), (s, o)) in rows.zip(outputs) {
            let shift = _mm512_set1_ps(x[0] + r[0]);
            let (mut sum0, mut sum1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
            let (mut squares0, mut squares1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
            for i in (0..width).step_by(32) {
                // SAFETY: `i + 32 <= width` or `i + 16 == width`; the second half is only
                // touched when it exists.
                unsafe {
                    let v0 = _mm512_add_ps(load(x, i), load(r, i));
                    store(s, i, v0);
                    let d0 = _mm512_sub_ps(v0, shift);
                    sum0 = _mm512_add_ps(sum0, d0);
                    squares0 = _mm512_fmadd_ps(d0, d0, squares0);
                    if i + 16 < width {
                        let v1 = _mm512_add_ps(load(x, i + 16), load(r, i + 16));
                        store(s, i + 16, v1);
                        let d1 = _mm512_sub_ps(v1, shift);
                        sum1 = _mm512_add_ps(sum1, d1);
                        squares1 = _mm512_fmadd_ps(d1, d1, squares1);
                    }
                }
            }
            let inv_width = 1.0 / width as f32;
            let center = _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1)) * inv_width;
            let variance = _mm512_reduce_add_ps(_mm512_add_ps(squares0, squares1)) * inv_width
                - center * center;
            let rstd = 1.0 / (variance.max(0.0) + epsilon).sqrt();
            let (scale, offset) = (_mm512_set1_ps(rstd), _mm512_set1_ps(-center * rstd));
            for i in (0..width).step_by(16) {
                // SAFETY: `i + 16 <= width`.
                unsafe {
                    let normal = _mm512_fmadd_ps(_mm512_sub_ps(load(s, i), shift), scale, offset);
                    store(o, i, _mm512_fmadd_ps(normal, load(gamma, i), load(beta, i)));
                }
            }
        }
    }

    /// # Safety
    /// AVX-512F must be present; `gamma.len()` is a multiple of 16 dividing `x.len()`, and
    /// `out` is as long as `x`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rms_norm(x: &[f32], gamma: &[f32], epsilon: f32, out: &mut [f32]) {
        let width = gamma.len();
        for (x, o) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
            let (mut squares0, mut squares1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
            for i in (0..width).step_by(32) {
                // SAFETY: as in `layer_norm_residual`.
                unsafe {
                    let v0 = load(x, i);
                    squares0 = _mm512_fmadd_ps(v0, v0, squares0);
                    if i + 16 < width {
                        let v1 = load(x, i + 16);
                        squares1 = _mm512_fmadd_ps(v1, v1, squares1);
                    }
                }
            }
            let mean_square =
                _mm512_reduce_add_ps(_mm512_add_ps(squares0, squares1)) / width as f32;
            let scale = _mm512_set1_ps(1.0 / (mean_square + epsilon).sqrt());
            for i in (0..width).step_by(16) {
                // SAFETY: `i + 16 <= width`.
                unsafe {
                    store(
                        o,
                        i,
                        _mm512_mul_ps(_mm512_mul_ps(load(x, i), scale), load(gamma, i)),
                    );
                }
            }
        }
    }

    /// The 16 elements of `row` from `i`.
    ///
    /// # Safety
    /// AVX-512F must be present and `i + 16 <= row.len()`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load(row: &[f32], i: usize) -> __m512 {
        debug_assert!(i + 16 <= row.len());
        // SAFETY: the caller keeps the 16 elements inside `row`.
        unsafe { _mm512_loadu_ps(row.as_ptr().add(i)) }
    }

    /// Stores `v` into the 16 elements of `row` from `i`.
    ///
    /// # Safety
    /// AVX-512F must be present and `i + 16 <= row.len()`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store(row: &mut [f32], i: usize, v: __m512) {
        debug_assert!(i + 16 <= row.len());
        // SAFETY: the caller keeps the 16 elements inside `row`.
        unsafe { _mm512_storeu_ps(row.as_mut_ptr().add(i), v) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written kernels compute what they claim (so the yardstick measures real work).
    #[test]
    fn match_plain_loops() {
        let width = 48;
        if !available(width) {
            return;
        }
        let n = 3 * width;
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 37) % 101) as f32 / 25.0 - 2.0)
            .collect();
        let r: Vec<f32> = (0..n)
            .map(|i| ((i * 53) % 97) as f32 / 30.0 - 1.5)
            .collect();
        let gamma: Vec<f32> = (0..width).map(|i| 1.0 + i as f32 / 100.0).collect();
        let beta: Vec<f32> = (0..width).map(|i| i as f32 / 50.0 - 0.3).collect();
        let (mut sum, mut out) = (vec![0.0; n], vec![0.0; n]);
        assert!(layer_norm_residual(
            &x, &r, &gamma, &beta, 1e-5, &mut sum, &mut out
        ));
        let mut rms = vec![0.0; n];
        assert!(rms_norm(&x, &gamma, 1e-5, &mut rms));
        for row in 0..3 {
            let span = row * width..(row + 1) * width;
            let s: Vec<f64> = span.clone().map(|i| (x[i] + r[i]) as f64).collect();
            let mean = s.iter().sum::<f64>() / width as f64;
            let var = s.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / width as f64;
            let ms = span.clone().map(|i| (x[i] as f64).powi(2)).sum::<f64>() / width as f64;
            for (j, i) in span.enumerate() {
                assert_eq!(sum[i], x[i] + r[i]);
                let ln = (s[j] - mean) / (var + 1e-5).sqrt() * gamma[j] as f64 + beta[j] as f64;
                assert!((out[i] as f64 - ln).abs() < 1e-5, "layer norm {i}");
                let expected = x[i] as f64 / (ms + 1e-5).sqrt() * gamma[j] as f64;
                assert!((rms[i] as f64 - expected).abs() < 1e-5, "rms norm {i}");
            }
        }
        assert!(
            !rms_norm(&x, &gamma[..40], 1e-5, &mut rms),
            "width not a multiple of 16"
        );
    }
}
