//! What one transcription carries across its windows, and how a window's segments are kept.

use tessel_text::whisper::{python_strip, WhisperTokenizer};

use super::decode::Decoded;
use super::observer::Observer;
use super::segments::Cut;
use super::types::{Segment, Stats, TranscribeError, TranscribeOptions};
use super::words::Word;

/// One transcription's state across its windows.
pub(super) struct Walk<'a> {
    pub(super) options: &'a TranscribeOptions,
    /// The start sequence every prompt holds.
    pub(super) sot_sequence: Vec<u32>,
    /// The initial prompt's tokens, then every kept segment's.
    pub(super) all_tokens: Vec<u32>,
    /// The hotwords' tokens (empty without).
    pub(super) hotwords: Vec<u32>,
    /// The tokens forced at the start of the first window: `<|0.00|>` with timestamps and the
    /// prefix's (empty without a prefix).
    pub(super) prefix: Vec<u32>,
    /// Where the text the next prompt conditions on starts in `all_tokens`.
    pub(super) reset_since: usize,
    pub(super) segments: Vec<Segment>,
    pub(super) stats: Stats,
    /// The language decoded (code).
    pub(super) language: String,
    /// The end of the last speech timed (word timestamps).
    pub(super) last_speech_timestamp: f64,
}

/// How a window was decoded, as its segments report it.
pub(super) struct WindowFigures {
    pub(super) seek: usize,
    pub(super) temperature: f32,
    pub(super) avg_logprob: f64,
    pub(super) compression_ratio: f64,
    pub(super) no_speech_prob: f64,
}

impl Walk<'_> {
    /// Keeps the window's segments (`cuts` of `decoded`'s tokens) that have text and length:
    /// each extends the conditioning text and goes to the observer as it is kept.
    pub(super) fn keep(
        &mut self,
        tok: &WhisperTokenizer,
        decoded: &Decoded,
        (cuts, words): (&[Cut], &mut [Vec<Word>]),
        figures: &WindowFigures,
        observer: &mut dyn Observer,
    ) -> Result<(), TranscribeError> {
        for (i, cut) in cuts.iter().enumerate() {
            let piece = &decoded.tokens[cut.tokens.clone()];
            let text = tok.decode(piece)?;
            if cut.start == cut.end || python_strip(&text).is_empty() {
                continue;
            }
            self.all_tokens.extend_from_slice(piece);
            self.segments.push(Segment {
                seek: figures.seek,
                start: cut.start,
                end: cut.end,
                text,
                tokens: piece.to_vec(),
                temperature: figures.temperature,
                avg_logprob: figures.avg_logprob,
                compression_ratio: figures.compression_ratio,
                no_speech_prob: figures.no_speech_prob,
                words: words.get_mut(i).map(std::mem::take).unwrap_or_default(),
            });
            if let Some(done) = self.segments.last() {
                observer.segment(done);
            }
        }
        Ok(())
    }
}
