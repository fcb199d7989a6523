//! What a transcription takes and gives: its options (and their checks), its results (segments,
//! timings, the transcript) and its errors.

use std::path::PathBuf;
use std::time::Duration;

use tessel_audio::{AudioError, MelError};
use tessel_model::load::ct2::Ct2Error;
use tessel_model::load::directory::OpenError;
use tessel_model::{LoadError, RunError, SessionError};
use tessel_text::whisper::{Task, WhisperTokenizer};
use tessel_text::TextError;
use thiserror::Error;

use super::fallback::Thresholds;

/// Why a transcription could not be made.
#[derive(Debug, Error)]
pub enum TranscribeError {
    /// The model directory lacks what a Whisper model needs.
    #[error("model directory {dir}: {reason}")]
    ModelDir {
        /// The directory.
        dir: PathBuf,
        /// What is missing or wrong.
        reason: String,
    },
    /// The model path could not be opened (missing, not a model, an unknown type, a damaged
    /// file).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The model is not a Whisper model, or does not fit its tokenizer.
    #[error("not a usable Whisper model: {0}")]
    NotWhisper(String),
    /// Hugging Face weights could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A CTranslate2 directory could not be loaded.
    #[error(transparent)]
    Ct2(#[from] Ct2Error),
    /// The tokenizer refused its file or a text.
    #[error(transparent)]
    Text(#[from] TextError),
    /// The audio could not be read.
    #[error(transparent)]
    Audio(#[from] AudioError),
    /// The mel front end refused the audio.
    #[error(transparent)]
    Mel(#[from] MelError),
    /// The audio holds less than one mel frame (10 ms).
    #[error(
        "the audio holds fewer than 160 samples (10 ms at 16 kHz), the minimum: one mel frame"
    )]
    EmptyAudio,
    /// The session could not be created.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A model call was refused.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The voice activity detector refused its model or the audio.
    #[error(transparent)]
    Vad(#[from] tessel_vad::VadError),
    /// An option is out of range.
    #[error("invalid option: {0}")]
    BadOption(String),
    /// The observer asked to stop ([`Observer::stop`](super::Observer::stop)).
    #[error("the transcription was stopped")]
    Stopped,
}

/// How to transcribe (the reference's defaults: [`TranscribeOptions::default`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TranscribeOptions {
    /// Transcribe or translate to English (multilingual models only).
    pub task: Task,
    /// Spoken language (code or English name); `None` detects it (multilingual models).
    pub language: Option<String>,
    /// Beam width at temperature 0 (1: greedy).
    pub beam: usize,
    /// Samples drawn per window above temperature 0.
    pub best_of: usize,
    /// The fallback temperatures, in order.
    pub temperatures: Vec<f32>,
    /// The fallback and silence thresholds.
    pub thresholds: Thresholds,
    /// Prompt each window with the text so far.
    pub condition_on_previous_text: bool,
    /// Reset the conditioning text after a window decoded above this temperature.
    pub prompt_reset_on_temperature: f32,
    /// Text to condition the first window on.
    pub initial_prompt: Option<String>,
    /// Token ids to condition the first window on (faster-whisper's `initial_prompt` as an
    /// iterable of ids); not with `initial_prompt`.
    pub initial_prompt_tokens: Option<Vec<u32>>,
    /// Hint phrases: every window's prompt starts `<|startofprev|>` and their tokens (at most
    /// 223), before the previous text, except the first window's when it has a `prefix`.
    pub hotwords: Option<String>,
    /// Text the decoding of the window at 0 starts with (after `<|0.00|>` with timestamps):
    /// its tokens (at most 223) are forced, each adding 0 to the score, and are part of the
    /// window's tokens; the timestamp rules start after them, as CTranslate2's.
    pub prefix: Option<String>,
    /// Repetition penalty θ over each hypothesis's tokens so far (CTranslate2's: logits of
    /// tokens already generated divided by θ when positive, multiplied when negative); 1 is
    /// off.
    pub repetition_penalty: f32,
    /// Never repeat an n-gram of this size within a window's decoding; 0 is off.
    pub no_repeat_ngram_size: usize,
    /// Tokens a window's decoding may add to its prompt (faster-whisper's `max_new_tokens`:
    /// CTranslate2 then decodes at most half of prompt plus this); `None`: up to
    /// `sample_len`. Prompt plus this must fit the model's target positions.
    pub max_new_tokens: Option<usize>,
    /// Tokens never generated, as faster-whisper takes them: `-1` stands for the model's
    /// non-speech symbols; a non-empty list also suppresses the special tokens (transcribe,
    /// translate, start of transcript, of previous text, of LM, no speech); an empty list
    /// suppresses nothing. Default `[-1]`.
    pub suppress_tokens: Vec<i64>,
    /// The stretches transcribed, in seconds: start, end, start, end, … (an odd count's last
    /// stretch runs to the end), each rounded to 10 ms frames; windows never cross a stretch's
    /// end (faster-whisper's `clip_timestamps`). Empty: the whole audio.
    pub clip_timestamps: Vec<f64>,
    /// Predict timestamps (segments within windows); `false` adds `<|notimestamps|>`.
    pub timestamps: bool,
    /// Latest first timestamp, in seconds.
    pub max_initial_timestamp: f64,
    /// Suppress `" "` and `<|endoftext|>` as the first token.
    pub suppress_blank: bool,
    /// Length penalty `α` of the score `sum_logprob / len^α`.
    pub length_penalty: f32,
    /// Beam search patience: a window's search goes on until `round(beam · patience)`
    /// hypotheses have finished (faster-whisper's `patience`; 1 stops at `beam`).
    pub patience: f32,
    /// Seed of the sampling at fallback temperatures.
    pub seed: u64,
    /// Most tokens decoded per window.
    pub sample_len: usize,
    /// Time every word ([`Segment::words`]); needs a session made for it
    /// ([`Transcriber::session_with_words`](super::Transcriber::session_with_words)).
    pub word_timestamps: bool,
    /// With word timestamps: punctuation merged into the following word.
    pub prepend_punctuations: String,
    /// With word timestamps: punctuation merged into the previous word.
    pub append_punctuations: String,
    /// With word timestamps: skip silences longer than this many seconds around a likely
    /// hallucination (faster-whisper's `hallucination_silence_threshold`; `None`: off). Without
    /// word timestamps it does nothing, as in faster-whisper.
    pub hallucination_silence_threshold: Option<f64>,
}

impl Default for TranscribeOptions {
    fn default() -> TranscribeOptions {
        TranscribeOptions {
            task: Task::Transcribe,
            language: None,
            beam: 5,
            best_of: 5,
            temperatures: vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
            thresholds: Thresholds::default(),
            condition_on_previous_text: true,
            prompt_reset_on_temperature: 0.5,
            initial_prompt: None,
            initial_prompt_tokens: None,
            hotwords: None,
            prefix: None,
            repetition_penalty: 1.0,
            no_repeat_ngram_size: 0,
            max_new_tokens: None,
            suppress_tokens: vec![-1],
            clip_timestamps: Vec::new(),
            timestamps: true,
            max_initial_timestamp: 1.0,
            suppress_blank: true,
            length_penalty: 1.0,
            patience: 1.0,
            seed: 0,
            sample_len: 224,
            word_timestamps: false,
            prepend_punctuations: super::words::PREPEND_PUNCTUATIONS.to_owned(),
            append_punctuations: super::words::APPEND_PUNCTUATIONS.to_owned(),
            hallucination_silence_threshold: None,
        }
    }
}

/// One timed piece of the transcript.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// The window it was decoded in (its first mel frame).
    pub seek: usize,
    /// Start, seconds.
    pub start: f64,
    /// End, seconds.
    pub end: f64,
    /// Its text.
    pub text: String,
    /// Its tokens (timestamps included).
    pub tokens: Vec<u32>,
    /// The temperature its window was decoded at.
    pub temperature: f32,
    /// Its window's average log-probability.
    pub avg_logprob: f64,
    /// Its window's compression ratio.
    pub compression_ratio: f64,
    /// Its window's no-speech probability.
    pub no_speech_prob: f64,
    /// Its words with their times, with word timestamps (empty otherwise).
    pub words: Vec<super::words::Word>,
}

/// Time spent and work done.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Audio length, seconds.
    pub audio_seconds: f64,
    /// Windows decoded.
    pub windows: usize,
    /// Log-mel spectrogram.
    pub mel: Duration,
    /// Encoder passes (one per window): the front end, the blocks and the final norm.
    pub encode: Duration,
    /// Projections of the encoder output to every decoder layer's cross-attention K/V (one per
    /// window).
    pub cross_kv: Duration,
    /// Decoder passes (prompts and generated tokens).
    pub decode: Duration,
    /// Tokens generated (all decodings, fallbacks included).
    pub tokens: usize,
    /// With word timestamps: the forced decoder passes over each window's text and their
    /// alignments.
    pub align: Duration,
}

