//! Elementwise activations: ReLU and GELU (erf and tanh forms), as vector functions that other
//! kernels fuse into their epilogues, as in-place slice kernels, and fused with a bias add over
//! strided rows ([`bias_activation`]).

use crate::error::check_dim;
use crate::error::KernelError;
use crate::isa::Isa;
use crate::math::{exp_in_range, reciprocal};
use crate::sweep::{sweep, Read, Reduce, RowIo, Update, Write, Zeros, Zip};
use crate::view::{check_shape, View, ViewMut};
use pulp::Simd;

/// An activation applied elementwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Activation {
    /// `x` unchanged.
    #[default]
    Identity,
    /// `max(x, 0)`.
    Relu,
    /// `x · Φ(x)` with the exact normal CDF through erf (PyTorch `gelu`, `approximate="none"`).
    GeluErf,
    /// `0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³)))` (PyTorch `approximate="tanh"`).
    GeluTanh,
    /// `x · σ(x) = x / (1 + e^{-x})` (PyTorch `silu`; "swish" in Marian, OPUS-MT and
    /// CTranslate2).
    Silu,
}

/// Largest absolute error of [`gelu_erf`] against the exact erf GELU, for `|x| <= 1`; beyond
/// that the bound is this times `|x|`. Checked by a test at every level.
pub const GELU_ERF_MAX_ERROR: f32 = 1.0e-6;

/// Largest absolute error of [`gelu_tanh`] against the exact tanh-form GELU, for `|x| <= 1`;
/// beyond that the bound is this times `|x|`. Checked by a test at every level.
pub const GELU_TANH_MAX_ERROR: f32 = 1.0e-6;

/// Largest absolute error of [`silu`] against the exact `x · σ(x)`, for `|x| <= 1`; beyond that
/// the bound is this times `|x|`. Checked by a test at every level.
pub const SILU_MAX_ERROR: f32 = 1.0e-6;

impl Activation {
    /// Every activation.
    pub const ALL: [Activation; 5] = [
        Activation::Identity,
        Activation::Relu,
        Activation::GeluErf,
        Activation::GeluTanh,
        Activation::Silu,
    ];

    /// The stated bound of this implementation's absolute error at `x`, against the exact
    /// function: `MAX_ERROR · max(1, |x|)` for the approximated ones, 0 for the exact ones.
    pub fn max_error(self, x: f64) -> f64 {
        let stated = match self {
            Activation::Identity | Activation::Relu => 0.0,
            Activation::GeluErf => GELU_ERF_MAX_ERROR,
            Activation::GeluTanh => GELU_TANH_MAX_ERROR,
            Activation::Silu => SILU_MAX_ERROR,
        };
        stated as f64 * x.abs().max(1.0)
    }

    /// A bound of `|f'(x)|` over all `x` (how much an input error can grow): 1 for the
    /// identity and ReLU, 1.2 for the GELUs (max ≈ 1.13), 1.1 for SiLU (max ≈ 1.0998).
    pub fn max_slope(self) -> f64 {
        match self {
            Activation::Identity | Activation::Relu => 1.0,
            Activation::GeluErf | Activation::GeluTanh => 1.2,
            Activation::Silu => 1.1,
        }
    }

    /// Applies the activation to one vector.
    #[inline(always)]
    pub fn apply<S: Simd>(self, simd: S, x: S::f32s) -> S::f32s {
        match self {
            Activation::Identity => x,
            Activation::Relu => relu(simd, x),
            Activation::GeluErf => gelu_erf(simd, x),
            Activation::GeluTanh => gelu_tanh(simd, x),
            Activation::Silu => silu(simd, x),
        }
    }

    /// Applies the activation in place to every element of `values`.
    pub fn apply_slice(self, isa: Isa, values: &mut [f32]) {
        let width = values.len();
        ActivationRows {
            input: None,
            bias: None,
            activation: self,
            out: ViewMut {
                data: values,
                rows: 1,
                cols: width,
                stride: width,
            },
        }
        .run(isa);
    }

    /// Applies the activation in place to every row of a strided batch.
    pub fn apply_rows(self, isa: Isa, values: ViewMut<'_>) {
        ActivationRows {
            input: None,
            bias: None,
            activation: self,
            out: values,
        }
        .run(isa);
    }
}

