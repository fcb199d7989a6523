//! Whisper's log-mel spectrogram (`whisper.audio.log_mel_spectrogram`), planned once and
//! computed without allocating.
//!
//! Algorithm, for 16 kHz samples `x` seen as a signal of length `L` (the audio followed by
//! zeros):
//! - frame `t` holds `x[t·160 − 200 .. t·160 + 200]` times the periodic Hann window
//!   `0.5 − 0.5·cos(2πn/400)`, where indices outside `[0, L)` reflect without repeating the
//!   edge (`torch.stft(center=True, pad_mode="reflect")`): `x[−k] = x[k]`,
//!   `x[L−1+k] = x[L−1−k]`;
//! - its 201-bin power spectrum `|X_k|²` (real FFT through `realfft`, `f32`);
//! - the mel projection `Σ_k W[m][k]·|X_k|²` through the sparse Slaney filterbank
//!   ([`crate::filters`]), accumulated in `f64`;
//! - `log10(max(mel, 1e-10))`; then over all frames of the call, `max(v, v_max − 8)` and
//!   `(v + 4) / 4` in `f32`, as whisper does.
//!
//! torch's STFT yields `L/160 + 1` frames and whisper drops the last one before taking the
//! maximum; so do [`MelFrontEnd::window`] (`L` = 480 000: `log_mel_spectrogram(pad_or_trim(x))`,
//! 3000 frames) and [`MelFrontEnd::spectrogram`] (`L = len + 480 000`: the transcribe path,
//! `log_mel_spectrogram(x, padding=N_SAMPLES)`, whose first `len/160` frames it returns; the
//! frames after them only matter through the maximum, which it takes over them without storing
//! them). [`segment`] then cuts transcribe's 30 s windows (`pad_or_trim(mel[:, seek:seek+n])`,
//! zero-filled). [`MelFrontEnd::chunk_features`] (`L = len + 160`) is faster-whisper's batched
//! pipeline: one speech chunk's features, normalised over its own frames, zero-filled to 3000.
//!
//! Error bound: against a float64 evaluation of the same formula, whisper's float32 torch
//! output is off by up to ~2e-5 (measured by `tools/make_audio_golden.py`), and this
//! implementation by a similar amount: an `f32` FFT has absolute error ~1e-7 of the frame's
//! energy, so a bin `d` decades below the loudest frame carries a relative error ~1e-7·10^(d/2);
//! within the 8 decades the clamp keeps this is ≤ 1e-3 relative, ≤ 1.1e-4 after `log10 / 4`,
//! and typically ~1e-6. The golden tests bound the difference to whisper's output.

use std::sync::Arc;

use realfft::num_complex::Complex;
use realfft::{RealFftPlanner, RealToComplex};

use crate::filters::{mel_filters, Filter};
use crate::{MelError, HOP_LENGTH, N_FFT, N_FRAMES, N_FREQS, N_SAMPLES};

/// The largest number of mel bins [`MelFrontEnd::new`] accepts.
pub const MAX_MELS: usize = 256;

/// Half the frame: the reflect padding on each side.
const HALF: usize = N_FFT / 2;

/// The frames of `log_mel_spectrogram(x, padding=N_SAMPLES)` that whisper's transcribe treats
/// as content for `samples` samples of audio (`samples / 160`).
pub const fn content_frames(samples: usize) -> usize {
    samples / HOP_LENGTH
}

/// The first frame whose window holds no sample of a clip of `samples` samples followed by
/// zeros.
const fn touched_frames(samples: usize) -> usize {
    (samples + HALF).div_ceil(HOP_LENGTH)
}

/// The log-mel front end for one number of mel bins: FFT plan, window, filterbank and
/// scratch are set up by [`new`](Self::new); the per-call methods allocate nothing.
pub struct MelFrontEnd {
    n_mels: usize,
    fft: Arc<dyn RealToComplex<f32>>,
    window: Vec<f32>,
    filters: Vec<Filter>,
    frame: Vec<f32>,
    spectrum: Vec<Complex<f32>>,
    scratch: Vec<Complex<f32>>,
    power: Vec<f32>,
    column: Vec<f32>,
}

impl std::fmt::Debug for MelFrontEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MelFrontEnd")
            .field("n_mels", &self.n_mels)
            .finish_non_exhaustive()
    }
}

/// The signal a call reads: `audio` followed by zeros up to `len` samples.
#[derive(Clone, Copy)]
struct Signal<'a> {
    audio: &'a [f32],
    len: usize,
}

