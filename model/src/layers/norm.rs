//! A normalisation layer: LayerNorm (`γ`, `β`) or RMSNorm (`γ` only), with its epsilon.
//!
//! The layer only holds parameters; the fused forms (normalise, add-and-normalise) are the
//! kernels' own ([`tessel_kernels::norm`]), reached through [`Norm::kernel`].

use tessel_kernels::norm;
use tessel_kernels::{Isa, KernelError, View, ViewMut};

use crate::storage::Weights;

/// LayerNorm or RMSNorm over rows of `width` values.
#[derive(Clone, Debug)]
pub struct Norm<'w> {
    gamma: Weights<'w, f32>,
    beta: Option<Weights<'w, f32>>,
    epsilon: f32,
}

impl<'w> Norm<'w> {
    /// LayerNorm: `(s - mean) / sqrt(var + epsilon) · gamma + beta`.
    pub fn layer(
        gamma: impl Into<Weights<'w, f32>>,
        beta: impl Into<Weights<'w, f32>>,
        epsilon: f32,
    ) -> Norm<'w> {
        Norm {
            gamma: gamma.into(),
            beta: Some(beta.into()),
            epsilon,
        }
    }

    /// RMSNorm: `s / sqrt(mean(s²) + epsilon) · gamma`.
    pub fn rms(gamma: impl Into<Weights<'w, f32>>, epsilon: f32) -> Norm<'w> {
        Norm {
            gamma: gamma.into(),
            beta: None,
            epsilon,
        }
    }

    /// The scale `γ`.
    pub fn gamma(&self) -> &[f32] {
        self.gamma.as_slice()
    }

    /// The shift `β` (LayerNorm only).
    pub fn beta(&self) -> Option<&[f32]> {
        self.beta.as_ref().map(Weights::as_slice)
    }

    /// The epsilon.
    pub fn epsilon(&self) -> f32 {
        self.epsilon
    }

    /// The kernels' description of this norm.
    pub fn kernel(&self) -> norm::Norm<'_> {
        match &self.beta {
            Some(beta) => norm::Norm::layer(self.gamma.as_slice(), beta.as_slice(), self.epsilon),
            None => norm::Norm::rms(self.gamma.as_slice(), self.epsilon),
        }
    }

    /// Width of the rows it normalises.
    pub fn width(&self) -> usize {
        self.gamma.len()
    }

    /// Bytes of its parameters.
    pub fn bytes(&self) -> usize {
        self.gamma.bytes() + self.beta.as_ref().map_or(0, Weights::bytes)
    }

    /// `out = N(x)` row by row (`x` and `out` of the same shape, rows `width()` wide).
    pub fn forward(&self, isa: Isa, x: View<'_>, out: ViewMut<'_>) -> Result<(), KernelError> {
        norm::normalize(isa, self.kernel(), x, out)
    }

    /// `x = N(x)` row by row (rows `width()` wide).
    pub fn forward_in_place(&self, isa: Isa, x: ViewMut<'_>) -> Result<(), KernelError> {
        norm::normalize_in_place(isa, self.kernel(), x)
    }
}
