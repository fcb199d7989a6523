//! The chunks a batched transcription decodes, as faster-whisper's batched `transcribe` cuts
//! them: the speech the detector finds packed into pieces of at most 30 s
//! (`collect_chunks`), the caller's clips (`clip_timestamps`, in seconds), or the whole audio
//! when it is shorter than 30 s and the detector is off.

use tessel_vad::timestamps::{collect_chunks, SpeechChunk, SpeechTimestampsMap};
use tessel_vad::Vad;

use super::BatchedOptions;
use crate::transcribe::speech::Speech;
use crate::transcribe::{TranscribeError, TranscribeOptions};

/// Samples per second.
const RATE: f64 = 16_000.0;
/// The longest chunk, seconds (faster-whisper's `chunk_length`).
pub(super) const CHUNK_SECONDS: f64 = 30.0;

/// One chunk: its samples and its place in the speech-only timeline.
#[derive(Clone, Debug, Default)]
pub(super) struct Chunk {
    pub(super) samples: Vec<f32>,
    /// Seconds before it in the speech-only audio (the clip's start for clips).
    pub(super) offset: f64,
    /// Its length, seconds (a clip's nominal length, even past the audio's end).
    pub(super) duration: f64,
}

/// The chunks of an audio and how their times map back to it.
#[derive(Debug, Default)]
pub(super) struct Chunks {
    pub(super) chunks: Vec<Chunk>,
    /// Speech-only times to the audio's (`None` for the caller's clips: their times are the
    /// audio's already).
    pub(super) map: Option<SpeechTimestampsMap>,
    /// Seconds transcribed: the speech chunks', or the clips', summed (faster-whisper's
    /// `duration_after_vad`).
    pub(super) seconds: f64,
}

/// Cuts `samples` as faster-whisper's batched `transcribe` does for `options` and
/// `batched`: the clips when `options.clip_timestamps` holds any (pairs of seconds), else
/// the speech `vad` finds (`batched.vad_filter`), else the whole audio when shorter than 30 s.
pub(super) fn cut(
    samples: &[f32],
    options: &TranscribeOptions,
    batched: &BatchedOptions,
    vad: Option<&Vad>,
) -> Result<Chunks, TranscribeError> {
    if !options.clip_timestamps.is_empty() {
        return clips(samples, &options.clip_timestamps);
    }
    let speech = if batched.vad_filter {
        let Some(vad) = vad else {
            return Err(TranscribeError::BadOption(
                "batched transcription with voice activity detection needs the Silero VAD \
                 model (or turn the detector off for audio under 30 s)"
                    .into(),
            ));
        };
        Speech::chunks(vad, samples, &batched.vad)?
    } else if (samples.len() as f64 / RATE) < CHUNK_SECONDS {
        vec![SpeechChunk {
            start: 0,
            end: samples.len(),
        }]
    } else {
        return Err(TranscribeError::BadOption(
            "audio of 30 s or more needs voice activity detection or clip timestamps to be \
             cut into chunks"
                .into(),
        ));
    };
    let (pieces, metadata) = collect_chunks(samples, &speech, CHUNK_SECONDS);
    let chunks = pieces
        .into_iter()
        .zip(metadata)
        .map(|(samples, meta)| Chunk {
            samples,
            offset: meta.offset,
            duration: meta.duration,
        })
        .collect();
    let samples_kept: usize = speech.iter().map(|c| c.end - c.start).sum();
    Ok(Chunks {
        chunks,
        map: Some(SpeechTimestampsMap::new(&speech, 2)),
        seconds: samples_kept as f64 / RATE,
    })
}

/// The caller's clips (`start, end, …` seconds): each bound to a sample by truncation, the
/// audio clamped to the signal, the duration not.
fn clips(samples: &[f32], times: &[f64]) -> Result<Chunks, TranscribeError> {
    if !times.len().is_multiple_of(2) {
        return Err(TranscribeError::BadOption(
            "batched transcription takes clip timestamps as start, end pairs".into(),
        ));
    }
    let mut chunks = Vec::with_capacity(times.len() / 2);
    let mut kept = 0usize;
    for pair in times.chunks_exact(2) {
        // Python's int(t * 16000) for t ≥ 0 (checked by the options).
        let (start, end) = ((pair[0] * RATE) as usize, (pair[1] * RATE) as usize);
        if end < start {
            return Err(TranscribeError::BadOption(format!(
                "clip {}–{} s ends before it starts",
                pair[0], pair[1]
            )));
        }
        let audio = &samples[start.min(samples.len())..end.min(samples.len())];
        chunks.push(Chunk {
            samples: audio.to_vec(),
            offset: start as f64 / RATE,
            duration: (end - start) as f64 / RATE,
        });
        kept += end - start;
    }
    Ok(Chunks {
        chunks,
        map: None,
        seconds: kept as f64 / RATE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clips_truncate_to_samples_and_keep_their_nominal_length() {
        let samples = vec![0.25f32; 16_000 * 3];
        let chunks = clips(&samples, &[0.5, 1.0, 2.0, 4.0]).expect("clips");
        assert!(chunks.map.is_none());
        assert_eq!(chunks.chunks.len(), 2);
        assert_eq!(chunks.chunks[0].samples.len(), 8000);
        assert_eq!(
            (chunks.chunks[1].offset, chunks.chunks[1].duration),
            (2.0, 2.0)
        );
        // The audio ends at 3 s; the clip keeps its 2 s.
        assert_eq!(chunks.chunks[1].samples.len(), 16_000);
        assert_eq!(chunks.seconds, 2.5);
        assert!(clips(&samples, &[1.0]).is_err());
        assert!(clips(&samples, &[2.0, 1.0]).is_err());
    }

    #[test]
    fn short_audio_without_the_detector_is_one_chunk_and_long_audio_is_refused() {
        let options = TranscribeOptions::default();
        let batched = BatchedOptions {
            vad_filter: false,
            ..BatchedOptions::default()
        };
        let short = vec![0.0f32; 16_000 * 29];
        let chunks = cut(&short, &options, &batched, None).expect("short");
        assert_eq!(chunks.chunks.len(), 1);
        assert_eq!(chunks.chunks[0].duration, 29.0);
        assert!(chunks.map.is_some());
        let long = vec![0.0f32; 16_000 * 30];
        assert!(cut(&long, &options, &batched, None).is_err());
        let with_vad = BatchedOptions::default();
        assert!(cut(&short, &options, &with_vad, None).is_err());
    }
}
