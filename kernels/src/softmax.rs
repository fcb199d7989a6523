//! Row softmax in place: `x = softmax(scale · x)` over each row of a strided batch.
//!
//! Three passes over a row that stays in L1/L2 (main memory sees it read once and written
//! once): the maximum of `scale · x`, then `e = exp(scale · x - max)` stored in place while
//! summing, then `e / Σe`. The exponential is [`crate::math::exp_non_positive`] (its argument
//! is at most 0; relative error at most [`crate::math::EXP_MAX_RELATIVE_ERROR`]); sums are
//! `f32` in `4 × lanes` partial sums.
//!
//! # Masks and special values
//! An element equal to `-inf` is a masked entry whatever `scale` is (zero, negative or
//! positive): its weight is exactly 0, and the other elements are normalised among
//! themselves. Every other element `x` contributes the logit `scale · x`, so with `scale = 0`
//! the unmasked entries share the row equally, and `0 · (+inf)` is NaN. Then: a row whose
//! every element is masked becomes all zeros; a row with a NaN logit, or a `+inf` one, becomes
//! all NaN (as PyTorch); an element whose logit is more than ~87 below the row maximum becomes
//! exactly 0. [`crate::reference::norm::softmax_row`] defines the same.

use crate::error::KernelError;
use crate::isa::Isa;
use crate::math::exp_non_positive;
use crate::sweep::{sweep, Ahead, Prefetch, Read, Reduce, Update, Zip};
use crate::view::ViewMut;
use pulp::Simd;

/// `values = softmax(scale · values)` row by row (`scale = 1.0` for the plain softmax, e.g.
/// `1/√d` for attention scores). `-inf` entries are masked whatever `scale` is (see the
/// module docs).
///
/// Errors when `scale` is not finite.
pub fn softmax_in_place(isa: Isa, values: ViewMut<'_>, scale: f32) -> Result<(), KernelError> {
    if !scale.is_finite() {
        return Err(KernelError::InvalidArgument("softmax scale must be finite"));
    }
    if values.rows == 0 || values.cols == 0 {
        return Ok(());
    }
    isa.dispatch(SoftmaxOp { values, scale });
    Ok(())
}

struct SoftmaxOp<'a> {
    values: ViewMut<'a>,
    scale: f32,
}

impl pulp::WithSimd for SoftmaxOp<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let scale = self.scale;
        let ahead = Ahead::of(&self.values);
        let rows = self.values.iter_rows_mut().enumerate();
        // `scale · -inf` is `-inf` for a positive scale: the mask then needs no select.
        if self.scale > 0.0 {
            for (r, row) in rows {
                softmax_row::<S, false>(simd, scale, row, ahead.after(r));
            }
        } else {
            for (r, row) in rows {
                softmax_row::<S, true>(simd, scale, row, ahead.after(r));
            }
        }
    }
}

/// `scale · v - m` with `minus_max = -m`, rounded once (so subtracting the maximum of large
/// logits loses nothing), and `-inf` where `v` is `-inf` (masked) when `SELECT_MASKED`.
#[inline(always)]
fn logit<S: Simd, const SELECT_MASKED: bool>(
    simd: S,
    scale: S::f32s,
    v: S::f32s,
    minus_max: S::f32s,
) -> S::f32s {
    let z = simd.mul_add_f32s(v, scale, minus_max);
    if SELECT_MASKED {
        let minus_inf = simd.splat_f32s(f32::NEG_INFINITY);
        simd.select_f32s(simd.equal_f32s(v, minus_inf), minus_inf, z)
    } else {
        z
    }
}

/// One row (`SELECT_MASKED` must be set unless `scale > 0`); the exponential pass prefetches
/// `next`.
#[inline(always)]
fn softmax_row<S: Simd, const SELECT_MASKED: bool>(
    simd: S,
    scalar_scale: f32,
    row: &mut [f32],
    next: Prefetch,
) {
    let scale = simd.splat_f32s(scalar_scale);
    let zero = simd.splat_f32s(0.0);
    let max = if SELECT_MASKED {
        let [max] = sweep(
            simd,
            &mut Read::new(row),
            Reduce::Max,
            #[inline(always)]
            |v| (v, [logit::<S, SELECT_MASKED>(simd, scale, v, zero)]),
        );
        max
    } else {
        // A positive scale commutes with the maximum (rounding is monotonic): one operation
        // per vector instead of two.
        let [max] = sweep(
            simd,
            &mut Read::new(row),
            Reduce::Max,
            #[inline(always)]
            |v| (v, [v]),
        );
        max * scalar_scale
    };
    if max == f32::NEG_INFINITY {
        return masked_row(
            simd,
            #[inline(always)]
            |v| logit::<S, SELECT_MASKED>(simd, scale, v, zero),
            row,
        );
    }
    let minus_max = simd.splat_f32s(-max);
    let [sum] = sweep(
        simd,
        &mut Zip(Update::new(row), next),
        Reduce::Sum,
        #[inline(always)]
        |(v, _)| {
            let e = exp_non_positive(simd, logit::<S, SELECT_MASKED>(simd, scale, v, minus_max));
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

/// A row whose maximum logit is `-inf`: zeros, unless it holds a NaN logit (which the maximum
/// may skip), then NaN everywhere.
#[inline(always)]
fn masked_row<S: Simd>(simd: S, logit: impl Fn(S::f32s) -> S::f32s, row: &mut [f32]) {
    let (zero, one) = (simd.splat_f32s(0.0), simd.splat_f32s(1.0));
    let [nans] = sweep(
        simd,
        &mut Update::new(row),
        Reduce::Sum,
        #[inline(always)]
        |v| {
            let z = logit(v);
            let is_number = simd.equal_f32s(z, z);
            (zero, [simd.select_f32s(is_number, zero, one)])
        },
    );
    if nans > 0.0 {
        row.fill(f32::NAN);
    }
}
