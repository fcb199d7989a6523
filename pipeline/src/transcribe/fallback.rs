//! Temperature fallback: when a window's decoding looks wrong, decode it again hotter.
//!
//! The reference's rule (openai-whisper's `decode_with_fallback`, as faster-whisper writes it):
//! for each temperature in turn (0, 0.2, …, 1.0), decode (beam search or greedy at 0; `best_of`
//! samples, keeping the best, above 0) and judge the result:
//! - **too repetitive**: the compression ratio of its text, `len(utf8) / len(zlib(utf8))`, is
//!   above `compression_ratio_threshold` (2.4);
//! - **too unlikely**: its average log-probability, `sum_logprob / (tokens + 1)`, is below
//!   `logprob_threshold` (−1);
//! - but **silence** (no-speech probability above `no_speech_threshold` *and* too unlikely)
//!   is accepted as it is: the caller skips the window.
//!
//! The first result judged fine is kept. When every temperature fails, the result with the
//! highest average log-probability among those not too repetitive (or among all, if every one
//! is) is kept, reported at the last temperature (faster-whisper's choice; openai-whisper keeps
//! the last result).
//!
//! The compression ratio uses zlib at its default level 6 (`zlib.compress`) through `flate2`
//! over the system zlib, so it equals the reference's exactly; the compressor and its output
//! buffer are set up once and reset per use.

use flate2::{Compress, Compression, FlushCompress, Status};

/// The thresholds of the rule (each `None` disables its test).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// Fall back above this compression ratio (2.4).
    pub compression_ratio: Option<f64>,
    /// Fall back below this average log-probability (−1).
    pub logprob: Option<f64>,
    /// A window whose no-speech probability is above this (0.6) and whose average
    /// log-probability is below `logprob` is silence.
    pub no_speech: Option<f64>,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            compression_ratio: Some(2.4),
            logprob: Some(-1.0),
            no_speech: Some(0.6),
        }
    }
}

/// What the rule needs to know of one decoding.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Judged {
    /// `sum_logprob / (tokens + 1)`.
    pub avg_logprob: f64,
    /// Compression ratio of the decoded text.
    pub compression_ratio: f64,
    /// Probability of `<|nospeech|>` at the `<|startoftranscript|>` row.
    pub no_speech_prob: f64,
}

impl Thresholds {
    /// Whether a decoding is too repetitive.
    pub fn too_repetitive(&self, r: &Judged) -> bool {
        self.compression_ratio
            .is_some_and(|limit| r.compression_ratio > limit)
    }

    /// Whether a decoding needs another temperature.
    pub fn needs_fallback(&self, r: &Judged) -> bool {
        let unlikely = self.logprob.is_some_and(|limit| r.avg_logprob < limit);
        let silence = unlikely && self.no_speech.is_some_and(|limit| r.no_speech_prob > limit);
        (self.too_repetitive(r) || unlikely) && !silence
    }

    /// Whether a window is skipped as silence: its no-speech probability is above the
    /// threshold and its average log-probability is not above `logprob`.
    pub fn is_silence(&self, r: &Judged) -> bool {
        let quiet = self.no_speech.is_some_and(|limit| r.no_speech_prob > limit);
        let confident = self.logprob.is_some_and(|limit| r.avg_logprob > limit);
        quiet && !confident
    }
}

/// Which of the failed decodings (`judged[i]`, one per temperature tried) to keep when every
/// temperature failed: the best average log-probability among those not too repetitive, or
/// among all if none is (the first on ties, as Python's `max`).
pub fn pick_after_failures(thresholds: &Thresholds, judged: &[Judged]) -> Option<usize> {
    let best = |keep: &dyn Fn(&Judged) -> bool| {
        let mut best: Option<usize> = None;
        for (i, r) in judged.iter().enumerate().filter(|(_, r)| keep(r)) {
            if best.is_none_or(|b| r.avg_logprob > judged[b].avg_logprob) {
                best = Some(i);
            }
        }
        best
    };
    best(&|r| !thresholds.too_repetitive(r)).or_else(|| best(&|_| true))
}

/// zlib compression for the ratio, set up once.
pub struct Compressor {
    zlib: Compress,
    out: Vec<u8>,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor").finish_non_exhaustive()
    }
}