impl Signal<'_> {
    /// Whether the frame centred on `start` reads only zeros (the padding), reflections
    /// included: its indices `[start − HALF, start + HALF)` lie past the audio, and so do
    /// their mirror images past `len`, which start at `2·len − 1 − (start + HALF)`.
    fn silent(&self, start: usize) -> bool {
        let (lo, hi) = (start.saturating_sub(HALF), start + HALF);
        start >= HALF
            && lo >= self.audio.len()
            && (hi <= self.len || (2 * self.len).saturating_sub(1 + hi) >= self.audio.len())
    }

    /// Sample `j` of the reflect-padded signal (`j` may be up to `HALF` outside `[0, len)`).
    fn at(&self, j: isize) -> f32 {
        let i = if j < 0 {
            j.unsigned_abs()
        } else if j.unsigned_abs() >= self.len {
            (2 * (self.len - 1)).saturating_sub(j.unsigned_abs())
        } else {
            j.unsigned_abs()
        };
        self.audio.get(i).copied().unwrap_or(0.0)
    }
}

impl MelFrontEnd {
    /// Plans the front end for `n_mels` bins (whisper: 80, or 128 for large-v3).
    pub fn new(n_mels: usize) -> Result<Self, MelError> {
        if n_mels == 0 || n_mels > MAX_MELS {
            return Err(MelError::Mels {
                n_mels,
                max: MAX_MELS,
            });
        }
        let fft = RealFftPlanner::<f32>::new().plan_fft_forward(N_FFT);
        // torch.hann_window(400), periodic: 0.5 - 0.5 cos(2 pi n / N).
        let window = (0..N_FFT)
            .map(|n| {
                let phase = 2.0 * std::f64::consts::PI * n as f64 / N_FFT as f64;
                (0.5 - 0.5 * phase.cos()) as f32
            })
            .collect();
        Ok(Self {
            n_mels,
            frame: fft.make_input_vec(),
            spectrum: fft.make_output_vec(),
            scratch: fft.make_scratch_vec(),
            fft,
            window,
            filters: mel_filters(n_mels),
            power: vec![0.0; N_FREQS],
            column: vec![0.0; n_mels],
        })
    }

    /// The number of mel bins.
    pub fn n_mels(&self) -> usize {
        self.n_mels
    }

    /// Values [`window`](Self::window) writes: `n_mels × 3000`.
    pub fn window_len(&self) -> usize {
        self.n_mels * N_FRAMES
    }

    /// whisper's `log_mel_spectrogram(pad_or_trim(audio), n_mels)`: one 30 s window of 16 kHz
    /// samples (the first 480 000 are used; shorter audio is zero-padded), written row-major
    /// `[n_mels][3000]` into `out`.
    pub fn window(&mut self, audio: &[f32], out: &mut [f32]) -> Result<(), MelError> {
        check_len(out.len(), self.window_len())?;
        let audio = &audio[..audio.len().min(N_SAMPLES)];
        check_finite(audio)?;
        let signal = Signal {
            audio,
            len: N_SAMPLES,
        };
        let max = self.columns(signal, N_FRAMES, N_FRAMES, out, N_FRAMES)?;
        normalize(out, max);
        Ok(())
    }

    /// whisper's transcribe path: `log_mel_spectrogram(audio, n_mels, padding=N_SAMPLES)`
    /// restricted to its first [`content_frames`]`(audio.len())` frames, written row-major
    /// `[n_mels][frames]` into `out` (which must hold `n_mels × frames` values). The maximum
    /// the clamp uses is over every frame of the padded signal, as whisper's. Returns `frames`.
    pub fn spectrogram(&mut self, audio: &[f32], out: &mut [f32]) -> Result<usize, MelError> {
        let frames = content_frames(audio.len());
        check_len(out.len(), self.n_mels * frames)?;
        check_finite(audio)?;
        let signal = Signal {
            audio,
            len: audio.len() + N_SAMPLES,
        };
        // Frames past the content still see its last samples; every later frame (there are
        // ~3000, the padding) is all zeros: log10(1e-10) = -10.
        let max = self.columns(signal, touched_frames(audio.len()), frames, out, frames)?;
        normalize(out, max.max(silent_log()));
        Ok(frames)
    }

