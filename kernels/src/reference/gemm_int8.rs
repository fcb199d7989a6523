//! Reference int8 GEMM: the quantisers written plainly, the integer sums in `i64`, the
//! dequantisation and epilogue in `f64`.
//!
//! It follows the definitions of [`gemm::int8`](crate::gemm::int8) step by step and shares no
//! code with the kernels: `quantize` is the per-row (or per-channel) symmetric quantiser
//! (`scale = 127 / amax` in `f32`, `round(x · scale)` to nearest even, clamped to `±127`),
//! `sums` the exact products of quantised matrices, `gemm` the whole `f32` computation.

use crate::error::{check_dim, check_view, KernelError};
use crate::gemm::Epilogue;
use crate::reference::activation;
use crate::view::ViewMut;

/// Below this largest magnitude (`2^-120`) a row quantises to zeros with factor 0.
const TINY: f32 = 7.523_164e-37;

/// Quantises `x` into `q` (same length) and returns the factor `d` with `x ≈ q · d`: `NaN`
/// (and zeros) when `x` holds a NaN or an infinity, `0` when `max |x| < 2^-120`.
pub fn quantize(x: &[f32], q: &mut [i8]) -> f32 {
    if x.iter().any(|v| !v.is_finite()) {
        q.fill(0);
        return f32::NAN;
    }
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if amax < TINY {
        q.fill(0);
        return 0.0;
    }
    let scale = 127.0 / amax;
    for (q, &v) in q.iter_mut().zip(x) {
        // `rintf` rounds to nearest, ties to even.
        *q = libm::rintf(v * scale).clamp(-127.0, 127.0) as i8;
    }
    1.0 / scale
}

/// `S[i][j] = Σ_p a[i][p] · w[j][p]` for row-major `a` (`m × k`, stride `k`) and `w`
/// (`n × k`, stride `k`), computed in `i64` and returned if it fits `i32`, `None` otherwise.
pub fn sum(a: &[i8], w: &[i8], k: usize, i: usize, j: usize) -> Option<i32> {
    let dot: i64 = (0..k)
        .map(|p| i64::from(a[i * k + p]) * i64::from(w[j * k + p]))
        .sum();
    i32::try_from(dot).ok()
}

/// The int8 product with the epilogue: `a_q` (`m × k` quantised rows, factors `a_d`), `w_q`
/// (`n × k` quantised channels, factors `w_d`), each output
/// `epilogue(S · a_d[i] · w_d[j])` in `f64`, rounded to `f32` once.
pub fn gemm(
    (a_q, a_d): (&[i8], &[f32]),
    (w_q, w_d): (&[i8], &[f32]),
    k: usize,
    c: ViewMut<'_>,
    epilogue: &Epilogue<'_>,
) -> Result<(), KernelError> {
    let (m, n) = (c.rows, c.cols);
    check_dim("a factors (m)", m, a_d.len())?;
    check_dim("w factors (n)", n, w_d.len())?;
    check_view("a", a_q.len(), m, k, k)?;
    check_view("w", w_q.len(), n, k, k)?;
    if let Some(bias) = epilogue.bias {
        check_dim("bias length (n)", n, bias.len())?;
    }
    if let Some(r) = epilogue.residual {
        check_dim("residual.rows (m)", m, r.rows)?;
        check_dim("residual.cols (n)", n, r.cols)?;
    }
    for (i, &a_di) in a_d.iter().enumerate() {
        for (j, &w_dj) in w_d.iter().enumerate() {
            let s = sum(a_q, w_q, k, i, j).ok_or(KernelError::Overflow("int8 sum"))?;
            let mut y = f64::from(s) * f64::from(a_di) * f64::from(w_dj);
            if let Some(bias) = epilogue.bias {
                y += f64::from(bias[j]);
            }
            y = activation::apply(epilogue.activation, y);
            if let Some(r) = epilogue.residual {
                y += f64::from(r.data[i * r.stride + j]);
            }
            c.data[i * c.stride + j] = y as f32;
        }
    }
    Ok(())
}
