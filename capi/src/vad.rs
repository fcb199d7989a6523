//! `tessel_vad_options`: voice activity detection before a transcription, as faster-whisper's
//! `transcribe(vad_filter=True, vad_parameters=...)`. Silero VAD v6 (built into the library)
//! finds the speech; the speech alone is transcribed and every segment's times are mapped back
//! to the original audio ([`Speech`]).

use tessel_kernels::Isa;
use tessel_pipeline::transcribe::{open_vad, Speech, TranscribeError, Vad, VadOptions};

use crate::status::{tessel_status, Error};

/// Voice activity detection before transcribing (faster-whisper's `vad_filter` and its
/// `VadOptions`, same defaults). Start from `tessel_transcribe_options_default()`, whose `vad`
/// is off, or from `tessel_transcribe_options_batched()`, whose `vad` is on with the batched
/// pipeline's defaults (speech chunks of at most 30 s, silences from 160 ms). With
/// `tessel_transcribe_options.batch_size` above 0, `enabled` cuts the audio into the chunks
/// the batches decode, and speech chunks longer than 30 s are always split at 30 s
/// (`max_speech_duration_s` is capped at 30).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct tessel_vad_options {
    /// Transcribe only the speech Silero VAD finds (default false).
    pub enabled: bool,
    /// A 32 ms window is speech when its probability is at least this, in [0, 1] (default 0.5).
    pub threshold: f64,
    /// A window below this is silence, in [0, 1]; negative (the default, -1) for
    /// `max(threshold - 0.15, 0.01)`.
    pub neg_threshold: f64,
    /// Speech chunks this short or shorter are dropped, milliseconds (default 0).
    pub min_speech_duration_ms: u64,
    /// Longer chunks are split, seconds, above 0; `INFINITY` (the default) for no limit.
    pub max_speech_duration_s: f64,
    /// Silence that ends a chunk, milliseconds (default 2000).
    pub min_silence_duration_ms: u64,
    /// Padding on each side of a chunk, milliseconds (default 400).
    pub speech_pad_ms: u64,
}

impl Default for tessel_vad_options {
    fn default() -> Self {
        tessel_vad_options::from(&VadOptions::default())
    }
}

impl From<&VadOptions> for tessel_vad_options {
    /// The detector's `options`, detection off.
    fn from(options: &VadOptions) -> Self {
        tessel_vad_options {
            enabled: false,
            threshold: options.threshold,
            neg_threshold: options.neg_threshold.unwrap_or(-1.0),
            min_speech_duration_ms: options.min_speech_duration_ms,
            max_speech_duration_s: options.max_speech_duration_s,
            min_silence_duration_ms: options.min_silence_duration_ms,
            speech_pad_ms: options.speech_pad_ms,
        }
    }
}

impl tessel_vad_options {
    /// The detector's options when detection is on, checked (`TESSEL_ERR_ARGUMENT` when out of
    /// range); `None` when it is off.
    pub(crate) fn checked(&self) -> Result<Option<VadOptions>, Error> {
        if !self.enabled {
            return Ok(None);
        }
        let options = VadOptions {
            threshold: self.threshold,
            neg_threshold: (self.neg_threshold >= 0.0 || self.neg_threshold.is_nan())
                .then_some(self.neg_threshold),
            min_speech_duration_ms: self.min_speech_duration_ms,
            max_speech_duration_s: self.max_speech_duration_s,
            min_silence_duration_ms: self.min_silence_duration_ms,
            speech_pad_ms: self.speech_pad_ms,
        };
        options
            .check()
            .map_err(|e| Error::boxed(tessel_status::TESSEL_ERR_ARGUMENT, e))?;
        Ok(Some(options))
    }
}

/// A transcriber's detector, opened at its first use.
pub(crate) struct Detector {
    isa: Isa,
    vad: Option<Vad>,
}

impl Detector {
    /// A detector whose kernels will run at `isa`, not opened yet.
    pub(crate) fn new(isa: Isa) -> Detector {
        Detector { isa, vad: None }
    }

    /// The speech of `samples` as `options` keep it (the built-in model opened at the first
    /// call).
    pub(crate) fn speech(
        &mut self,
        samples: &[f32],
        options: &VadOptions,
    ) -> Result<Speech, TranscribeError> {
        Speech::find(self.vad()?, samples, options)
    }

    /// The detector, the built-in model opened at the first call (a batched transcription
    /// finds its speech chunks with it).
    pub(crate) fn vad(&mut self) -> Result<&Vad, TranscribeError> {
        Ok(match &mut self.vad {
            Some(vad) => vad,
            slot => slot.insert(open_vad(None)?.with_isa(self.isa)),
        })
    }
}