impl Default for Compressor {
    fn default() -> Compressor {
        Compressor::new()
    }
}

impl Compressor {
    /// A zlib stream at level 6 and an output buffer for texts up to a few kB (it grows, once,
    /// for longer ones).
    pub fn new() -> Compressor {
        Compressor {
            zlib: Compress::new(Compression::new(6), true),
            out: Vec::with_capacity(1 << 14),
        }
    }

    /// `len(text) / len(zlib.compress(text))` of the UTF-8 bytes of `text` (0 for empty
    /// text, whose compressed form is never empty).
    pub fn ratio(&mut self, text: &str) -> f64 {
        let bytes = text.as_bytes();
        // zlib's bound for one-shot compression: the input plus 0.1 % plus a header.
        let bound = bytes.len() + bytes.len() / 1000 + 64;
        if self.out.capacity() < bound {
            self.out.reserve(bound);
        }
        self.zlib.reset();
        self.out.clear();
        loop {
            let consumed = (self.zlib.total_in() as usize).min(bytes.len());
            let input = &bytes[consumed..];
            match self
                .zlib
                .compress_vec(input, &mut self.out, FlushCompress::Finish)
            {
                Ok(Status::StreamEnd) | Err(_) => break,
                // Out of room (never with the bound above): more, and go on.
                Ok(_) => self.out.reserve(self.out.capacity().max(64)),
            }
        }
        bytes.len() as f64 / self.out.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(avg_logprob: f64, compression_ratio: f64, no_speech_prob: f64) -> Judged {
        Judged {
            avg_logprob,
            compression_ratio,
            no_speech_prob,
        }
    }

    #[test]
    fn the_rule_as_the_reference_states_it() {
        let t = Thresholds::default();
        assert!(!t.needs_fallback(&judged(-0.5, 1.8, 0.1)));
        assert!(t.needs_fallback(&judged(-0.5, 2.5, 0.1)), "repetitive");
        assert!(t.needs_fallback(&judged(-1.5, 1.8, 0.1)), "unlikely");
        assert!(!t.needs_fallback(&judged(-1.5, 1.8, 0.7)), "silence");
        assert!(
            t.needs_fallback(&judged(-0.5, 2.5, 0.7)),
            "repetitive speech"
        );
        assert!(t.is_silence(&judged(-1.5, 1.0, 0.7)));
        assert!(!t.is_silence(&judged(-0.5, 1.0, 0.7)), "confident");
        let off = Thresholds {
            compression_ratio: None,
            logprob: None,
            no_speech: None,
        };
        assert!(!off.needs_fallback(&judged(-9.0, 9.0, 1.0)));
        assert!(!off.is_silence(&judged(-9.0, 9.0, 1.0)));
        // Without a log-probability threshold, a quiet window is silence.
        let quiet = Thresholds { logprob: None, ..t };
        assert!(quiet.is_silence(&judged(-0.1, 1.0, 0.9)));
    }

    #[test]
    fn failures_keep_the_most_likely_non_repetitive_result() {
        let t = Thresholds::default();
        let tried = [
            judged(-1.2, 3.0, 0.0),
            judged(-1.5, 1.0, 0.0),
            judged(-1.1, 1.0, 0.0),
            judged(-1.1, 1.0, 0.0),
        ];
        assert_eq!(pick_after_failures(&t, &tried), Some(2));
        let all_repetitive = [judged(-1.2, 3.0, 0.0), judged(-0.2, 2.6, 0.0)];
        assert_eq!(pick_after_failures(&t, &all_repetitive), Some(1));
        assert_eq!(pick_after_failures(&t, &[]), None);
    }

    #[test]
    fn compression_ratio_is_zlibs() {
        let mut c = Compressor::new();
        // zlib.compress(b"") is 8 bytes; b"a" * 100 compresses to 12 (zlib 1.2.13, level 6).
        assert_eq!(c.ratio(""), 0.0);
        assert_eq!(c.ratio(&"a".repeat(100)), 100.0 / 12.0);
        let text = "The quick brown fox jumps over the lazy dog.";
        assert!(c.ratio(text) < 1.0);
        assert_eq!(
            c.ratio(&"a".repeat(100)),
            100.0 / 12.0,
            "reset between uses"
        );
    }
}