/// A transcription.
#[derive(Clone, Debug, PartialEq)]
pub struct Transcript {
    /// The language decoded (code).
    pub language: String,
    /// The probability of the detected language: the softmax over the language tokens'
    /// logits after `<|startoftranscript|>` on the first window, as openai-whisper's and
    /// CTranslate2's `detect_language` give it; 1 when the language was given or the model is
    /// English-only.
    pub language_probability: f64,
    /// The segments in time order.
    pub segments: Vec<Segment>,
    /// Timings.
    pub stats: Stats,
}

impl Transcript {
    /// The segments' texts joined, as the reference's `text`.
    pub fn text(&self) -> String {
        self.segments.iter().map(|s| s.text.as_str()).collect()
    }
}

impl TranscribeOptions {
    /// Refuses options a session planned for beams up to `max_beam` cannot run, for a
    /// `multilingual` model or an English-only one.
    pub(super) fn check(
        &self,
        max_beam: usize,
        multilingual: bool,
        tokenizer: &WhisperTokenizer,
    ) -> Result<(), TranscribeError> {
        let bad = |what: &str| Err(TranscribeError::BadOption(what.to_owned()));
        if self.beam == 0 || self.beam > max_beam {
            return bad(&format!("beam {} outside 1..={max_beam}", self.beam));
        }
        if self.best_of == 0 {
            return bad("best_of must be positive");
        }
        if self.temperatures.is_empty()
            || self
                .temperatures
                .iter()
                .any(|t| !(t.is_finite() && *t >= 0.0))
        {
            return bad("temperatures must be a non-empty list of finite values ≥ 0");
        }
        if self.sample_len == 0 {
            return bad("sample_len must be positive");
        }
        if !self.length_penalty.is_finite() || !self.max_initial_timestamp.is_finite() {
            return bad("length_penalty and max_initial_timestamp must be finite");
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad("repetition_penalty must be finite and positive");
        }
        if self
            .hallucination_silence_threshold
            .is_some_and(|t| !t.is_finite())
        {
            return bad("hallucination_silence_threshold must be finite");
        }
        if !(self.patience.is_finite() && self.patience > 0.0) {
            return bad("patience must be finite and positive");
        }
        if self.beam > 1 && (self.beam as f32 * self.patience).round() < 1.0 {
            return bad("beam_size × patience must round to at least 1");
        }
        if self.initial_prompt.is_some() && self.initial_prompt_tokens.is_some() {
            return bad("give initial_prompt as text or as token ids, not both");
        }
        let vocab = tokenizer.vocab_size();
        let out_of_range = |t: u32| t as usize >= vocab;
        if let Some(t) = self
            .initial_prompt_tokens
            .iter()
            .flatten()
            .find(|&&t| out_of_range(t))
        {
            return bad(&format!(
                "initial prompt token {t} outside the vocabulary ({vocab})"
            ));
        }
        if let Some(t) = self
            .suppress_tokens
            .iter()
            .find(|&&t| t < -1 || t >= vocab as i64)
        {
            return bad(&format!(
                "suppress_tokens: {t} is neither -1 nor a token of the vocabulary ({vocab})"
            ));
        }
        if self
            .clip_timestamps
            .iter()
            .any(|t| !(t.is_finite() && *t >= 0.0))
        {
            return bad("clip_timestamps must be finite and ≥ 0");
        }
        if !multilingual && self.task == Task::Translate {
            return bad("an English-only model cannot translate");
        }
        match &self.language {
            Some(language) => check_language(language, multilingual, tokenizer),
            None => Ok(()),
        }
    }
}

/// A language (code or English name) a model can be told: one of its vocabulary's for a
/// multilingual model, English for an English-only one.
fn check_language(
    language: &str,
    multilingual: bool,
    tokenizer: &WhisperTokenizer,
) -> Result<(), TranscribeError> {
    if multilingual {
        tokenizer.language_token(language)?;
        return Ok(());
    }
    let lower = language.to_lowercase();
    let known = tessel_text::languages::WHISPER_LANGUAGES
        .iter()
        .find(|(code, name)| *code == lower || *name == lower);
    match known {
        Some(("en", _)) => Ok(()),
        Some(_) => Err(TranscribeError::BadOption(format!(
            "language `{language}`: this model is English-only (leave the language unset, \
             or `en`)"
        ))),
        None => Err(TranscribeError::Text(TextError::UnknownLanguage {
            family: "whisper",
            code: language.to_owned(),
            examples: "en, de, zh, english, german".into(),
        })),
    }
}
