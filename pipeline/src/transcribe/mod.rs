//! Speech to text with Whisper: the reference's `transcribe` (openai-whisper's algorithm, as
//! faster-whisper runs it over CTranslate2) on tessel's sessions.
//!
//! A [`Transcriber`] holds what every user shares: the model, the tokenizer and the decoding
//! rules' token sets. Each user gets a [`TranscribeSession`]: the model's arena (planned from the
//! beam and thread counts when the session is made), the mel front end and every per-window
//! buffer. Over one file, nothing allocates per window beyond the output (the segments' text
//! and tokens): the spectrogram buffer is sized for the file before the first window.
//!
//! The algorithm, for 16 kHz samples:
//! 1. The log-mel spectrogram of the whole file (30 s of zeros appended for the clamp's
//!    maximum, as the reference pads), `content = samples / 160` frames.
//! 2. A multilingual model without `--language` detects it on the first window: the logits
//!    after `<|startoftranscript|>`, the most likely language token.
//! 3. From `seek = 0` while `seek < content`: the window `mel[seek .. seek + 3000]` (zero
//!    padded) is encoded; the prompt is `<|startofprev|>` + the last 223 tokens of the text
//!    since the last prompt reset (`--initial-prompt` first; none without
//!    `condition_on_previous_text`), then the start sequence (`<|startoftranscript|>`,
//!    language and task for multilingual models) and `<|notimestamps|>` without timestamps.
//!    The window is decoded with the decoding rules ([`WhisperRules`]) and temperature
//!    fallback ([`fallback`]); the no-speech probability is the softmax of the logits at the
//!    `<|startoftranscript|>` row (the first decoding's step-0 logits when that token ends the
//!    prompt, otherwise one prefill of the prompt up to it). A window that is silence (see
//!    [`fallback::Thresholds`]) is skipped whole; otherwise its tokens are split into timed
//!    segments and the next `seek` chosen ([`segments`]). Segments with no text or no length are dropped; the others'
//!    tokens extend the conditioning text, which is reset after a window decoded above
//!    temperature 0.5 or always without `condition_on_previous_text`.
//!
//! Decoding at temperature 0 is beam search (`beam > 1`) or greedy; above 0 it draws `best_of`
//! samples (seeded: `seed`, window and temperature fix each draw) and keeps the best by
//! length-normalised score. A window decodes at most 224 tokens and never past the model's
//! 448 positions.

pub mod fallback;
pub mod format;
mod load;
pub mod segments;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessel_audio::{content_frames, segment, AudioError, MelError, MelFrontEnd, N_FRAMES};
use tessel_kernels::Isa;
use tessel_model::ct2::Ct2Error;
use tessel_model::families::whisper::WhisperRules;
use tessel_model::{
    Hypotheses, Limits, LoadError, MemoryType, Model, RunError, Sampling, SearchOptions, Session,
    SessionError, WeightType,
};
use tessel_text::whisper::{python_strip, Task, WhisperTokenizer};
use tessel_text::TextError;
use thiserror::Error;

use fallback::{Compressor, Judged, Thresholds};
use segments::Cut;

pub use format::{render, write_header, write_segment, Format};

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
    /// An option is out of range.
    #[error("invalid option: {0}")]
    BadOption(String),
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
    /// Predict timestamps (segments within windows); `false` adds `<|notimestamps|>`.
    pub timestamps: bool,
    /// Latest first timestamp, in seconds.
    pub max_initial_timestamp: f64,
    /// Suppress `" "` and `<|endoftext|>` as the first token.
    pub suppress_blank: bool,
    /// Length penalty `α` of the score `sum_logprob / len^α`.
    pub length_penalty: f32,
    /// Seed of the sampling at fallback temperatures.
    pub seed: u64,
    /// Most tokens decoded per window.
    pub sample_len: usize,
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
            timestamps: true,
            max_initial_timestamp: 1.0,
            suppress_blank: true,
            length_penalty: 1.0,
            seed: 0,
            sample_len: 224,
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
}

