//! Row softmax in place: `x = softmax(scale · x)` over each row of a strided batch.
//!
//! Three passes over a row that stays in L1/L2 (main memory sees it read once and written
//! once): the maximum of `scale · x`, then `e = exp(scale · x - max)` stored in place while
//! summing, then `e / Σe`. `exp` is [`crate::math::exp`] (relative error at most
//! [`crate::math::EXP_MAX_RELATIVE_ERROR`]); sums are `f32` in `4 × lanes` partial sums.
//!
//! Special rows: a row whose every element is `-inf` (fully masked) becomes all zeros; a row
//! containing NaN or `+inf` becomes all NaN (as PyTorch); an element more than ~87 below the
//! row maximum becomes exactly 0.

use crate::error::KernelError;
use crate::isa::Isa;
use crate::math::exp;
use crate::norm::sweep::{sweep, Read, Reduce, Update};
use crate::norm::{RowShape, RowsMut};
use pulp::Simd;

/// `values = softmax(scale · values)` row by row (`scale = 1.0` for the plain softmax, e.g.
/// `1/√d` for attention scores).
///
/// Errors when the view is too short for `shape`, its stride is below `width` (with more than
/// one row), or `scale` is not finite.
pub fn softmax_in_place(
    isa: Isa,
    shape: RowShape,
    values: RowsMut<'_>,
    scale: f32,
) -> Result<(), KernelError> {
    values.check("values", shape)?;
    if !scale.is_finite() {
        return Err(KernelError::InvalidArgument("softmax scale must be finite"));
    }
    if shape.is_empty() {
        return Ok(());
    }
    isa.dispatch(SoftmaxOp {
        shape,
        values,
        scale,
    });
    Ok(())
}

struct SoftmaxOp<'a> {
    shape: RowShape,
    values: RowsMut<'a>,
    scale: f32,
}

impl pulp::WithSimd for SoftmaxOp<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let scale = simd.splat_f32s(self.scale);
        for row in self.values.iter(self.shape) {
            softmax_row(simd, scale, row);
        }
    }
}

#[inline(always)]
fn softmax_row<S: Simd>(simd: S, scale: S::f32s, row: &mut [f32]) {
    let [max] = sweep(
        simd,
        &mut Read::new(row),
        Reduce::Max,
        #[inline(always)]
        |v| (v, [simd.mul_f32s(v, scale)]),
    );
    if max == f32::NEG_INFINITY {
        return masked_row(simd, row);
    }
    let minus_max = simd.splat_f32s(-max);
    let [sum] = sweep(
        simd,
        &mut Update::new(row),
        Reduce::Sum,
        #[inline(always)]
        |v| {
            let e = exp(simd, simd.mul_add_f32s(v, scale, minus_max));
            (e, [e])
        },
    );
    let inverse = simd.splat_f32s(1.0 / sum);
    sweep(
        simd,
        &mut Update::new(row),
        Reduce::Sum,
        #[inline(always)]
        |e| (simd.mul_f32s(e, inverse), []),
    );
}

/// A row whose maximum is `-inf`: zeros, unless it holds a NaN (which the maximum may skip),
/// then NaN everywhere.
#[inline(always)]
fn masked_row<S: Simd>(simd: S, row: &mut [f32]) {
    let (zero, one) = (simd.splat_f32s(0.0), simd.splat_f32s(1.0));
    let [nans] = sweep(
        simd,
        &mut Update::new(row),
        Reduce::Sum,
        #[inline(always)]
        |v| {
            let is_number = simd.equal_f32s(v, v);
            (zero, [simd.select_f32s(is_number, zero, one)])
        },
    );
    if nans > 0.0 {
        row.fill(f32::NAN);
    }
}
