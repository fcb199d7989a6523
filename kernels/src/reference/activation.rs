//! Reference activations in `f64`.

use crate::activation::Activation;

/// The exact activation of `x`.
pub fn apply(activation: Activation, x: f64) -> f64 {
    match activation {
        Activation::Identity => x,
        Activation::Relu => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
        Activation::GeluErf => 0.5 * x * libm::erfc(-x * core::f64::consts::FRAC_1_SQRT_2),
        Activation::GeluTanh => {
            let u = libm::sqrt(2.0 / core::f64::consts::PI) * (x + 0.044715 * x * x * x);
            // 0.5 x (1 + tanh u) = x / (1 + e^{-2u}): the same value without the cancellation
            // of 1 + tanh u for negative u.
            x / (1.0 + libm::exp(-2.0 * u))
        }
        Activation::Silu => x / (1.0 + libm::exp(-x)),
    }
}

/// Applies the exact activation in place (rounded to `f32`).
pub fn apply_slice(activation: Activation, values: &mut [f32]) {
    for v in values {
        *v = apply(activation, *v as f64) as f32;
    }
}