/// `values = activation(values + bias)` in place, row by row, with `bias` one value per column
/// (a linear layer's bias and activation when the GEMM did not fuse them). With
/// [`Activation::Identity`] this is the plain bias add.
///
/// Errors when `bias` is not `values.cols()` long.
pub fn bias_activation(
    isa: Isa,
    values: ViewMut<'_>,
    bias: &[f32],
    activation: Activation,
) -> Result<(), KernelError> {
    check_dim("bias", values.cols, bias.len())?;
    ActivationRows {
        input: None,
        bias: Some(bias),
        activation,
        out: values,
    }
    .run(isa);
    Ok(())
}

/// `out = activation(x + bias)` row by row (`bias` optional, one value per column): the
/// out-of-place form of [`bias_activation`], reading `x` once and writing `out` once.
///
/// Errors when `out`'s shape differs from `x`'s or `bias` is not `x.cols()` long.
pub fn bias_activation_into(
    isa: Isa,
    x: View<'_>,
    bias: Option<&[f32]>,
    activation: Activation,
    out: ViewMut<'_>,
) -> Result<(), KernelError> {
    if let Some(bias) = bias {
        check_dim("bias", x.cols, bias.len())?;
    }
    check_shape(["out.rows", "out.cols"], x.shape(), out.shape())?;
    ActivationRows {
        input: Some(x),
        bias,
        activation,
        out,
    }
    .run(isa);
    Ok(())
}

/// A validated activation call: `out = activation(input + bias)`, in place without `input`.
struct ActivationRows<'a> {
    input: Option<View<'a>>,
    bias: Option<&'a [f32]>,
    activation: Activation,
    out: ViewMut<'a>,
}

impl ActivationRows<'_> {
    fn run(self, isa: Isa) {
        let empty = self.out.rows == 0 || self.out.cols == 0;
        if !empty && self.activation_changes_values() {
            isa.dispatch(self);
        }
    }

    /// False only for the identity without a bias (nothing to do).
    fn activation_changes_values(&self) -> bool {
        self.activation != Activation::Identity || self.bias.is_some() || self.input.is_some()
    }

    /// The row loop, with the bias read through `bias` ([`Read`] or [`Zeros`]).
    #[inline(always)]
    fn rows<S: Simd, B>(self, simd: S, bias: B, activation: impl Fn(S::f32s) -> S::f32s)
    where
        B: RowIo<S, Item = S::f32s> + Copy,
    {
        match self.input {
            Some(input) => {
                for (x, out) in input.iter_rows().zip(self.out.iter_rows_mut()) {
                    let io = Write::new(Zip(Read::new(x), bias), out);
                    activate_row(simd, io, &activation);
                }
            }
            None => {
                for row in self.out.iter_rows_mut() {
                    activate_row(simd, Zip(Update::new(row), bias), &activation);
                }
            }
        }
    }

    #[inline(always)]
    fn with_bias<S: Simd>(self, simd: S, activation: impl Fn(S::f32s) -> S::f32s) {
        match self.bias {
            Some(bias) => self.rows(simd, Read::<S>::new(bias), activation),
            None => self.rows(simd, Zeros, activation),
        }
    }
}

/// One row: every `(v, b)` read through `io` becomes `activation(v + b)`, stored through `io`.
#[inline(always)]
fn activate_row<S: Simd, Io>(simd: S, mut io: Io, activation: &impl Fn(S::f32s) -> S::f32s)
where
    Io: RowIo<S, Item = (S::f32s, S::f32s)>,
{
    sweep(
        simd,
        &mut io,
        Reduce::Sum,
        #[inline(always)]
        |(v, b)| (activation(simd.add_f32s(v, b)), []),
    );
}

impl pulp::WithSimd for ActivationRows<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        // One loop per activation, so no row loop branches on it per vector.
        match self.activation {
            Activation::Identity => self.with_bias(
                simd,
                #[inline(always)]
                |v| v,
            ),
            Activation::Relu => self.with_bias(
                simd,
                #[inline(always)]
                |v| relu(simd, v),
            ),
            Activation::GeluErf => self.with_bias(
                simd,
                #[inline(always)]
                |v| gelu_erf(simd, v),
            ),
            Activation::GeluTanh => self.with_bias(
                simd,
                #[inline(always)]
                |v| gelu_tanh(simd, v),
            ),
            Activation::Silu => self.with_bias(
                simd,
                #[inline(always)]
                |v| silu(simd, v),
            ),
        }
    }
}

/// `max(x, 0)`; NaN stays NaN.
#[inline(always)]
pub fn relu<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    let zero = simd.splat_f32s(0.0);
    simd.select_f32s(simd.less_than_f32s(x, zero), zero, x)
}

