//! What the transcription goldens share: the fixtures' folder, and faster-whisper's segments
//! with their words and how a transcribed segment is held to one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tessel_audio::{load_wav, ReadOptions};
use tessel_pipeline::transcribe::Segment;

/// `tests/transcribe/`: the models, clip.wav and the references.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/transcribe")
}

/// clip.wav, each copy followed by `gap_samples` zeros, `repeats` times, as the reference
/// scripts build the long audio.
pub fn long_audio(repeats: usize, gap_samples: usize) -> Vec<f32> {
    let clip = load_wav(&root().join("clip.wav"), &ReadOptions::default()).unwrap();
    let mut audio = Vec::new();
    for _ in 0..repeats {
        audio.extend_from_slice(&clip.samples);
        audio.extend(std::iter::repeat_n(0.0, gap_samples));
    }
    audio
}

/// A reference over the long audio: how it was built ([`long_audio`], `samples` long) and
/// faster-whisper's runs over it, by name.
#[derive(Debug, Deserialize)]
pub struct LongRuns<R> {
    pub repeats: usize,
    pub gap_samples: usize,
    pub samples: usize,
    pub runs: BTreeMap<String, R>,
}

impl<R> LongRuns<R> {
    /// The long audio the runs transcribed.
    pub fn audio(&self) -> Vec<f32> {
        let audio = long_audio(self.repeats, self.gap_samples);
        assert_eq!(audio.len(), self.samples);
        audio
    }
}

/// A segment faster-whisper gave, with its words (`word, start, end, probability`) when it
/// timed them.
#[derive(Debug, Deserialize)]
pub struct Reference {
    pub seek: usize,
    pub start: f64,
    pub end: f64,
    pub text: String,
    pub tokens: Vec<u32>,
    #[serde(default)]
    pub words: Option<Vec<(String, f64, f64, f64)>>,
}

/// A word's times: both sides round to 2 decimals.
const WORD_SECONDS: f64 = 0.01;

/// A word's probability, relative: CTranslate2 runs the weights in `f32` as tessel does, but
/// in another order of operations; a probability's relative error is about its logit's
/// absolute error.
const PROB_TOLERANCE: f64 = 1e-3;

pub fn prob_close(got: f64, want: f64) -> bool {
    (got - want).abs() <= PROB_TOLERANCE * want.abs() + 1e-9
}

/// `got` against `want`: seek, tokens and text identical; bounds within `bounds` seconds;
/// every word's text identical, its times within 10 ms and its probability within 0.1 %.
pub fn check_segment(at: &str, got: &Segment, want: &Reference, bounds: f64) {
    assert_eq!(got.seek, want.seek, "{at}");
    assert_eq!(got.tokens, want.tokens, "{at}");
    assert_eq!(got.text, want.text, "{at}");
    let close = |g: f64, w: f64, bound: f64| (g - w).abs() <= bound + 1e-9;
    assert!(
        close(got.start, want.start, bounds) && close(got.end, want.end, bounds),
        "{at}: {:?} vs {:?}",
        (got.start, got.end),
        (want.start, want.end)
    );
    let expected = want.words.as_deref().unwrap_or_default();
    let words: Vec<&str> = got.words.iter().map(|w| w.word.as_str()).collect();
    let want_words: Vec<&str> = expected.iter().map(|w| w.0.as_str()).collect();
    assert_eq!(words, want_words, "{at}: words");
    for (word, (_, start, end, probability)) in got.words.iter().zip(expected) {
        assert!(
            close(word.start, *start, WORD_SECONDS) && close(word.end, *end, WORD_SECONDS),
            "{at}: {word:?} vs {start} {end}"
        );
        assert!(
            prob_close(word.probability, *probability),
            "{at}: {word:?} vs {probability}"
        );
    }
}

/// A segment faster-whisper gave with its decoding figures.
#[derive(Debug, Deserialize)]
pub struct Figures {
    #[serde(flatten)]
    pub segment: Reference,
    pub temperature: f32,
    pub avg_logprob: f64,
    pub compression_ratio: f64,
    pub no_speech_prob: f64,
}

/// `got` against `want` as [`check_segment`] holds it, and its figures: temperature and
/// compression ratio identical (up to the reference's float parsing), average log-probability
/// within 2e-4 and no-speech probability within 1e-4 (CTranslate2 sums in another order).
pub fn check_figures(at: &str, got: &Segment, want: &Figures, bounds: f64) {
    check_segment(at, got, &want.segment, bounds);
    assert_eq!(got.temperature, want.temperature, "{at}");
    let ratio = (got.compression_ratio, want.compression_ratio);
    assert!(
        (ratio.0 - ratio.1).abs() <= 1e-12 * ratio.1.abs().max(1.0),
        "{at}: compression ratio {} vs {}",
        ratio.0,
        ratio.1
    );
    assert!(
        (got.avg_logprob - want.avg_logprob).abs() < 2e-4,
        "{at}: avg_logprob {} vs {}",
        got.avg_logprob,
        want.avg_logprob
    );
    assert!(
        (got.no_speech_prob - want.no_speech_prob).abs() < 1e-4,
        "{at}: no_speech_prob {} vs {}",
        got.no_speech_prob,
        want.no_speech_prob
    );
}
