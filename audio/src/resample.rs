//! Streaming resampling of mono audio to 16 kHz with `rubato`'s band-limited sinc resampler.
//!
//! Settings ([`sinc_parameters`]): a 256-tap sinc per output sample windowed by
//! Blackman-Harris², 256 sub-sample phases between which the filter is interpolated cubically,
//! and rubato's automatic cutoff for that length and window (`calculate_cutoff`: 0.947 of the
//! lower Nyquist frequency, 7.58 kHz when downsampling to 16 kHz, chosen so that aliasing
//! stays below the window's sidelobe level), computed in `f32`.
//! The output is aligned with the input (rubato's delay is trimmed) and has
//! `ceil(n · 16000 / rate)` samples, as `Resampler::process_all` produces; 16 kHz input
//! passes through unchanged. rubato trims its delay in whole output samples, so the output
//! leads the input by a fraction of a sample up to about one (≤ 63 µs; measured per rate in
//! `tests/wav.rs`), far below whisper's 10 ms frames and 20 ms timestamps.
//!
//! whisper's reference loads audio through ffmpeg's default `swr` resampler instead (a short
//! Kaiser-windowed sinc, β = 9, cutoff 0.97, linear interpolation between 1024 phases) and
//! rounds its output to 16 bits. Its transition band is much wider: attenuation starts near
//! 6 kHz and some content above 8 kHz aliases back. So the two agree closely in the mel bins
//! below ~5 kHz and differ in the top bins on speech with energy there. Measured on espeak-ng
//! clips (`tests/golden.rs`, `resampled_clips_match_ffmpeg_within_measured_bounds`, on the
//! normalised log-mel scale, whose values span about −0.8 … 1.5 here), max |tessel − whisper|:
//!
//! | clip | mel bins < 5 kHz | bins ≥ 5 kHz | bins < 5 kHz, frames at the clip's abrupt end | mean |
//! | --- | --- | --- | --- | --- |
//! | 22050 Hz 16-bit stereo | 0.033 | 0.27 | 0.007 | 0.0033 |
//! | 22050 Hz float mono | 0.022 | 0.24 | 0.145 | 0.0032 |
//! | 44100 Hz 16-bit mono | 0.086 | 0.14 | 0.023 | 0.0028 |
//!
//! For scale, ffmpeg's 16-bit rounding alone moves whisper's own mel by up to 0.02 on these
//! clips. Tokens on real speech should not depend on this; the end-to-end token tests use
//! 16 kHz input, where tessel's mel equals whisper's within 5e-5.

use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{
    Async, FixedAsync, Indexing, Resampler, SincInterpolationParameters, SincInterpolationType,
    WindowFunction,
};

use crate::{AudioError, SAMPLE_RATE};

/// Input frames per resampler call.
const CHUNK: usize = 1024;

/// The sinc interpolation settings (module docs).
pub fn sinc_parameters() -> SincInterpolationParameters {
    SincInterpolationParameters {
        sinc_len: 256,
        f_cutoff: None,
        oversampling_factor: 256,
        interpolation: SincInterpolationType::Cubic,
        window: WindowFunction::BlackmanHarris2,
    }
}

/// Resamples a whole mono clip at `rate` Hz to 16 kHz.
pub fn resample(samples: &[f32], rate: u32) -> Result<Vec<f32>, AudioError> {
    let mut to16k = To16k::new(rate)?;
    let mut out = Vec::new();
    out.try_reserve_exact(to16k.output_len(samples.len() as u64) + to16k.tail_len())
        .map_err(|_| AudioError::OutOfMemory {
            bytes: samples.len() * 4,
        })?;
    to16k.push(samples, &mut out)?;
    to16k.finish(&mut out)?;
    Ok(out)
}

/// A streaming resampler from one rate to 16 kHz: feed blocks with [`push`](Self::push), end
/// with [`finish`](Self::finish).
pub struct To16k {
    inner: Option<Box<Async<f32>>>,
    ratio: f64,
    chunk: Vec<f32>,
    filled: usize,
    out: Vec<f32>,
    to_trim: usize,
    frames_in: u64,
    produced: u64,
}