/// A transcription.
#[derive(Clone, Debug, PartialEq)]
pub struct Transcript {
    /// The language decoded (code).
    pub language: String,
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

/// What a host may watch during a transcription.
pub trait Observer {
    /// Model inference starts (`true`) or stops (`false`): a host counting allocations
    /// counts between the two.
    fn inference(&mut self, _running: bool) {}
    /// `done` of `total` seconds of audio are transcribed.
    fn progress(&mut self, _done: f64, _total: f64) {}
    /// `segment` is final: it is the transcript's next segment, and no later window changes
    /// it (called outside the inference marks, so a host may print it as it comes).
    fn segment(&mut self, _segment: &Segment) {}
}

/// An observer that watches nothing.
impl Observer for () {}

/// The shared part: model, tokenizer and the rules' token sets.
pub struct Transcriber {
    model: Arc<Model<'static>>,
    tokenizer: Arc<WhisperTokenizer>,
    n_mels: usize,
    multilingual: bool,
    /// The directory says the model is English-only ([`load::english_only`]).
    english_only: bool,
    suppress: Arc<[u32]>,
    blank: Arc<[u32]>,
    cross_kv: MemoryType,
}

impl std::fmt::Debug for Transcriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcriber")
            .field("n_mels", &self.n_mels)
            .field("multilingual", &self.multilingual)
            .field("cross_kv", &self.cross_kv)
            .finish_non_exhaustive()
    }
}

/// The full multilingual vocabulary (openai-whisper and CTranslate2 call a model multilingual
/// from this size on).
const MULTILINGUAL_VOCAB: usize = 51865;

impl Transcriber {
    /// The model and tokenizer of a directory ([`load::load_dir`]), planned for beams up to
    /// `max_beam`.
    pub fn load(
        dir: &Path,
        max_beam: usize,
        weights: Option<WeightType>,
    ) -> Result<Transcriber, TranscribeError> {
        let (model, tokenizer, directory) = load::load_dir(dir, max_beam, weights)?;
        let english_only = load::english_only(&directory, &model);
        let mut transcriber = Transcriber::new(Arc::new(model), tokenizer)?;
        transcriber.english_only = english_only;
        Ok(transcriber)
    }

    /// Over a loaded model and its tokenizer; checks that they fit.
    pub fn new(
        model: Arc<Model<'static>>,
        tokenizer: WhisperTokenizer,
    ) -> Result<Transcriber, TranscribeError> {
        let config = model.config();
        let Some(n_mels) = config.front_end.n_mels() else {
            return Err(TranscribeError::NotWhisper(
                "the encoder reads tokens, not audio".into(),
            ));
        };
        if tokenizer.vocab_size() > config.tgt_vocab {
            return Err(TranscribeError::NotWhisper(format!(
                "the tokenizer has {} tokens, the model {}",
                tokenizer.vocab_size(),
                config.tgt_vocab
            )));
        }
        if config.max_src_len * 2 < N_FRAMES {
            return Err(TranscribeError::NotWhisper(format!(
                "{} encoder positions hold less than a 30 s window (1500)",
                config.max_src_len
            )));
        }
        let mut suppress = tokenizer.non_speech_tokens()?;
        suppress.extend([
            tokenizer.transcribe(),
            tokenizer.translate(),
            tokenizer.sot(),
            tokenizer.sot_prev(),
            tokenizer.sot_lm(),
            tokenizer.no_speech(),
        ]);
        suppress.sort_unstable();
        suppress.dedup();
        let blank = tokenizer.encode(" ")?;
        let multilingual =
            config.tgt_vocab >= MULTILINGUAL_VOCAB && !tokenizer.language_tokens().is_empty();
        let cross_kv = match model.generator().weight_type() {
            WeightType::F32 => MemoryType::F32,
            _ => MemoryType::F16,
        };
        Ok(Transcriber {
            model,
            tokenizer: Arc::new(tokenizer),
            n_mels,
            multilingual,
            english_only: false,
            suppress: suppress.into(),
            blank: blank.into(),
            cross_kv,
        })
    }