    /// faster-whisper's batched pipeline (`BatchedInferencePipeline`): the features of one
    /// speech chunk, `pad_or_trim(FeatureExtractor(chunk, padding=160)[..., :-1], 3000)`,
    /// written row-major `[n_mels][3000]` into `out` (which must hold
    /// [`window_len`](Self::window_len) values). Returns the content frames written,
    /// `min(len / 160, 3000)`.
    ///
    /// Algorithm: the signal is `audio` followed by 160 zeros (`L = len + 160`), reflect-padded
    /// as above; frames `0..=len / 160` are computed (faster-whisper's STFT drops its last
    /// frame), the clamp's maximum is taken over all of them, and the first `len / 160` (at
    /// most 3000) are normalised and stored; every later column is `0.0`.
    ///
    /// Unlike [`spectrogram`](Self::spectrogram): 160 samples of padding instead of 30 s, so
    /// the maximum is over the chunk's own frames only, with no `log10(1e-10)` floor from a
    /// silent padding (an all-zero frame still computes it); and the padding columns are `0.0`
    /// in normalised space (`np.pad`'s constant), not the normalised log-mel of silence.
    /// A chunk shorter than 160 samples (empty included) has no content frame: all zeros.
    ///
    /// faster-whisper computes the STFT in `float32` numpy (pocketfft) and the mel projection
    /// as a `float32` matrix product; this front end imitates torch (`f32` FFT, `f64` mel sums),
    /// so the two agree within float rounding, not bit for bit.
    pub fn chunk_features(&mut self, audio: &[f32], out: &mut [f32]) -> Result<usize, MelError> {
        check_len(out.len(), self.window_len())?;
        check_finite(audio)?;
        let frames = content_frames(audio.len());
        let stored = frames.min(N_FRAMES);
        let mut max = 0.0;
        // Below one content frame nothing is stored, and the signal can be shorter than the
        // reflect padding (numpy reflects it repeatedly): skip it.
        if frames > 0 {
            let signal = Signal {
                audio,
                len: audio.len() + HOP_LENGTH,
            };
            max = self.columns(signal, frames + 1, stored, out, N_FRAMES)?;
        }
        for row in out.chunks_exact_mut(N_FRAMES) {
            normalize(&mut row[..stored], max);
            row[stored..].fill(0.0);
        }
        Ok(stored)
    }

    /// Computes frames `0..frames` of `signal` and stores the first `stored` of them as the
    /// columns of `out` (row-major, rows of `stride` values); returns the `log10` maximum over
    /// all `frames`.
    fn columns(
        &mut self,
        signal: Signal<'_>,
        frames: usize,
        stored: usize,
        out: &mut [f32],
        stride: usize,
    ) -> Result<f32, MelError> {
        let mut max = f32::NEG_INFINITY;
        for t in 0..frames {
            max = max.max(self.frame_column(signal, t)?);
            if t < stored {
                for (m, &v) in self.column.iter().enumerate() {
                    out[m * stride + t] = v;
                }
            }
        }
        Ok(max)
    }

    /// Computes frame `t`'s `log10` mel column into `self.column`; returns its maximum.
    fn frame_column(&mut self, signal: Signal<'_>, t: usize) -> Result<f32, MelError> {
        let start = t * HOP_LENGTH;
        if signal.silent(start) {
            // All-zero frame: power 0 everywhere, so every bin is log10(1e-10), as computed.
            let floor = silent_log();
            self.column.fill(floor);
            return Ok(floor);
        }
        if start >= HALF && start + HALF <= signal.audio.len() {
            let src = &signal.audio[start - HALF..start + HALF];
            for ((d, &s), &w) in self.frame.iter_mut().zip(src).zip(&self.window) {
                *d = s * w;
            }
        } else {
            let first = start as isize - HALF as isize;
            for (n, (d, &w)) in self.frame.iter_mut().zip(&self.window).enumerate() {
                *d = signal.at(first + n as isize) * w;
            }
        }
        self.fft
            .process_with_scratch(&mut self.frame, &mut self.spectrum, &mut self.scratch)
            .map_err(|e| MelError::Fft(e.to_string()))?;
        for (p, c) in self.power.iter_mut().zip(&self.spectrum) {
            *p = c.re * c.re + c.im * c.im;
        }
        let mut max = f32::NEG_INFINITY;
        for (v, filter) in self.column.iter_mut().zip(&self.filters) {
            let bins = &self.power[filter.start..filter.start + filter.weights.len()];
            let mel: f64 = bins
                .iter()
                .zip(&filter.weights)
                .map(|(&p, &w)| f64::from(p) * f64::from(w))
                .sum();
            // torch: the mel value is f32, clamped at 1e-10, then an f32 log10.
            *v = (mel as f32).max(1e-10).log10();
            max = max.max(*v);
        }
        Ok(max)
    }
}