impl To16k {
    /// A resampler from `rate` Hz (pass-through at 16 kHz).
    pub fn new(rate: u32) -> Result<Self, AudioError> {
        let ratio = f64::from(SAMPLE_RATE) / f64::from(rate.max(1));
        let mut this = Self {
            inner: None,
            ratio,
            chunk: Vec::new(),
            filled: 0,
            out: Vec::new(),
            to_trim: 0,
            frames_in: 0,
            produced: 0,
        };
        if rate != SAMPLE_RATE {
            let inner =
                Async::<f32>::new_sinc(ratio, 1.0, &sinc_parameters(), CHUNK, 1, FixedAsync::Input)
                    .map_err(|e| AudioError::Resample(e.to_string()))?;
            this.chunk = vec![0.0; CHUNK];
            this.out = vec![0.0; inner.output_frames_max()];
            this.to_trim = inner.output_delay();
            this.inner = Some(Box::new(inner));
        }
        Ok(this)
    }

    /// Output samples for `frames_in` input samples: `ceil(frames_in · 16000 / rate)`.
    pub fn output_len(&self, frames_in: u64) -> usize {
        if self.inner.is_none() {
            return usize::try_from(frames_in).unwrap_or(usize::MAX);
        }
        (self.ratio * frames_in as f64).ceil() as usize
    }

    /// An upper bound on the samples one [`push`](Self::push) of `frames` appends.
    pub fn max_output_per_block(&self, frames: usize) -> usize {
        (self.ratio * frames as f64).ceil() as usize + self.out.len()
    }

    /// An upper bound on the samples [`finish`](Self::finish) appends.
    pub fn tail_len(&self) -> usize {
        self.to_trim + 2 * self.out.len() + CHUNK
    }

    /// Resamples `mono` and appends what is ready to `dst`.
    pub fn push(&mut self, mono: &[f32], dst: &mut Vec<f32>) -> Result<(), AudioError> {
        self.frames_in += mono.len() as u64;
        if self.inner.is_none() {
            dst.extend_from_slice(mono);
            return Ok(());
        }
        let mut rest = mono;
        while !rest.is_empty() {
            let take = rest.len().min(CHUNK - self.filled);
            self.chunk[self.filled..self.filled + take].copy_from_slice(&rest[..take]);
            self.filled += take;
            rest = &rest[take..];
            if self.filled == CHUNK {
                self.process(None, dst)?;
                self.filled = 0;
            }
        }
        Ok(())
    }

    /// Flushes the last partial chunk and the filter's delay; `dst` then holds exactly
    /// [`output_len`](Self::output_len) samples from this resampler.
    pub fn finish(mut self, dst: &mut Vec<f32>) -> Result<(), AudioError> {
        if self.inner.is_none() {
            return Ok(());
        }
        let expected = self.output_len(self.frames_in) as u64;
        if self.filled > 0 {
            self.process(Some(self.filled), dst)?;
        }
        while self.produced < expected {
            self.process(Some(0), dst)?;
        }
        let extra = usize::try_from(self.produced - expected).unwrap_or(usize::MAX);
        dst.truncate(dst.len().saturating_sub(extra));
        Ok(())
    }

    /// One resampler call on the staged chunk (`partial`: its valid length, the rest silent).
    fn process(&mut self, partial: Option<usize>, dst: &mut Vec<f32>) -> Result<(), AudioError> {
        let Some(inner) = self.inner.as_deref_mut() else {
            return Ok(());
        };
        let err = |e: &dyn std::fmt::Display| AudioError::Resample(e.to_string());
        let input = InterleavedSlice::new(&self.chunk[..], 1, CHUNK).map_err(|e| err(&e))?;
        let frames_out = self.out.len();
        let mut output =
            InterleavedSlice::new_mut(&mut self.out[..], 1, frames_out).map_err(|e| err(&e))?;
        let mut indexing = Indexing::new();
        indexing.partial_len = partial;
        let (_, written) = inner
            .process_into_buffer(&input, &mut output, Some(&indexing))
            .map_err(|e| err(&e))?;
        let written = written.min(frames_out);
        let skip = self.to_trim.min(written);
        self.to_trim -= skip;
        dst.extend_from_slice(&self.out[skip..written]);
        self.produced += (written - skip) as u64;
        Ok(())
    }
}
