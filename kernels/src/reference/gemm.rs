//! Reference GEMM: `C = activation(A · B + bias) + residual`, accumulated in `f64`.
//!
//! `B` is a plain row-major `k × n` view here (not packed). Each output is the exact-order
//! `f64` dot product, plus the bias in `f64`, the exact activation of
//! [`reference::activation`](crate::reference::activation), plus the residual, rounded to
//! `f32` once.

use crate::error::{check_dim, KernelError};
use crate::gemm::Epilogue;
use crate::reference::activation;
use crate::view::{View, ViewMut};

/// The reference product with the same epilogue semantics and checks as
/// [`gemm::gemm`](crate::gemm::gemm).
pub fn gemm(
    a: View<'_>,
    b: View<'_>,
    c: ViewMut<'_>,
    epilogue: &Epilogue<'_>,
) -> Result<(), KernelError> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    check_dim("b.rows (k)", k, b.rows)?;
    check_dim("c.rows (m)", m, c.rows)?;
    check_dim("c.cols (n)", n, c.cols)?;
    if let Some(bias) = epilogue.bias {
        check_dim("bias length (n)", n, bias.len())?;
    }
    if let Some(r) = epilogue.residual {
        check_dim("residual.rows (m)", m, r.rows)?;
        check_dim("residual.cols (n)", n, r.cols)?;
    }
    for i in 0..m {
        for j in 0..n {
            c.data[i * c.stride + j] = element(a, b, epilogue, i, j) as f32;
        }
    }
    Ok(())
}

/// Output `(i, j)` in `f64`, before the final rounding (the views are validated by `gemm`).
fn element(a: View<'_>, b: View<'_>, epilogue: &Epilogue<'_>, i: usize, j: usize) -> f64 {
    let mut dot = 0.0f64;
    for p in 0..a.cols {
        dot += a.data[i * a.stride + p] as f64 * b.data[p * b.stride + j] as f64;
    }
    if let Some(bias) = epilogue.bias {
        dot += bias[j] as f64;
    }
    let mut y = activation::apply(epilogue.activation, dot);
    if let Some(r) = epilogue.residual {
        y += r.data[i * r.stride + j] as f64;
    }
    y
}
