//! Voice activity detection before transcription, as faster-whisper's
//! `transcribe(vad_filter=True)`: Silero VAD ([`tessel_vad`]) gives every 32 ms window of the
//! 16 kHz audio a speech probability, `get_speech_timestamps` turns them into speech chunks,
//! the chunks are joined into one speech-only signal that is transcribed, and every segment's
//! (and word's) times are mapped back to the original audio with `SpeechTimestampsMap`
//! (`restore_speech_timestamps`).
//!
//! The detector runs once over the whole file before the first window, on a state of its own
//! (a few kilobytes, allocated per call): it is a pre-pass, not part of the session's
//! allocation-free decode.

use tessel_audio::MelError;
use tessel_vad::timestamps::{
    collect_chunks, speech_timestamps, SpeechChunk, SpeechTimestampsMap, VadOptions,
};
use tessel_vad::Vad;

use super::{Segment, TranscribeError};

/// The speech of an audio signal: the speech-only samples and the map of their times back to
/// the original audio.
#[derive(Clone, Debug)]
pub struct Speech {
    /// The speech chunks' samples, joined.
    pub samples: Vec<f32>,
    /// Speech-only times to the original audio's.
    pub map: SpeechTimestampsMap,
    /// How many chunks of speech were found.
    pub chunks: usize,
}

/// Samples per second of the audio the detector and Whisper read.
const SAMPLE_RATE: f64 = 16_000.0;

impl Speech {
    /// Runs `vad` over `samples` (16 kHz) and keeps the speech as `options` say. A NaN or
    /// infinite sample is refused, as a transcription without detection refuses it.
    pub fn find(
        vad: &Vad,
        samples: &[f32],
        options: &VadOptions,
    ) -> Result<Speech, TranscribeError> {
        let chunks = Speech::chunks(vad, samples, options)?;
        let (pieces, _) = collect_chunks(samples, &chunks, f64::INFINITY);
        Ok(Speech {
            samples: pieces.concat(),
            map: SpeechTimestampsMap::new(&chunks, 2),
            chunks: chunks.len(),
        })
    }

    /// The speech chunks `vad` finds in `samples` (16 kHz) with `options`
    /// (faster-whisper's `get_speech_timestamps`). A NaN or infinite sample is refused.
    pub fn chunks(
        vad: &Vad,
        samples: &[f32],
        options: &VadOptions,
    ) -> Result<Vec<SpeechChunk>, TranscribeError> {
        if let Some(index) = samples.iter().position(|s| !s.is_finite()) {
            return Err(MelError::NonFinite { index }.into());
        }
        let probabilities = vad.speech_probabilities(samples)?;
        Ok(speech_timestamps(&probabilities, samples.len(), options))
    }

    /// Seconds of speech kept (faster-whisper's `duration_after_vad`).
    pub fn seconds(&self) -> f64 {
        self.samples.len() as f64 / SAMPLE_RATE
    }

    /// `segment` with its times in the original audio, as faster-whisper's
    /// `restore_speech_timestamps`: each word's start and end in the chunk its middle falls
    /// in, and the segment from its first word's start to its last word's end; a segment
    /// without words by its own start and end (the end as a chunk's end when it is one).
    pub fn restore(&self, segment: &Segment) -> Segment {
        restore(&self.map, segment)
    }
}

/// [`Speech::restore`] over the map `map`.
pub(super) fn restore(map: &SpeechTimestampsMap, segment: &Segment) -> Segment {
    let mut segment = segment.clone();
    if segment.words.is_empty() {
        if let Some(start) = map.original_time(segment.start, None, false) {
            segment.start = start;
        }
        if let Some(end) = map.original_time(segment.end, None, true) {
            segment.end = end;
        }
        return segment;
    }
    for word in &mut segment.words {
        let chunk = map.chunk_index((word.start + word.end) / 2.0, false);
        if let Some(start) = map.original_time(word.start, chunk, false) {
            word.start = start;
        }
        if let Some(end) = map.original_time(word.end, chunk, false) {
            word.end = end;
        }
    }
    if let (Some(first), Some(last)) = (segment.words.first(), segment.words.last()) {
        (segment.start, segment.end) = (first.start, last.end);
    }
    segment
}
