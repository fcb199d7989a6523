//! Whisper's convolutional front end: `x = GELU(conv2(GELU(conv1(mel)))) + positions`, with
//! conv1 of width 3, stride 1, padding 1 (`n_mels → d`) and conv2 of width 3, stride 2,
//! padding 1 (`d → d`), so `2n` frames become `n` encoder positions.
//!
//! Each convolution is one GEMM with no copy of its input: over a time-major input with one
//! zero row of padding at each end, the window of output position `t` is the contiguous run of
//! 3 input rows starting at row `stride · t`, so the GEMM's A is the padded input viewed with
//! row stride `stride · channels` and row width `3 · channels` (overlapping rows, which the
//! GEMM reads as they are). The weights are packed with `(tap, channel)` as the reduction
//! index, i.e. PyTorch's `[out, channel, tap]` transposed at load. GELU and the position rows
//! are applied in the GEMMs' epilogues.

use tessel_kernels::activation::Activation;
use tessel_kernels::{KernelError, ScratchSpec};
use tessel_kernels::{View, ViewMut};

use super::{linear, Linear, Run};
use crate::storage::Weights;

/// Taps of each convolution.
pub const TAPS: usize = 3;

/// The two convolutions and the encoder's position table.
#[derive(Clone, Debug)]
pub struct ConvStem<'w> {
    conv1: Linear<'w>,
    conv2: Linear<'w>,
    positions: Weights<'w, f32>,
    n_mels: usize,
}

/// Elements of the stem's buffers for `frames` input frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StemSizes {
    /// The time-major, zero-padded input: `(frames + 2) × n_mels`.
    pub input: usize,
    /// conv1's zero-padded output: `(frames + 2) × d`.
    pub middle: usize,
}

impl<'w> ConvStem<'w> {
    /// The two convolutions' linear layers.
    #[cfg(feature = "std")]
    pub(crate) fn linears_mut(&mut self) -> [&mut Linear<'w>; 2] {
        [&mut self.conv1, &mut self.conv2]
    }

    /// From conv1 (`3·n_mels → d`), conv2 (`3d → d`), both packed with `(tap, channel)`
    /// reduction order (see [`ConvStem::pack_weight`]), and `positions` (at least `frames / 2`
    /// rows of `d`).
    pub fn new(
        conv1: Linear<'w>,
        conv2: Linear<'w>,
        positions: impl Into<Weights<'w, f32>>,
        n_mels: usize,
    ) -> Result<ConvStem<'w>, KernelError> {
        let positions = positions.into();
        let d = conv2.out_features();
        if conv1.in_features() != TAPS * n_mels
            || conv1.out_features() != d
            || conv2.in_features() != TAPS * d
            || positions.len() % d.max(1) != 0
        {
            return Err(KernelError::InvalidArgument(
                "conv stem: conv1 must map 3·n_mels to d, conv2 3d to d, positions rows of d",
            ));
        }
        if [&conv1, &conv2]
            .iter()
            .any(|c| c.weight_type() == super::WeightType::Int8)
        {
            return Err(KernelError::InvalidArgument(
                "conv stem: int8 weights cannot read overlapping windows (keep float weights)",
            ));
        }
        Ok(ConvStem {
            conv1,
            conv2,
            positions,
            n_mels,
        })
    }

    /// The two convolutions, as linear layers over windows of 3 rows.
    pub fn convolutions(&self) -> (&Linear<'w>, &Linear<'w>) {
        (&self.conv1, &self.conv2)
    }

    /// The position table.
    pub fn positions(&self) -> &[f32] {
        self.positions.as_slice()
    }

    /// PyTorch's `Conv1d` weight `[out][channel][tap]` as the `[out][tap · channels + channel]`
    /// rows of a linear layer's weight.
    #[cfg(feature = "std")]
    pub fn pack_weight<T: Copy>(weight: &[T], out: usize, channels: usize) -> Vec<T> {
        let mut packed = Vec::with_capacity(weight.len());
        for o in 0..out {
            let row = &weight[o * channels * TAPS..(o + 1) * channels * TAPS];
            for tap in 0..TAPS {
                packed.extend((0..channels).map(|c| row[c * TAPS + tap]));
            }
        }
        packed
    }

    /// Mel bins per frame.
    pub fn n_mels(&self) -> usize {
        self.n_mels
    }

    /// Output width `d`.
    pub fn width(&self) -> usize {
        self.conv2.out_features()
    }

    /// Encoder positions the position table holds.
    pub fn max_positions(&self) -> usize {
        self.positions.len() / self.width().max(1)
    }

    /// Bytes of its weights and position table.
    pub fn bytes(&self) -> usize {
        self.conv1.bytes() + self.conv2.bytes() + self.positions.bytes()
    }

    /// Buffer sizes for `frames` frames of `n_mels` bins into width `d`.
    pub fn sizes(frames: usize, n_mels: usize, d: usize) -> StemSizes {
        StemSizes {
            input: (frames + 2) * n_mels,
            middle: (frames + 2) * d,
        }
    }

    /// Scratch for `frames` frames on `threads` threads.
    pub fn scratch(frames: usize, n_mels: usize, d: usize, threads: usize) -> ScratchSpec {
        linear::scratch(frames, TAPS * n_mels, d, threads).or(linear::scratch(
            frames / 2,
            TAPS * d,
            d,
            threads,
        ))
    }

    /// Writes `mel` (`n_mels × frames`, bin-major as Whisper's log-mel spectrogram is laid
    /// out) time-major into `input` between its zero padding rows.
    pub fn stage_input(&self, mel: &[f32], frames: usize, input: &mut [f32]) {
        let c = self.n_mels;
        input[..c].fill(0.0);
        input[(frames + 1) * c..(frames + 2) * c].fill(0.0);
        for (bin, row) in mel.chunks_exact(frames).enumerate().take(c) {
            for (t, &value) in row.iter().enumerate() {
                input[(t + 1) * c + bin] = value;
            }
        }
    }

    /// `out = GELU(conv2(GELU(conv1(input)))) + positions` for `frames` (even) frames staged
    /// by [`ConvStem::stage_input`]; `out` receives `frames / 2` rows of `d`.
    pub fn forward(
        &self,
        run: Run<'_>,
        frames: usize,
        input: &[f32],
        middle: &mut [f32],
        out: &mut [f32],
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let (c, d) = (self.n_mels, self.width());
        let positions = frames / 2;
        if !frames.is_multiple_of(2) || positions > self.max_positions() {
            return Err(KernelError::InvalidArgument(
                "conv stem: frames must be even and at most twice the position table",
            ));
        }
        middle[..d].fill(0.0);
        middle[(frames + 1) * d..(frames + 2) * d].fill(0.0);
        let gelu = Activation::GeluErf;
        // Each output frame reads the `TAPS` input frames around it: overlapping rows of the
        // padded time-major input, one frame apart (conv1) or two (conv2, stride 2).
        let windows = View::overlapping(input, frames, TAPS * c, c)?;
        let inner = ViewMut::new(&mut middle[d..(frames + 1) * d], frames, d, d)?;
        self.conv1
            .forward(run, windows, inner, gelu, None, scratch)?;
        let windows = View::overlapping(middle, positions, TAPS * d, 2 * d)?;
        let table = View::new(self.positions.as_slice(), positions, d, d)?;
        let out = ViewMut::new(out, positions, d, d)?;
        self.conv2
            .forward(run, windows, out, gelu, Some(table), scratch)
    }
}