/// GELU through erf: `x · Φ(x)` with `Φ(x) = (1 + erf(x/√2)) / 2`.
///
/// `erf` is a rational minimax approximation (odd degree-13 over even degree-8 polynomial, the
/// coefficients of Eigen's `generic_fast_erf_float`) on `z = x/√2` clamped to `[-4, 4]`;
/// beyond that `Φ` is exactly 0 or 1 (true `|x · Φ(x)| < 5e-8` below `x = -4√2`). About 22
/// vector operations, no `exp`, and the quotient through [`reciprocal`] (no division on
/// AVX-512/AVX2): 2–3× faster than the Abramowitz–Stegun `erfc · e^{-z²}` form. The error is absolute (within [`GELU_ERF_MAX_ERROR`] ·
/// `max(1, |x|)`), not relative: tiny negative outputs (`x < -3`) carry ~1e-7 absolute error.
#[inline(always)]
pub fn gelu_erf<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    const NUMERATOR: [f32; 7] = [
        -1.609_603_3e-2,
        -2.954_6e-3,
        -7.349_906_4e-4,
        -5.692_506_2e-5,
        -2.101_024e-6,
        2.770_681_5e-8,
        -2.726_142_4e-10,
    ];
    const DENOMINATOR: [f32; 5] = [
        -1.426_473_9e-2,
        -7.373_329_3e-3,
        -1.682_827e-3,
        -2.133_740_5e-4,
        -1.456_607_15e-5,
    ];
    const LIMIT: f32 = 4.0;
    let z = simd.mul_f32s(x, simd.splat_f32s(core::f32::consts::FRAC_1_SQRT_2));
    let zc = simd.min_f32s(
        simd.max_f32s(z, simd.splat_f32s(-LIMIT)),
        simd.splat_f32s(LIMIT),
    );
    let z2 = simd.mul_f32s(zc, zc);
    let mut p = simd.splat_f32s(NUMERATOR[6]);
    for c in NUMERATOR[..6].iter().rev() {
        p = simd.mul_add_f32s(p, z2, simd.splat_f32s(*c));
    }
    let mut q = simd.splat_f32s(DENOMINATOR[4]);
    for c in DENOMINATOR[..4].iter().rev() {
        q = simd.mul_add_f32s(q, z2, simd.splat_f32s(*c));
    }
    let erf = simd.mul_f32s(simd.mul_f32s(zc, p), reciprocal(simd, q));
    let half = simd.splat_f32s(0.5);
    let cdf = simd.mul_add_f32s(erf, half, half);
    let cdf = simd.select_f32s(
        simd.less_than_f32s(z, simd.splat_f32s(-LIMIT)),
        simd.splat_f32s(0.0),
        cdf,
    );
    let cdf = simd.select_f32s(
        simd.greater_than_f32s(z, simd.splat_f32s(LIMIT)),
        simd.splat_f32s(1.0),
        cdf,
    );
    simd.mul_f32s(x, cdf)
}

/// GELU, tanh form: `0.5 x (1 + tanh u) = x σ(2u)` with `u = √(2/π)(x + 0.044715 x³)` and
/// `σ(v) = 1/(1 + e^{-v})` (no cancellation for negative `x`).
///
/// `u` is computed from `x` clamped to `[-9.5, 9]`, where `e^{-2u}` stays within
/// `[1.4e-29, 1.4e33]` (no overflow, no flush: `exp_in_range`), and the result is
/// `max(x, -9.5) · σ(2u)`: above 9, `σ = 1` exactly in `f32` and the result is `x`; below
/// -9.5 it is a value of magnitude below `7e-33` where the exact one is smaller still. The
/// quotient is [`reciprocal`] (no division on AVX-512/AVX2). 22 vector operations on
/// AVX-512. Within [`GELU_TANH_MAX_ERROR`] · `max(1, |x|)` of the exact tanh form; NaN stays
/// NaN.
#[inline(always)]
pub fn gelu_tanh<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    const TWO_SQRT_2_OVER_PI: f32 = 2.0 * 0.797_884_6;
    const CUBIC: f32 = 0.044_715;
    const LOW: f32 = -9.5;
    const HIGH: f32 = 9.0;
    let low = simd.splat_f32s(LOW);
    // A compare and select, not `max`, so that NaN stays NaN at every level.
    let bounded = simd.select_f32s(simd.less_than_f32s(x, low), low, x);
    let clamped = simd.min_f32s(bounded, simd.splat_f32s(HIGH));
    let x2 = simd.mul_f32s(clamped, clamped);
    let minus_slope = simd.mul_add_f32s(
        x2,
        simd.splat_f32s(-TWO_SQRT_2_OVER_PI * CUBIC),
        simd.splat_f32s(-TWO_SQRT_2_OVER_PI),
    );
    times_sigmoid(simd, bounded, simd.mul_f32s(clamped, minus_slope))
}