/// `log10(max(0, 1e-10))` as the general path computes it (`-10.0` in `f32`).
fn silent_log() -> f32 {
    1e-10f32.log10()
}

/// `max(v, max − 8)`, then `(v + 4) / 4`, in `f32` as whisper computes it.
fn normalize(values: &mut [f32], max: f32) {
    let floor = max - 8.0;
    for v in values {
        *v = (v.max(floor) + 4.0) / 4.0;
    }
}

/// whisper transcribe's window: `pad_or_trim(mel[:, seek : seek + size], 3000)` of a
/// spectrogram `mel` (row-major `[n_mels][frames]`, from [`MelFrontEnd::spectrogram`]),
/// written row-major `[n_mels][3000]` into `out`; frames past `size` are 0.
pub fn segment(
    mel: &[f32],
    n_mels: usize,
    seek: usize,
    size: usize,
    out: &mut [f32],
) -> Result<(), MelError> {
    let frames = mel.len().checked_div(n_mels).unwrap_or(0);
    check_input_len(mel.len(), n_mels.saturating_mul(frames))?;
    check_len(out.len(), n_mels.saturating_mul(N_FRAMES))?;
    let fits = size <= N_FRAMES && seek.checked_add(size).is_some_and(|end| end <= frames);
    if !fits {
        return Err(MelError::Segment { seek, size, frames });
    }
    if frames == 0 {
        out.fill(0.0);
        return Ok(());
    }
    for (row, dst) in mel.chunks_exact(frames).zip(out.chunks_exact_mut(N_FRAMES)) {
        dst[..size].copy_from_slice(&row[seek..seek + size]);
        dst[size..].fill(0.0);
    }
    Ok(())
}

fn check_len(got: usize, expected: usize) -> Result<(), MelError> {
    if got == expected {
        Ok(())
    } else {
        Err(MelError::OutputLength { expected, got })
    }
}

fn check_input_len(got: usize, expected: usize) -> Result<(), MelError> {
    if got == expected {
        Ok(())
    } else {
        Err(MelError::InputLength { expected, got })
    }
}

fn check_finite(audio: &[f32]) -> Result<(), MelError> {
    match audio.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(MelError::NonFinite { index }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut's premise: a frame `silent` calls all-zero reads only zeros, for the
    /// window path (`len` = 480 000) and the transcribe path (`len` = audio + 480 000), with
    /// audio filling the window, ending near its end, or short.
    #[test]
    fn silent_frames_read_only_zeros() {
        let audio = vec![1.0f32; N_SAMPLES];
        for n in [
            0,
            1,
            159,
            160,
            12_345,
            N_SAMPLES - 201,
            N_SAMPLES - 200,
            N_SAMPLES - 1,
            N_SAMPLES,
        ] {
            for len in [N_SAMPLES, n + N_SAMPLES] {
                let signal = Signal {
                    audio: &audio[..n],
                    len,
                };
                let mut silent = 0;
                for t in 0..=len / HOP_LENGTH {
                    let start = t * HOP_LENGTH;
                    let reads_zeros = (0..N_FFT)
                        .all(|i| signal.at(start as isize - HALF as isize + i as isize) == 0.0);
                    if signal.silent(start) {
                        assert!(reads_zeros, "n {n}, len {len}, frame {t}");
                        silent += 1;
                    }
                }
                // Every frame past the audio's reach is recognised.
                assert!(
                    silent + touched_frames(n) + 2 > len / HOP_LENGTH,
                    "n {n} len {len}"
                );
            }
        }
    }

    #[test]
    fn the_silent_value_is_what_a_zero_frame_computes() {
        assert_eq!(silent_log(), -10.0);
        let mut front = MelFrontEnd::new(80).expect("valid");
        let zeros = [0.0f32; 0];
        let signal = Signal {
            audio: &zeros,
            len: N_SAMPLES,
        };
        // Frame 0 is not flagged silent (it reflects at the start) but reads only zeros.
        assert!(!signal.silent(0));
        assert_eq!(front.frame_column(signal, 0), Ok(-10.0));
        assert!(front.column.iter().all(|&v| v == silent_log()));
    }
}
