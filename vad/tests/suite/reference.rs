//! The forward pass against a plain scalar evaluation of the ONNX graph in `f64`, written
//! straight from the operators' definitions (reflect `Pad`, `Conv` over the padded input,
//! `Slice` of frames 1.., `LSTM` with gates `i o f c`), over random windows and amplitudes,
//! at every ISA level. This checks the fast path's layout tricks (dropping the left padding,
//! im2col across windows, the packed `(tap, channel)` weights, the exp-based gates) without
//! onnxruntime.

use std::path::Path;

use proptest::prelude::*;
use tessel_tests::isa_levels;
use tessel_vad::onnx::OnnxModel;
use tessel_vad::silero::{SileroWeights, BINS, CONTEXT, CONVS, FFT, HIDDEN, HOP, INPUT, PAD};
use tessel_vad::{Vad, WINDOW};

/// How far the `f32` pass may be from the `f64` evaluation: the rounding of `f32` sums of up
/// to 387 terms of order one (about 1e-6 relative), carried through five layers and the
/// LSTM and damped by the final sigmoid. Measured: about 1e-6.
const TOLERANCE: f64 = 1e-4;

fn weights() -> SileroWeights {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/silero_vad_v6.onnx");
    let bytes = std::fs::read(path).expect("model file");
    SileroWeights::read(&OnnxModel::decode(&bytes).expect("decodes")).expect("reads")
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `Conv` (width 3, padding 1, `stride`) then `Relu` over `x` (`[channels][frames]`).
fn conv(x: &[Vec<f64>], weight: &[f32], bias: &[f32], out: usize, stride: usize) -> Vec<Vec<f64>> {
    let (channels, frames) = (x.len(), x[0].len());
    let frames_out = (frames + 2 - 3) / stride + 1;
    (0..out)
        .map(|o| {
            (0..frames_out)
                .map(|t| {
                    let mut sum = f64::from(bias[o]);
                    for (c, row) in x.iter().enumerate() {
                        for tap in 0..3 {
                            let at = (stride * t + tap) as i64 - 1;
                            if (0..frames as i64).contains(&at) {
                                sum += f64::from(weight[(o * channels + c) * 3 + tap])
                                    * row[at as usize];
                            }
                        }
                    }
                    sum.max(0.0)
                })
                .collect()
        })
        .collect()
}

/// The graph over consecutive windows from a zero state, in `f64`.
fn reference(w: &SileroWeights, audio: &[f32]) -> Vec<f64> {
    let (mut h, mut c) = (vec![0.0f64; HIDDEN], vec![0.0f64; HIDDEN]);
    let mut context = vec![0.0f64; CONTEXT];
    let mut out = Vec::new();
    for window in audio.chunks_exact(WINDOW) {
        let input: Vec<f64> = context
            .iter()
            .copied()
            .chain(window.iter().map(|&v| f64::from(v)))
            .collect();
        context = input[INPUT - CONTEXT..].to_vec();
        // Reflect padding of PAD on each side.
        let padded: Vec<f64> = (0..INPUT + 2 * PAD)
            .map(|j| {
                let i = j as i64 - PAD as i64;
                let i = if i < 0 { -i } else { i };
                let last = INPUT as i64 - 1;
                input[(if i > last { 2 * last - i } else { i }) as usize]
            })
            .collect();
        let frames = (padded.len() - FFT) / HOP + 1;
        let mut magnitude = vec![vec![0.0f64; frames - 1]; BINS];
        for (bin, row) in magnitude.iter_mut().enumerate() {
            for (t, value) in row.iter_mut().enumerate() {
                let frame = &padded[(t + 1) * HOP..(t + 1) * HOP + FFT];
                let dot = |k: usize| -> f64 {
                    frame
                        .iter()
                        .zip(&w.basis[k * FFT..(k + 1) * FFT])
                        .map(|(x, &b)| x * f64::from(b))
                        .sum()
                };
                let (re, im) = (dot(bin), dot(BINS + bin));
                *value = (re * re + im * im).sqrt();
            }
        }
        let mut x = magnitude;
        for ((_, out, stride), layer) in CONVS.iter().zip(&w.convs) {
            x = conv(&x, &layer.weight, &layer.bias, *out, *stride);
        }
        let features: Vec<f64> = x.iter().map(|row| row[0]).collect();
        let gate = |g: usize, j: usize| -> f64 {
            let row = g * HIDDEN + j;
            let mut sum = f64::from(w.lstm_b[row]) + f64::from(w.lstm_b[4 * HIDDEN + row]);
            for k in 0..HIDDEN {
                sum += f64::from(w.lstm_w[row * HIDDEN + k]) * features[k]
                    + f64::from(w.lstm_r[row * HIDDEN + k]) * h[k];
            }
            sum
        };
        let gates: Vec<[f64; 4]> = (0..HIDDEN)
            .map(|j| [gate(0, j), gate(1, j), gate(2, j), gate(3, j)])
            .collect();
        for (j, [i, o, f, g]) in gates.into_iter().enumerate() {
            c[j] = sigmoid(f) * c[j] + sigmoid(i) * g.tanh();
            h[j] = sigmoid(o) * c[j].tanh();
        }
        let logit: f64 = h
            .iter()
            .zip(&w.decoder_w)
            .map(|(v, &d)| v.max(0.0) * f64::from(d))
            .sum::<f64>()
            + f64::from(w.decoder_b);
        out.push(sigmoid(logit));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(tessel_tests::cases(12)))]

    /// Streaming window by window at every ISA level stays within [`TOLERANCE`] of the `f64`
    /// graph, for 1 to 3 windows of noise, a tone or silence at amplitudes from 1e-3 to 1.
    #[test]
    fn forward_pass_matches_the_f64_graph(
        windows in 1usize..4,
        kind in 0u8..3,
        amplitude in prop_oneof![Just(1e-3f32), 1e-2f32..1.0],
        seed in any::<u64>(),
    ) {
        let w = weights();
        let mut state = seed | 1;
        let audio: Vec<f32> = (0..windows * WINDOW)
            .map(|i| match kind {
                0 => {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    amplitude * ((state >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
                }
                1 => amplitude * (i as f32 * 0.05 + (seed % 7) as f32).sin(),
                _ => 0.0,
            })
            .collect();
        let expected = reference(&w, &audio);
        let base = Vad::from_weights(&w).expect("packs");
        for isa in isa_levels() {
            let vad = base.clone().with_isa(isa);
            let mut stream = vad.state();
            for (window, want) in audio.chunks_exact(WINDOW).zip(&expected) {
                let got = f64::from(vad.process(&mut stream, window).expect("runs"));
                prop_assert!((got - want).abs() <= TOLERANCE, "{isa:?}: {got} vs {want}");
            }
        }
    }
}
