//! The position-wise feed-forward layer: `down(act(up(x)))`, or gated (T5 v1.1, Flan-T5)
//! `down(act(gate(x)) ⊙ up(x))`. The activation is fused into the first projection's GEMM
//! epilogue; the down projection is applied by the [`super::Block`], fused with the residual
//! connection.

use tessel_kernels::activation::Activation;
use tessel_kernels::{KernelError, ScratchSpec, View, ViewMut};

use super::{linear, Linear, Run};

/// `down(act(x·W_up + b_up))`, or with a gate `down(act(x·W_gate + b_gate) ⊙ (x·W_up + b_up))`.
#[derive(Clone, Debug)]
pub struct FeedForward<'w> {
    up: Linear<'w>,
    gate: Option<Linear<'w>>,
    down: Linear<'w>,
    activation: Activation,
}

impl<'w> FeedForward<'w> {
    /// Its linear layers, in the order the forward pass reads them.
    #[cfg(feature = "std")]
    pub(crate) fn linears_mut(&mut self) -> impl Iterator<Item = &mut Linear<'w>> {
        self.gate.iter_mut().chain([&mut self.up, &mut self.down])
    }

    /// From the `d → d_ff` up projection, the `d_ff → d` down projection and the activation.
    pub fn new(
        up: Linear<'w>,
        down: Linear<'w>,
        activation: Activation,
    ) -> Result<FeedForward<'w>, KernelError> {
        let inner = (down.in_features(), up.out_features());
        let model = (down.out_features(), up.in_features());
        check_widths("feed-forward inner width", [inner, model])?;
        Ok(FeedForward {
            up,
            gate: None,
            down,
            activation,
        })
    }

    /// The gated form: `down(act(x·W_gate + b) ⊙ (x·W_up + b))`; `gate` has `up`'s shape.
    pub fn gated(
        gate: Linear<'w>,
        up: Linear<'w>,
        down: Linear<'w>,
        activation: Activation,
    ) -> Result<FeedForward<'w>, KernelError> {
        let inner = (gate.out_features(), up.out_features());
        let model = (gate.in_features(), up.in_features());
        check_widths("feed-forward gate width", [inner, model])?;
        let mut layer = FeedForward::new(up, down, activation)?;
        layer.gate = Some(gate);
        Ok(layer)
    }

    /// Whether it is the gated form (which needs a second inner buffer).
    pub fn is_gated(&self) -> bool {
        self.gate.is_some()
    }

    /// Inner width `d_ff`.
    pub fn inner_width(&self) -> usize {
        self.up.out_features()
    }

    /// The down projection.
    pub fn output(&self) -> &Linear<'w> {
        &self.down
    }

    /// The up projection.
    pub fn up(&self) -> &Linear<'w> {
        &self.up
    }

    /// The gate projection of the gated form.
    pub fn gate(&self) -> Option<&Linear<'w>> {
        self.gate.as_ref()
    }

    /// The activation.
    pub fn activation(&self) -> Activation {
        self.activation
    }

    /// Bytes of its weights.
    pub fn bytes(&self) -> usize {
        self.up.bytes() + self.down.bytes() + self.gate.as_ref().map_or(0, Linear::bytes)
    }

    /// Scratch for `rows` rows of width `d` and inner width `f` on `threads` threads.
    pub fn scratch(d: usize, f: usize, rows: usize, threads: usize) -> ScratchSpec {
        linear::scratch(rows, d, f, threads).or(linear::scratch(rows, f, d, threads))
    }

    /// `inner = act(input·W_up + b_up)` for every row of `input` (`inner` rows are `d_ff`
    /// wide); gated, `inner = act(input·W_gate + b) ⊙ (input·W_up + b)` with `gated` (as many
    /// elements as `inner` spans) holding the second product.
    pub fn inner(
        &self,
        run: Run<'_>,
        input: View<'_>,
        (mut inner, gated): (ViewMut<'_>, &mut [f32]),
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let Some(gate) = &self.gate else {
            return self
                .up
                .forward(run, input, inner, self.activation, None, scratch);
        };
        let (rows, f) = inner.shape();
        gate.forward(run, input, inner.reborrow(), self.activation, None, scratch)?;
        let mut gated = ViewMut::new(gated, rows, f, f)?;
        let identity = Activation::Identity;
        self.up
            .forward(run, input, gated.reborrow(), identity, None, scratch)?;
        let rows = inner.iter_rows_mut().zip(gated.into_view().iter_rows());
        for (a, b) in rows.flat_map(|(a, b)| a.iter_mut().zip(b)) {
            *a *= b;
        }
        Ok(())
    }
}

/// Each `(got, expected)` pair of widths must agree; a mismatch reports the first pair.
fn check_widths(what: &'static str, pairs: [(usize, usize); 2]) -> Result<(), KernelError> {
    let [(got, expected), _] = pairs;
    if pairs.iter().any(|(got, expected)| got != expected) {
        return Err(KernelError::ShapeMismatch {
            what,
            expected,
            got,
        });
    }
    Ok(())
}
