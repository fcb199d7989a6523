//! The forward pass of Silero VAD v6 at 16 kHz on tessel's kernels: [`Vad`] holds the
//! immutable packed weights (share it between threads), [`VadState`] one stream's LSTM state,
//! context and every buffer, sized when it is made, so nothing allocates afterwards.
//!
//! # Algorithm
//! Windows are processed in batches of up to [`VadState::batch`]. For each window, the
//! 576-sample model input is the 64 samples before it (zeros before the first window) and its
//! 512 samples; the graph's reflection padding only matters at the right end (its first STFT
//! frame, the only one reading the left padding, is dropped), so the four kept frames are
//! `input[128 f .. 128 f + 256]` with `input[576 + j] = input[574 - j]`. For a batch of `n`
//! windows, all time-major (one row per frame, channels contiguous):
//!
//! 1. the STFT: one GEMM of the `4n × 256` frames by the `256 × 258` basis, then
//!    `sqrt(re² + im²)` per bin;
//! 2. each encoder convolution (width 3, padding 1, stride `s`): the `3 · C` inputs of output
//!    frame `t` are the input rows `s t - 1 ..= s t + 1` of its own window (zero outside), copied
//!    side by side (im2col), then one GEMM with the weight packed as `[tap · C + c][out]` and
//!    bias and ReLU in its epilogue;
//! 3. the LSTM's input projection `x · Wᵀ + Wb + Rb` for the whole batch in one GEMM;
//!
//! then window by window: the recurrent GEMM `h · Rᵀ` with the projection as its residual,
//! the gates `i o f c` (`σ, σ, σ, tanh`), `c = f c + i ĉ`, `h = o tanh(c)`, and the speech
//! probability `σ(w · relu(h) + b)`.
//!
//! # Error bound
//! The operations are onnxruntime's, in `f32`, in another summation order (the GEMMs'
//! blocking), with `σ(x) = 1 / (1 + e^{-x})` and `tanh(x) = 1 - 2 / (e^{2x} + 1)` over the
//! kernels' vectorised `exp` (relative error 3e-7; `tanh` so has an absolute error of a few
//! 1e-8 near 0) instead of onnxruntime's own approximations. Each output is a sigmoid (slope at
//! most ¼) of a sum of 128 products of values of order one, computed from sums of up to 387
//! terms: the rounding differences stay orders of magnitude below the 1e-4 the golden tests
//! hold the probabilities to.

use std::path::Path;

use tessel_kernels::activation::Activation;
use tessel_kernels::gemm::{
    gemm, gemm_scratch, packed_len, Epilogue, PackedB, Parallel, Sequential,
};
use tessel_kernels::math::exp_slice;
use tessel_kernels::{Isa, ScratchSpec, View, ViewMut};

use crate::error::VadError;
use crate::onnx::OnnxModel;
use crate::silero::{
    SileroWeights, BINS, CONTEXT, CONVS, FFT, FRAMES, HIDDEN, HOP, INPUT, TAPS, WINDOW,
};

/// Gate values per window: `i o f c`, `HIDDEN` each.
const GATES: usize = 4 * HIDDEN;
/// Frames of each convolution's input (the STFT's 4, then halved twice).
const CONV_FRAMES: [usize; 4] = [FRAMES, FRAMES, FRAMES / 2, 1];
/// Samples of the reflected right padding a window's last frame reads.
const REFLECT: usize = (FRAMES - 1) * HOP + FFT - INPUT;
/// Windows per batch of [`Vad::speech_probabilities`]: about 2 s of audio, a few hundred KB of
/// buffers.
pub const DEFAULT_BATCH: usize = 64;

/// A packed `f32` weight.
type Packed = PackedB<Vec<f32>, f32>;

/// One encoder convolution, packed for its GEMM.
#[derive(Clone, Debug)]
struct Conv {
    weight: Packed,
    bias: Vec<f32>,
    channels: usize,
    out: usize,
    stride: usize,
    frames_in: usize,
}

impl Conv {
    fn frames_out(&self) -> usize {
        (self.frames_in - 1) / self.stride + 1
    }
}

