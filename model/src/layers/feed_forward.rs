//! The position-wise feed-forward layer: `down(act(up(x)))`, the activation fused into the up
//! projection's GEMM epilogue; the down projection is applied by the [`super::Block`], fused
//! with the residual connection.

use tessel_kernels::activation::Activation;
use tessel_kernels::{KernelError, ScratchSpec};

use super::{linear, Linear, Run};

/// `down(act(x·W_up + b_up))`.
#[derive(Clone, Debug)]
pub struct FeedForward {
    up: Linear,
    down: Linear,
    activation: Activation,
}

impl FeedForward {
    /// From the `d → d_ff` up projection, the `d_ff → d` down projection and the activation.
    pub fn new(
        up: Linear,
        down: Linear,
        activation: Activation,
    ) -> Result<FeedForward, KernelError> {
        if up.out_features() != down.in_features() || up.in_features() != down.out_features() {
            return Err(KernelError::ShapeMismatch {
                what: "feed-forward inner width",
                expected: up.out_features(),
                got: down.in_features(),
            });
        }
        Ok(FeedForward {
            up,
            down,
            activation,
        })
    }

    /// Inner width `d_ff`.
    pub fn inner_width(&self) -> usize {
        self.up.out_features()
    }

    /// The down projection.
    pub fn output(&self) -> &Linear {
        &self.down
    }

    /// Bytes of its weights.
    pub fn bytes(&self) -> usize {
        self.up.bytes() + self.down.bytes()
    }

    /// Scratch for `rows` rows of width `d` and inner width `f` on `threads` threads.
    pub fn scratch(d: usize, f: usize, rows: usize, threads: usize) -> ScratchSpec {
        linear::scratch(rows, d, f, threads).or(linear::scratch(rows, f, d, threads))
    }

    /// `inner = act(input·W_up + b_up)` for `rows` rows (`inner` rows are `d_ff` wide).
    pub fn inner(
        &self,
        run: Run<'_>,
        rows: usize,
        input: &[f32],
        inner: &mut [f32],
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let (d, f) = (self.up.in_features(), self.up.out_features());
        self.up.forward(
            run,
            rows,
            input,
            d,
            inner,
            f,
            self.activation,
            None,
            scratch,
        )
    }
}