    /// Stores the encoder memory's cross-attention K/V as `kind` in the sessions made from now
    /// on. The default follows the weights: `f32` for `f32` weights (results as the reference
    /// computes them), `f16` for 16-bit and int8 weights (half the bytes every decoder step
    /// reads from it, rounding each value once by at most `2^-11` relative).
    pub fn with_cross_kv(mut self, kind: MemoryType) -> Transcriber {
        self.cross_kv = kind;
        self
    }

    /// How sessions store the encoder memory's cross-attention K/V.
    pub fn cross_kv(&self) -> MemoryType {
        self.cross_kv
    }

    /// Treats the model as multilingual (language and task tokens, language detection) or
    /// English-only, whatever its vocabulary size says.
    pub fn with_multilingual(mut self, multilingual: bool) -> Transcriber {
        self.multilingual = multilingual && !self.tokenizer.language_tokens().is_empty();
        self
    }

    /// [`Transcriber::with_multilingual`], refusing to treat a model as multilingual when its
    /// directory says it is English-only (its vocabulary size, CTranslate2's empty `lang_ids`,
    /// `is_multilingual: false`): such a model, prompted with language and task tokens, ends
    /// every window at once.
    pub fn try_multilingual(self, multilingual: bool) -> Result<Transcriber, TranscribeError> {
        if multilingual && self.english_only {
            return Err(TranscribeError::BadOption(
                "the model is English-only (its directory says so); it cannot be treated as \
                 multilingual"
                    .into(),
            ));
        }
        Ok(self.with_multilingual(multilingual))
    }

    /// Whether the model takes language and task tokens.
    pub fn is_multilingual(&self) -> bool {
        self.multilingual
    }

    /// The model.
    pub fn model(&self) -> &Arc<Model<'static>> {
        &self.model
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &WhisperTokenizer {
        &self.tokenizer
    }

    /// What [`Transcriber::session`] plans the arena for: a 30 s window, the model's target
    /// positions, beams up to `max_beam`, `threads` threads.
    pub fn limits(&self, max_beam: usize, threads: usize) -> Limits {
        Limits {
            max_src_len: N_FRAMES / 2,
            max_tgt_len: self.model.config().max_tgt_len,
            max_beam,
            threads,
            cross_kv: self.cross_kv,
        }
    }

    /// A session for one user: the arena for beams up to `max_beam` on `threads` threads at
    /// `isa`, and every per-window buffer.
    pub fn session(
        &self,
        isa: Isa,
        max_beam: usize,
        threads: usize,
    ) -> Result<TranscribeSession, TranscribeError> {
        let config = self.model.config();
        let limits = self.limits(max_beam, threads);
        let session = Session::with_limits(Arc::clone(&self.model), isa, limits)?;
        let max_tgt = config.max_tgt_len;
        Ok(TranscribeSession {
            session,
            tokenizer: Arc::clone(&self.tokenizer),
            multilingual: self.multilingual,
            suppress: Arc::clone(&self.suppress),
            blank: Arc::clone(&self.blank),
            mel: MelFrontEnd::new(self.n_mels)?,
            n_mels: self.n_mels,
            spectrogram: Vec::new(),
            window: vec![0.0; self.n_mels * N_FRAMES],
            prompt: Vec::with_capacity(max_tgt),
            tried: Vec::new(),
            judged: Vec::new(),
            cuts: Vec::with_capacity(max_tgt),
            compressor: Compressor::new(),
        })
    }
}

/// One decoding of a window.
#[derive(Clone, Debug, Default)]
struct Decoded {
    tokens: Vec<u32>,
    temperature: f32,
    judged: Option<Judged>,
    text: String,
}