/// Packs the row-major `n × k` matrix `rows` (`nn.Linear`'s layout) as `B = rowsᵀ`.
fn pack_nk(rows: &[f32], n: usize, k: usize) -> Result<Packed, VadError> {
    let storage = vec![0.0; packed_len(k, n)?];
    Ok(PackedB::from_nk(storage, View::new(rows, n, k, k)?)?)
}

/// Silero VAD v6 at 16 kHz: the weights, packed once, and the ISA level the kernels run at.
/// Immutable; any number of [`VadState`]s may use it at once.
#[derive(Clone, Debug)]
pub struct Vad {
    isa: Isa,
    stft: Packed,
    convs: [Conv; 4],
    lstm_input: Packed,
    lstm_bias: Vec<f32>,
    lstm_recurrent: Packed,
    decoder: Vec<f32>,
    decoder_bias: f32,
}

impl Vad {
    /// Reads the model file at `path` (see [`Vad::from_bytes`]).
    pub fn open(path: &Path) -> Result<Vad, VadError> {
        let bytes = std::fs::read(path).map_err(|source| VadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Vad::from_bytes(&bytes)
    }

    /// The model in `bytes` (an ONNX file of Silero VAD v6's 16 kHz graph, checked as
    /// [`crate::silero`] describes), running at the best ISA level of this CPU.
    pub fn from_bytes(bytes: &[u8]) -> Result<Vad, VadError> {
        let weights = SileroWeights::read(&OnnxModel::decode(bytes)?)?;
        Vad::from_weights(&weights)
    }

    /// The model from weights already read.
    pub fn from_weights(weights: &SileroWeights) -> Result<Vad, VadError> {
        let stft = pack_nk(&weights.basis, 2 * BINS, FFT)?;
        let mut convs = Vec::with_capacity(4);
        for (((channels, out, stride), frames_in), w) in
            CONVS.into_iter().zip(CONV_FRAMES).zip(&weights.convs)
        {
            // `[out][channel][tap]` to `[out][tap · channels + channel]`.
            let mut rows = vec![0.0; out * TAPS * channels];
            for o in 0..out {
                for c in 0..channels {
                    for t in 0..TAPS {
                        rows[o * TAPS * channels + t * channels + c] =
                            w.weight[(o * channels + c) * TAPS + t];
                    }
                }
            }
            convs.push(Conv {
                weight: pack_nk(&rows, out, TAPS * channels)?,
                bias: w.bias.clone(),
                channels,
                out,
                stride,
                frames_in,
            });
        }
        let convs: [Conv; 4] = convs
            .try_into()
            .map_err(|_| VadError::InvalidArgument("four convolutions"))?;
        let (wb, rb) = weights.lstm_b.split_at(GATES);
        Ok(Vad {
            isa: Isa::best(),
            stft,
            convs,
            lstm_input: pack_nk(&weights.lstm_w, GATES, HIDDEN)?,
            lstm_bias: wb.iter().zip(rb).map(|(a, b)| a + b).collect(),
            lstm_recurrent: pack_nk(&weights.lstm_r, GATES, HIDDEN)?,
            decoder: weights.decoder_w.clone(),
            decoder_bias: weights.decoder_b,
        })
    }

    /// The same model running its kernels at `isa`.
    pub fn with_isa(mut self, isa: Isa) -> Vad {
        self.isa = isa;
        self
    }

    /// The ISA level the kernels run at.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// A fresh stream state processing one window per call, on one thread.
    pub fn state(&self) -> VadState {
        VadState::new(1, 1)
    }

    /// A fresh stream state processing up to `batch` windows at once (at least 1), with
    /// scratch for GEMMs split over `threads` threads.
    pub fn state_with(&self, batch: usize, threads: usize) -> VadState {
        VadState::new(batch, threads)
    }

    /// The speech probability of the next 512-sample `window` of the stream `state` follows:
    /// the LSTM state and the 64 samples of context carry over from its previous window.
    pub fn process(&self, state: &mut VadState, window: &[f32]) -> Result<f32, VadError> {
        if window.len() != WINDOW {
            return Err(VadError::InvalidArgument("a window is 512 samples"));
        }
        let mut probability = [0.0];
        self.process_windows(state, window, &mut probability, &Sequential)?;
        Ok(probability[0])
    }

    /// The speech probabilities of the next `samples.len() / 512` windows of the stream into
    /// `probabilities` (one each), as [`Vad::process`] would give them one by one; the
    /// encoder's GEMMs are split by `parallel` (at most the state's `threads`).
    pub fn process_windows(
        &self,
        state: &mut VadState,
        samples: &[f32],
        probabilities: &mut [f32],
        parallel: &dyn Parallel,
    ) -> Result<(), VadError> {
        if !samples.len().is_multiple_of(WINDOW) || probabilities.len() != samples.len() / WINDOW {
            return Err(VadError::InvalidArgument(
                "samples must be whole 512-sample windows, one probability each",
            ));
        }
        if parallel.threads() > state.threads {
            return Err(VadError::InvalidArgument(
                "the runner has more threads than the state was made for",
            ));
        }
        for (chunk, out) in samples
            .chunks(WINDOW * state.batch)
            .zip(probabilities.chunks_mut(state.batch))
        {
            self.encode(state, chunk, parallel)?;
            self.recur(state, out)?;
        }
        Ok(())
    }

    /// faster-whisper's `get_vad_model()(padded_audio)` on `samples` (16 kHz): the audio padded
    /// with zeros to whole windows, always adding at least one sample as its
    /// `get_speech_timestamps` does (a multiple of 512 gains a whole window of zeros), then run
    /// as one stream from a zero state. As there, the last 64 samples of the last window are
    /// zeroed (its batching writes the first window's zero context through a view of them).
    pub fn speech_probabilities(&self, samples: &[f32]) -> Result<Vec<f32>, VadError> {
        let mut state = self.state_with(DEFAULT_BATCH, 1);
        self.speech_probabilities_with(&mut state, samples, &Sequential)
    }

    /// [`Vad::speech_probabilities`] with a state of the caller's (reset first) and runner.
    pub fn speech_probabilities_with(
        &self,
        state: &mut VadState,
        samples: &[f32],
        parallel: &dyn Parallel,
    ) -> Result<Vec<f32>, VadError> {
        state.reset();
        let whole = samples.len() / WINDOW;
        let mut probabilities = vec![0.0; whole + 1];
        let (head, tail) = samples.split_at(whole * WINDOW);
        let (first, last) = probabilities.split_at_mut(whole);
        self.process_windows(state, head, first, parallel)?;
        let mut window = [0.0f32; WINDOW];
        window[..tail.len()].copy_from_slice(tail);
        window[WINDOW - CONTEXT..].fill(0.0);
        self.process_windows(state, &window, last, parallel)?;
        Ok(probabilities)
    }

    /// The encoder and the LSTM input projection for the windows of `samples` (at most the
    /// state's batch): `state.gates_x` receives one row of gate inputs per window.
    fn encode(
        &self,
        state: &mut VadState,
        samples: &[f32],
        parallel: &dyn Parallel,
    ) -> Result<(), VadError> {
        let n = samples.len() / WINDOW;
        let isa = self.isa;
        let s = state;
        // The STFT frames, four rows of 256 per window.
        for (w, window) in samples.chunks_exact(WINDOW).enumerate() {
            let mut input = [0.0f32; INPUT + REFLECT];
            input[..CONTEXT].copy_from_slice(&s.context);
            input[CONTEXT..INPUT].copy_from_slice(window);
            for j in 0..REFLECT {
                input[INPUT + j] = input[INPUT - 2 - j];
            }
            s.context.copy_from_slice(&window[WINDOW - CONTEXT..]);
            let rows = &mut s.frames[w * FRAMES * FFT..(w + 1) * FRAMES * FFT];
            for (f, row) in rows.chunks_exact_mut(FFT).enumerate() {
                row.copy_from_slice(&input[f * HOP..f * HOP + FFT]);
            }
        }
        let m = n * FRAMES;
        gemm(
            isa,
            View::new(&s.frames[..m * FFT], m, FFT, FFT)?,
            &self.stft,
            ViewMut::new(&mut s.spectrum[..m * 2 * BINS], m, 2 * BINS, 2 * BINS)?,
            &Epilogue::NONE,
            &mut s.scratch,
            parallel,
        )?;
        for (row, out) in s.spectrum[..m * 2 * BINS]
            .chunks_exact(2 * BINS)
            .zip(s.activations[0].chunks_exact_mut(BINS))
        {
            let (re, im) = row.split_at(BINS);
            for ((o, &r), &i) in out.iter_mut().zip(re).zip(im) {
                *o = (r * r + i * i).sqrt();
            }
        }
        // The convolutions, ping-ponging between the two activation buffers.
        for (layer, conv) in self.convs.iter().enumerate() {
            let [a, b] = &mut s.activations;
            let (input, output): (&[f32], &mut [f32]) =
                if layer % 2 == 0 { (a, b) } else { (b, a) };
            let (c, t_in, t_out) = (conv.channels, conv.frames_in, conv.frames_out());
            let width = TAPS * c;
            let rows = n * t_out;
            for w in 0..n {
                let frames = &input[w * t_in * c..(w + 1) * t_in * c];
                for t in 0..t_out {
                    let row = &mut s.columns[(w * t_out + t) * width..][..width];
                    for (tap, dst) in row.chunks_exact_mut(c).enumerate() {
                        // Input frame `stride · t + tap - 1`, zero outside the window.
                        match (conv.stride * t + tap).checked_sub(1) {
                            Some(f) if f < t_in => dst.copy_from_slice(&frames[f * c..][..c]),
                            _ => dst.fill(0.0),
                        }
                    }
                }
            }
            let epilogue = Epilogue {
                bias: Some(&conv.bias),
                activation: Activation::Relu,
                residual: None,
            };
            gemm(
                isa,
                View::new(&s.columns[..rows * width], rows, width, width)?,
                &conv.weight,
                ViewMut::new(&mut output[..rows * conv.out], rows, conv.out, conv.out)?,
                &epilogue,
                &mut s.scratch,
                parallel,
            )?;
        }
        // The four layers leave one 128-feature row per window in `activations[0]`.
        let epilogue = Epilogue {
            bias: Some(&self.lstm_bias),
            activation: Activation::Identity,
            residual: None,
        };
        gemm(
            isa,
            View::new(&s.activations[0][..n * HIDDEN], n, HIDDEN, HIDDEN)?,
            &self.lstm_input,
            ViewMut::new(&mut s.gates_x[..n * GATES], n, GATES, GATES)?,
            &epilogue,
            &mut s.scratch,
            parallel,
        )?;
        Ok(())
    }

    /// The LSTM and decoder over the windows [`Vad::encode`] prepared, one probability each.
    fn recur(&self, s: &mut VadState, probabilities: &mut [f32]) -> Result<(), VadError> {
        for (w, probability) in probabilities.iter_mut().enumerate() {
            let epilogue = Epilogue {
                bias: None,
                activation: Activation::Identity,
                residual: Some(View::new(
                    &s.gates_x[w * GATES..(w + 1) * GATES],
                    1,
                    GATES,
                    GATES,
                )?),
            };
            gemm(
                self.isa,
                View::new(&s.h, 1, HIDDEN, HIDDEN)?,
                &self.lstm_recurrent,
                ViewMut::new(&mut s.gates, 1, GATES, GATES)?,
                &epilogue,
                &mut s.scratch,
                &Sequential,
            )?;
            // σ(x) = 1 / (1 + e^{-x}) for i, o, f and tanh(x) = 1 - 2 / (e^{2x} + 1) for ĉ,
            // the exponentials vectorised.
            let (sigmoids, tanhs) = s.gates.split_at_mut(3 * HIDDEN);
            sigmoids.iter_mut().for_each(|v| *v = -*v);
            tanhs.iter_mut().for_each(|v| *v *= 2.0);
            exp_slice(self.isa, &mut s.gates);
            let (i, rest) = s.gates.split_at_mut(HIDDEN);
            let (o, rest) = rest.split_at_mut(HIDDEN);
            let (f, g) = rest.split_at(HIDDEN);
            let gates = i.iter().zip(f).zip(g);
            let cells = s.c.iter_mut().zip(o.iter_mut()).zip(s.cell_exp.iter_mut());
            for (((&ei, &ef), &eg), ((c, o), e2c)) in gates.zip(cells) {
                let input = 1.0 / (1.0 + ei);
                let forget = 1.0 / (1.0 + ef);
                let candidate = 1.0 - 2.0 / (eg + 1.0);
                *c = forget * *c + input * candidate;
                *o = 1.0 / (1.0 + *o);
                *e2c = 2.0 * *c;
            }
            exp_slice(self.isa, &mut s.cell_exp);
            let mut logit = 0.0f32;
            let outputs = o.iter().zip(&s.cell_exp).zip(&self.decoder);
            for (h, ((&o, &e2c), &d)) in s.h.iter_mut().zip(outputs) {
                *h = o * (1.0 - 2.0 / (e2c + 1.0));
                logit += h.max(0.0) * d;
            }
            *probability = sigmoid(logit + self.decoder_bias);
        }
        Ok(())
    }
}

/// `1 / (1 + e^{-x})`.
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// One stream's state: the LSTM's `h` and `c`, the last 64 samples seen, and the buffers of a
/// batch of windows. Made by [`Vad::state`] or [`Vad::state_with`]; never reallocated.
#[derive(Clone, Debug)]
pub struct VadState {
    batch: usize,
    threads: usize,
    h: Vec<f32>,
    c: Vec<f32>,
    context: [f32; CONTEXT],
    frames: Vec<f32>,
    spectrum: Vec<f32>,
    /// Two ping-pong buffers of time-major activations (the magnitude, then each layer's).
    activations: [Vec<f32>; 2],
    columns: Vec<f32>,
    gates_x: Vec<f32>,
    gates: Vec<f32>,
    /// `e^{2c}` of the new cell state, for `tanh(c)`.
    cell_exp: Vec<f32>,
    scratch: Vec<f32>,
}

impl VadState {
    fn new(batch: usize, threads: usize) -> VadState {
        let batch = batch.max(1);
        let threads = threads.max(1);
        let m = batch * FRAMES;
        let activations = m * BINS.max(HIDDEN);
        let mut columns = 0;
        let mut spec = gemm_scratch(m, FFT, 2 * BINS, threads)
            .or(gemm_scratch(batch, HIDDEN, GATES, threads))
            .or(gemm_scratch(1, HIDDEN, GATES, 1));
        for ((c, out, stride), t_in) in CONVS.into_iter().zip(CONV_FRAMES) {
            let rows = batch * ((t_in - 1) / stride + 1);
            columns = columns.max(rows * TAPS * c);
            spec = spec.or(gemm_scratch(rows, TAPS * c, out, threads));
        }
        VadState {
            batch,
            threads,
            h: vec![0.0; HIDDEN],
            c: vec![0.0; HIDDEN],
            context: [0.0; CONTEXT],
            frames: vec![0.0; m * FFT],
            spectrum: vec![0.0; m * 2 * BINS],
            activations: [vec![0.0; activations], vec![0.0; activations]],
            columns: vec![0.0; columns],
            gates_x: vec![0.0; batch * GATES],
            gates: vec![0.0; GATES],
            cell_exp: vec![0.0; HIDDEN],
            scratch: vec![0.0; ScratchSpec::len(spec)],
        }
    }

    /// Back to the start of a stream: zero LSTM state and context.
    pub fn reset(&mut self) {
        self.h.fill(0.0);
        self.c.fill(0.0);
        self.context.fill(0.0);
    }

    /// Windows processed per batch.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Threads the state's scratch was sized for.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The LSTM's hidden state `h` (128 values).
    pub fn hidden(&self) -> &[f32] {
        &self.h
    }

    /// The LSTM's cell state `c` (128 values).
    pub fn cell(&self) -> &[f32] {
        &self.c
    }
}
