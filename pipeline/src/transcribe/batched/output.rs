//! A decoded chunk's segments, as faster-whisper's batched `forward` makes them: the tokens
//! split at timestamp pairs from the chunk's exact offset (the unfinished tail dropped), each
//! piece kept whatever its text or length, its own compression ratio, the chunk's
//! log-probability and no-speech probability, times rounded to 1 ms, then mapped back to the
//! original audio.

use tessel_text::whisper::WhisperTokenizer;
use tessel_vad::timestamps::{python_round, SpeechTimestampsMap};

use super::chunks::Chunk;
use super::slots::Decoded;
use crate::transcribe::fallback::Compressor;
use crate::transcribe::segments::{self, Cut};
use crate::transcribe::speech;
use crate::transcribe::types::{Segment, TranscribeError};
use crate::transcribe::words::Word;

/// What every chunk's segments share.
pub(super) struct Reporting<'a> {
    pub(super) tokenizer: &'a WhisperTokenizer,
    /// The temperature segments report (the first of the options').
    pub(super) temperature: f32,
    /// Speech-only times to the audio's, when the chunks are speech the detector found.
    pub(super) map: Option<&'a SpeechTimestampsMap>,
}

/// faster-whisper's `seek` of a chunk: its offset in 10 ms frames, truncated.
pub(super) fn seek_of(chunk: &Chunk) -> usize {
    (chunk.offset * 100.0) as usize
}

/// The mel frames word timing aligns a chunk over: `ceil(duration) · 100`.
pub(super) fn size_of(chunk: &Chunk) -> usize {
    chunk.duration.ceil() as usize * 100
}

/// Splits `decoded`'s tokens into `cuts`, timed from `chunk`'s offset.
pub(super) fn split(decoded: &Decoded, chunk: &Chunk, timestamp_begin: u32, cuts: &mut Vec<Cut>) {
    let at = (chunk.offset, chunk.duration);
    segments::split_at(&decoded.tokens, timestamp_begin, at, cuts);
}

/// The segments of `cuts` (their words in `words`, taken) appended to `out`.
pub(super) fn push_segments(
    reporting: &Reporting<'_>,
    (chunk, decoded): (&Chunk, &Decoded),
    (cuts, words): (&[Cut], &mut [Vec<Word>]),
    compressor: &mut Compressor,
    out: &mut Vec<Segment>,
) -> Result<(), TranscribeError> {
    for (i, cut) in cuts.iter().enumerate() {
        let tokens = &decoded.tokens[cut.tokens.clone()];
        let text = reporting.tokenizer.decode(tokens)?;
        let segment = Segment {
            seek: seek_of(chunk),
            start: python_round(cut.start, 3),
            end: python_round(cut.end, 3),
            compression_ratio: compressor.ratio(&text),
            text,
            tokens: tokens.to_vec(),
            temperature: reporting.temperature,
            avg_logprob: decoded.avg_logprob,
            no_speech_prob: decoded.no_speech_prob,
            words: words.get_mut(i).map(std::mem::take).unwrap_or_default(),
        };
        out.push(match reporting.map {
            Some(map) => speech::restore(map, &segment),
            None => segment,
        });
    }
    Ok(())
}