/// One user's transcription state (see the module docs).
pub struct TranscribeSession {
    session: Session<Arc<Model<'static>>>,
    tokenizer: Arc<WhisperTokenizer>,
    multilingual: bool,
    suppress: Arc<[u32]>,
    blank: Arc<[u32]>,
    mel: MelFrontEnd,
    n_mels: usize,
    spectrogram: Vec<f32>,
    window: Vec<f32>,
    prompt: Vec<u32>,
    tried: Vec<Decoded>,
    judged: Vec<Judged>,
    cuts: Vec<Cut>,
    compressor: Compressor,
}

impl std::fmt::Debug for TranscribeSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscribeSession")
            .field("arena_bytes", &self.arena_bytes())
            .finish_non_exhaustive()
    }
}

/// The window's decoding settings that do not change with temperature.
struct WindowDecode<'a> {
    options: &'a TranscribeOptions,
    window: usize,
    /// `softmax(logits)[<|nospeech|>]` at the `<|startoftranscript|>` row; `None` until the
    /// first decoding reads it, when that row is the prompt's last (its step-0 logits).
    no_speech_prob: Option<f64>,
}

impl TranscribeSession {
    /// Bytes of the model session's arena.
    pub fn arena_bytes(&self) -> usize {
        self.session.plan().total_bytes()
    }

    fn check(&self, options: &TranscribeOptions) -> Result<(), TranscribeError> {
        let bad = |what: &str| Err(TranscribeError::BadOption(what.to_owned()));
        let max_beam = self.session.limits().max_beam;
        if options.beam == 0 || options.beam > max_beam {
            return bad(&format!("beam {} outside 1..={max_beam}", options.beam));
        }
        if options.best_of == 0 {
            return bad("best_of must be positive");
        }
        if options.temperatures.is_empty()
            || options
                .temperatures
                .iter()
                .any(|t| !(t.is_finite() && *t >= 0.0))
        {
            return bad("temperatures must be a non-empty list of finite values ≥ 0");
        }
        if options.sample_len == 0 {
            return bad("sample_len must be positive");
        }
        if !options.length_penalty.is_finite() || !options.max_initial_timestamp.is_finite() {
            return bad("length_penalty and max_initial_timestamp must be finite");
        }
        if !self.multilingual && options.task == Task::Translate {
            return bad("an English-only model cannot translate");
        }
        match &options.language {
            Some(language) => self.check_language(language),
            None => Ok(()),
        }
    }