/// SiLU (swish): `x · σ(x)`.
///
/// `σ` is computed from `x` clamped to `[-87, 20]`, where `e^{-x}` stays in
/// `exp_in_range`'s domain, and the result is `max(x, -87) · σ(x)`: above 20, `σ = 1` exactly
/// in `f32` and the result is `x`; below -87 it is a value of magnitude below `2e-36` where the
/// exact one is smaller still. Within [`SILU_MAX_ERROR`] · `max(1, |x|)` of the exact value;
/// NaN stays NaN.
#[inline(always)]
pub fn silu<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    const LOW: f32 = -87.0;
    const HIGH: f32 = 20.0;
    let low = simd.splat_f32s(LOW);
    // A compare and select, not `max`, so that NaN stays NaN at every level.
    let bounded = simd.select_f32s(simd.less_than_f32s(x, low), low, x);
    let clamped = simd.min_f32s(bounded, simd.splat_f32s(HIGH));
    times_sigmoid(simd, bounded, simd.neg_f32s(clamped))
}

/// `x · σ(-v) = x / (1 + e^v)` for `v` in [`exp_in_range`]'s domain (the caller clamps), the
/// quotient by [`reciprocal`]: no cancellation for negative arguments, no overflow.
#[inline(always)]
fn times_sigmoid<S: Simd>(simd: S, x: S::f32s, v: S::f32s) -> S::f32s {
    let e = exp_in_range(simd, v);
    simd.mul_f32s(x, reciprocal(simd, simd.add_f32s(simd.splat_f32s(1.0), e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::activation as reference;

    /// Applies `activation` to every multiple of `step` in `[-limit, limit]` and checks each
    /// result against the exact value.
    fn sweep_range(
        isa: Isa,
        activation: Activation,
        limit: f32,
        step: f32,
        check: &impl Fn(f32, f32, f64),
    ) {
        let mut values = [0.0f32; 4096];
        let count = (2.0 * limit / step) as usize + 1;
        let mut start = 0;
        while start < count {
            let chunk = values.len().min(count - start);
            for (i, v) in values[..chunk].iter_mut().enumerate() {
                *v = -limit + (start + i) as f32 * step;
            }
            let inputs = values;
            activation.apply_slice(isa, &mut values[..chunk]);
            for (x, y) in inputs[..chunk].iter().zip(&values[..chunk]) {
                check(*x, *y, reference::apply(activation, *x as f64));
            }
            start += chunk;
        }
    }

    /// A dense sweep of `[-12, 12]` (step `1e-4`: where the activations bend) and coarser ones
    /// out to `±1e4`.
    fn sweep(isa: Isa, activation: Activation, check: impl Fn(f32, f32, f64)) {
        for (limit, step) in [(12.0, 1e-4), (100.0, 3e-3), (1e4, 0.37)] {
            sweep_range(isa, activation, limit, step, &check);
        }
    }

    #[test]
    fn approximations_within_stated_error() {
        for isa in Isa::supported() {
            for activation in [Activation::GeluErf, Activation::GeluTanh, Activation::Silu] {
                sweep(isa, activation, |x, y, exact| {
                    let bound = activation.max_error(x as f64);
                    assert!(
                        (y as f64 - exact).abs() <= bound,
                        "{isa} {activation:?}({x}) = {y}, exact {exact}"
                    );
                });
            }
        }
    }

    #[test]
    fn relu_and_extremes() {
        for isa in Isa::supported() {
            sweep(isa, Activation::Relu, |_, y, exact| {
                assert_eq!(y as f64, exact)
            });
            for activation in [Activation::GeluErf, Activation::GeluTanh, Activation::Silu] {
                let mut v = [30.0f32, -30.0, 0.0, f32::NAN, 1e30, -1e30];
                activation.apply_slice(isa, &mut v);
                assert_eq!(v[0], 30.0, "{isa} {activation:?}");
                // -0 or a tiny negative for GELU (exactly ~-e^-450), -2.8e-12 for SiLU.
                assert!(
                    (v[1] as f64 - reference::apply(activation, -30.0)).abs() < 1e-15,
                    "{isa} {activation:?}: {}",
                    v[1]
                );
                assert_eq!(v[2], 0.0);
                assert!(v[3].is_nan());
                assert_eq!(v[4], 1e30);
                assert!(
                    v[5].abs() < 1e-30 || v[5] == 0.0,
                    "{isa} {activation:?}: {}",
                    v[5]
                );
            }
        }
    }
}
