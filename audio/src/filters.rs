//! The Slaney mel filterbank, as `librosa.filters.mel(sr=16000, n_fft=400, n_mels,
//! htk=False, norm='slaney')` computes it (and as whisper's `assets/mel_filters.npz` stores it).
//!
//! Algorithm (librosa 0.10, float64 throughout, rounded to `f32` at the end like librosa's
//! default `dtype=np.float32`):
//! - the FFT bin centres are `k · sr / n_fft` for `k = 0..=n_fft/2`;
//! - `n_mels + 2` points equally spaced on the Slaney mel scale between 0 Hz and `sr / 2`
//!   (linear below 1 kHz at 200/3 Hz per mel, logarithmic above with step `ln(6.4) / 27`),
//!   mapped back to Hz;
//! - filter `m` is the triangle rising from point `m` to point `m + 1` and falling to point
//!   `m + 2`: `max(0, min((f − p_m)/(p_{m+1} − p_m), (p_{m+2} − f)/(p_{m+2} − p_{m+1})))`;
//! - Slaney normalisation: filter `m` is scaled by `2 / (p_{m+2} − p_m)` (constant area).
//!
//! Error bound: the float64 evaluation differs from librosa's only by the last bits of
//! `ln`/`exp`, far below the final rounding to `f32`; the golden test finds the filters of
//! whisper's npz within 1 ulp of `f32`.
//!
//! Each filter is nonzero on one contiguous run of bins, so it is stored sparsely (`start`
//! and the run's weights): the mel projection then reads ~2 weights per FFT bin.

use crate::{N_FFT, N_FREQS, SAMPLE_RATE};

const F_SP: f64 = 200.0 / 3.0;
const MIN_LOG_HZ: f64 = 1000.0;
const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;

fn log_step() -> f64 {
    6.4f64.ln() / 27.0
}

/// Hz to the Slaney mel scale (`librosa.hz_to_mel(htk=False)`).
pub fn hz_to_mel(hz: f64) -> f64 {
    if hz >= MIN_LOG_HZ {
        MIN_LOG_MEL + (hz / MIN_LOG_HZ).ln() / log_step()
    } else {
        hz / F_SP
    }
}

/// The Slaney mel scale to Hz (`librosa.mel_to_hz(htk=False)`).
pub fn mel_to_hz(mel: f64) -> f64 {
    if mel >= MIN_LOG_MEL {
        MIN_LOG_HZ * (log_step() * (mel - MIN_LOG_MEL)).exp()
    } else {
        F_SP * mel
    }
}

/// One triangular filter: its weights on the FFT bins `start .. start + weights.len()`.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// First FFT bin with a nonzero weight (0 for an empty filter).
    pub start: usize,
    /// The nonzero run of weights.
    pub weights: Vec<f32>,
}

/// The filterbank for `n_mels` bins, one sparse [`Filter`] per mel bin.
pub fn mel_filters(n_mels: usize) -> Vec<Filter> {
    let sr = f64::from(SAMPLE_RATE);
    // librosa: np.linspace(min_mel, max_mel, n_mels + 2), then mel_to_hz.
    let (lo, hi) = (hz_to_mel(0.0), hz_to_mel(sr / 2.0));
    let points: Vec<f64> = (0..n_mels + 2)
        .map(|i| mel_to_hz(linspace(lo, hi, n_mels + 2, i)))
        .collect();
    // librosa: fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0/sr) = k * sr / n_fft.
    let freq = |k: usize| k as f64 * sr / N_FFT as f64;
    (0..n_mels)
        .map(|m| {
            let (left, centre, right) = (points[m], points[m + 1], points[m + 2]);
            let norm = 2.0 / (right - left);
            let dense: Vec<f32> = (0..N_FREQS)
                .map(|k| {
                    let lower = (freq(k) - left) / (centre - left);
                    let upper = (right - freq(k)) / (right - centre);
                    (0f64.max(lower.min(upper)) * norm) as f32
                })
                .collect();
            let first = dense.iter().position(|&w| w != 0.0);
            let last = dense.iter().rposition(|&w| w != 0.0);
            match (first, last) {
                (Some(a), Some(b)) => Filter {
                    start: a,
                    weights: dense[a..=b].to_vec(),
                },
                _ => Filter {
                    start: 0,
                    weights: Vec::new(),
                },
            }
        })
        .collect()
}

/// The filterbank as a dense row-major `[n_mels][N_FREQS]` matrix (whisper's layout).
pub fn dense(filters: &[Filter]) -> Vec<f32> {
    let mut out = vec![0.0; filters.len() * N_FREQS];
    for (row, f) in out.chunks_exact_mut(N_FREQS).zip(filters) {
        row[f.start..f.start + f.weights.len()].copy_from_slice(&f.weights);
    }
    out
}

/// `np.linspace(lo, hi, n)[i]` (numpy computes `lo + i * step`, the last point exactly `hi`).
fn linspace(lo: f64, hi: f64, n: usize, i: usize) -> f64 {
    if i + 1 == n {
        return hi;
    }
    let step = (hi - lo) / (n - 1) as f64;
    lo + i as f64 * step
}