    /// A language (code or English name) this model can be told: one of its vocabulary's for
    /// a multilingual model, English for an English-only one.
    fn check_language(&self, language: &str) -> Result<(), TranscribeError> {
        if self.multilingual {
            self.tokenizer.language_token(language)?;
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

    /// Transcribes 16 kHz mono samples.
    pub fn transcribe(
        &mut self,
        samples: &[f32],
        options: &TranscribeOptions,
        observer: &mut dyn Observer,
    ) -> Result<Transcript, TranscribeError> {
        self.check(options)?;
        let frames = content_frames(samples.len());
        if frames == 0 {
            return Err(TranscribeError::EmptyAudio);
        }
        let mut stats = Stats {
            audio_seconds: samples.len() as f64 / f64::from(tessel_audio::SAMPLE_RATE),
            ..Stats::default()
        };
        // Every buffer sized for this file before the first window.
        let started = Instant::now();
        self.spectrogram.clear();
        self.spectrogram.resize(self.n_mels * frames, 0.0);
        self.mel.spectrogram(samples, &mut self.spectrogram)?;
        stats.mel = started.elapsed();
        if self.tried.len() < options.temperatures.len() {
            let capacity = self.session.limits().max_tgt_len;
            self.tried
                .resize_with(options.temperatures.len(), || Decoded {
                    tokens: Vec::with_capacity(capacity),
                    ..Decoded::default()
                });
        }

        let tok = Arc::clone(&self.tokenizer);
        let mut all_tokens: Vec<u32> = Vec::new();
        if let Some(prompt) = &options.initial_prompt {
            all_tokens.extend(tok.encode(&format!(" {}", python_strip(prompt)))?);
        }
        let language = self.language(options, frames, &mut stats, observer)?;
        let sot_sequence = if self.multilingual {
            tok.sot_sequence(Some(&language), Some(options.task))?
        } else {
            tok.sot_sequence(None, None)?
        };
        let max_previous = (self.session.limits().max_tgt_len / 2).saturating_sub(1);
        let mut segments = Vec::new();
        let mut reset_since = 0;
        let mut seek = 0;
        while seek < frames {
            observer.progress(
                seek as f64 * segments::SECONDS_PER_FRAME,
                frames as f64 * 0.01,
            );
            let size = N_FRAMES.min(frames - seek);
            segment(&self.spectrogram, self.n_mels, seek, size, &mut self.window)?;
            self.encode(&mut stats, observer)?;
            // The prompt: previous text, start sequence, <|notimestamps|>.
            self.prompt.clear();
            let previous = &all_tokens[reset_since..];
            if !previous.is_empty() {
                self.prompt.push(tok.sot_prev());
                self.prompt
                    .extend_from_slice(&previous[previous.len().saturating_sub(max_previous)..]);
            }
            let sot_at = self.prompt.len();
            self.prompt.extend_from_slice(&sot_sequence);
            if !options.timestamps {
                self.prompt.push(tok.no_timestamps());
            }
            let no_speech_prob = if sot_at + 1 == self.prompt.len() {
                None
            } else {
                Some(self.no_speech_prob(sot_at, &mut stats, observer)?)
            };
            let mut window = WindowDecode {
                options,
                window: stats.windows,
                no_speech_prob,
            };
            stats.windows += 1;
            let best = self.decode_with_fallback(&mut window, &mut stats, observer)?;
            let no_speech_prob = window.no_speech_prob.unwrap_or(0.0);
            let (judged, temperature) = {
                let d = &self.tried[best];
                (
                    d.judged.unwrap_or(Judged {
                        avg_logprob: 0.0,
                        compression_ratio: 0.0,
                        no_speech_prob,
                    }),
                    d.temperature,
                )
            };
            if options.thresholds.no_speech.is_some() && options.thresholds.is_silence(&judged) {
                seek += size;
                continue;
            }
            let tokens = &self.tried[best].tokens;
            let split = segments::split(tokens, tok.timestamp_begin(), seek, size, &mut self.cuts);
            for cut in &self.cuts[..split.count] {
                let piece = &tokens[cut.tokens.clone()];
                let text = tok.decode(piece)?;
                if cut.start == cut.end || python_strip(&text).is_empty() {
                    continue;
                }
                all_tokens.extend_from_slice(piece);
                segments.push(Segment {
                    seek,
                    start: cut.start,
                    end: cut.end,
                    text,
                    tokens: piece.to_vec(),
                    temperature,
                    avg_logprob: judged.avg_logprob,
                    compression_ratio: judged.compression_ratio,
                    no_speech_prob,
                });
                if let Some(done) = segments.last() {
                    observer.segment(done);
                }
            }
            if !options.condition_on_previous_text
                || temperature > options.prompt_reset_on_temperature
            {
                reset_since = all_tokens.len();
            }
            seek = split.next_seek;
        }
        observer.progress(frames as f64 * 0.01, frames as f64 * 0.01);
        Ok(Transcript {
            language,
            segments,
            stats,
        })
    }

    /// Runs the encoder over the current window.
    fn encode(
        &mut self,
        stats: &mut Stats,
        observer: &mut dyn Observer,
    ) -> Result<(), TranscribeError> {
        let started = Instant::now();
        let mut encoded = None;
        observer.inference(true);
        let done = self
            .session
            .encode_audio_staged(&self.window, || encoded = Some(Instant::now()));
        observer.inference(false);
        let ended = Instant::now();
        let encoded = encoded.unwrap_or(ended);
        stats.encode += encoded - started;
        stats.cross_kv += ended - encoded;
        Ok(done?)
    }

    /// The language: the option's, `en` for English-only models, or detected on the first
    /// window.
    fn language(
        &mut self,
        options: &TranscribeOptions,
        frames: usize,
        stats: &mut Stats,
        observer: &mut dyn Observer,
    ) -> Result<String, TranscribeError> {
        if !self.multilingual {
            return Ok("en".to_owned());
        }
        if let Some(language) = &options.language {
            // Checked here, once: the code or name must be one of the vocabulary's.
            self.tokenizer.language_token(language)?;
            let lower = language.to_lowercase();
            let code = tessel_text::languages::WHISPER_LANGUAGES
                .iter()
                .find(|(code, name)| *code == lower || *name == lower)
                .map_or(lower.clone(), |(code, _)| (*code).to_owned());
            return Ok(code);
        }
        segment(
            &self.spectrogram,
            self.n_mels,
            0,
            N_FRAMES.min(frames),
            &mut self.window,
        )?;
        self.encode(stats, observer)?;
        let started = Instant::now();
        observer.inference(true);
        let logits = self.session.prefill(&[self.tokenizer.sot()]);
        observer.inference(false);
        stats.decode += started.elapsed();
        let logits = logits?;
        let mut best: Option<(&str, f32)> = None;
        for &(code, id) in self.tokenizer.language_tokens() {
            let v = logits
                .get(id as usize)
                .copied()
                .unwrap_or(f32::NEG_INFINITY);
            if best.is_none_or(|(_, b)| v > b) {
                best = Some((code, v));
            }
        }
        Ok(best.map_or("en", |(code, _)| code).to_owned())
    }

    /// `softmax(logits)[<|nospeech|>]` at the `<|startoftranscript|>` row of the prompt.
    fn no_speech_prob(
        &mut self,
        sot_at: usize,
        stats: &mut Stats,
        observer: &mut dyn Observer,
    ) -> Result<f64, TranscribeError> {
        let started = Instant::now();
        observer.inference(true);
        self.session.reset_decoder();
        let logits = self.session.prefill(&self.prompt[..=sot_at]);
        observer.inference(false);
        stats.decode += started.elapsed();
        Ok(softmax_at(logits?, self.tokenizer.no_speech()))
    }

    /// Decodes the window at each temperature until one is judged fine; returns the index in
    /// `tried` of the decoding kept.
    fn decode_with_fallback(
        &mut self,
        window: &mut WindowDecode<'_>,
        stats: &mut Stats,
        observer: &mut dyn Observer,
    ) -> Result<usize, TranscribeError> {
        let options = window.options;
        let temperatures = &options.temperatures;
        for (i, &temperature) in temperatures.iter().enumerate() {
            self.decode_at(i, temperature, window, stats, observer)?;
            let judged = self.tried[i].judged.unwrap_or(Judged {
                avg_logprob: 0.0,
                compression_ratio: 0.0,
                no_speech_prob: window.no_speech_prob.unwrap_or(0.0),
            });
            if !options.thresholds.needs_fallback(&judged) {
                return Ok(i);
            }
        }
        self.judged.clear();
        let tried = self.tried[..temperatures.len()].iter();
        self.judged.extend(tried.filter_map(|d| d.judged));
        let best = fallback::pick_after_failures(&options.thresholds, &self.judged).unwrap_or(0);
        // Reported at the last temperature tried, as the reference does.
        let last = temperatures[temperatures.len() - 1];
        self.tried[best].temperature = last;
        Ok(best)
    }

    /// One decoding at `temperature` into `tried[slot]`.
    fn decode_at(
        &mut self,
        slot: usize,
        temperature: f32,
        window: &mut WindowDecode<'_>,
        stats: &mut Stats,
        observer: &mut dyn Observer,
    ) -> Result<(), TranscribeError> {
        let options = window.options;
        let tok = Arc::clone(&self.tokenizer);
        let limits = self.session.limits();
        let positions_left = (limits.max_tgt_len + 1).saturating_sub(self.prompt.len());
        let max_steps = options.sample_len.min(positions_left);
        if max_steps == 0 {
            return Err(TranscribeError::BadOption(
                "the prompt fills the decoder's positions".into(),
            ));
        }
        // round(max_initial_timestamp / 0.02) steps, as the reference converts it.
        let max_initial = (options.max_initial_timestamp / segments::TIME_PRECISION)
            .round()
            .clamp(0.0, f64::from(u32::MAX));
        let rules = WhisperRules {
            eot: tok.eot(),
            no_timestamps: tok.no_timestamps(),
            timestamp_begin: tok.timestamp_begin(),
            blank: if options.suppress_blank {
                &self.blank
            } else {
                &[]
            },
            suppress: &self.suppress,
            timestamps: options.timestamps,
            max_initial_timestamp_index: Some(max_initial as u32),
        };
        let isa = self.session.isa();
        let runs = if temperature > 0.0 {
            options.best_of
        } else {
            1
        };
        let decoded = &mut self.tried[slot];
        decoded.tokens.clear();
        decoded.temperature = temperature;
        let mut best_score = f32::NEG_INFINITY;
        let mut best_sum = 0.0f64;
        for run in 0..runs {
            let search = if temperature > 0.0 {
                let seed = options
                    .seed
                    .wrapping_add((window.window as u64) << 32)
                    .wrapping_add((slot as u64) << 16)
                    .wrapping_add(run as u64);
                SearchOptions {
                    length_penalty: options.length_penalty,
                    ..SearchOptions::sample(Sampling::temperature(temperature, seed), max_steps)
                }
            } else {
                SearchOptions {
                    length_penalty: options.length_penalty,
                    ..SearchOptions::beam(options.beam, max_steps)
                }
            };
            let started = Instant::now();
            observer.inference(true);
            let no_speech = &mut window.no_speech_prob;
            let hyps = self.session.generate_with(&self.prompt, &search, |step| {
                if step.step == 0 && no_speech.is_none() {
                    *no_speech = Some(softmax_at(step.row_mut(0), tok.no_speech()));
                }
                rules.apply(isa, step)
            });
            observer.inference(false);
            stats.decode += started.elapsed();
            let hyps: Hypotheses<'_> = hyps?;
            let Some(best) = hyps.best() else { continue };
            stats.tokens += best.tokens.len();
            if run == 0 || best.score > best_score {
                best_score = best.score;
                let len = best.tokens.len();
                best_sum =
                    f64::from(best.score) * (len as f64).powf(f64::from(search.length_penalty));
                decoded.tokens.clear();
                let end = best
                    .tokens
                    .iter()
                    .position(|&t| t == tok.eot())
                    .unwrap_or(len);
                decoded.tokens.extend_from_slice(&best.tokens[..end]);
            }
        }
        decoded.text = tok.decode(&decoded.tokens)?;
        let n = decoded.tokens.len();
        decoded.judged = Some(Judged {
            avg_logprob: best_sum / (n as f64 + 1.0),
            compression_ratio: self.compressor.ratio(python_strip(&decoded.text)),
            no_speech_prob: window.no_speech_prob.unwrap_or(0.0),
        });
        Ok(())
    }
}

/// `softmax(logits)[token]` in `f64` (0 when `token` is out of range).
fn softmax_at(logits: &[f32], token: u32) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let total: f64 = logits
        .iter()
        .map(|&v| (f64::from(v) - f64::from(max)).exp())
        .sum();
    let target = logits
        .get(token as usize)
        .map_or(f64::NEG_INFINITY, |&v| f64::from(v) - f64::from(max));
    target.exp() / total
}
