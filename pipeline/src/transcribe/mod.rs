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
//!    The window is decoded with the decoding rules
//!    ([`WhisperRules`](tessel_model::processors::whisper::WhisperRules)) and temperature
//!    fallback ([`fallback`]); the no-speech probability is the softmax of the logits at the
//!    `<|startoftranscript|>` row (the first decoding's step-0 logits when that token ends the
//!    prompt, otherwise one prefill of the prompt up to it). A window that is silence (see
//!    [`fallback::Thresholds`]) is skipped whole; otherwise its tokens are split into timed
//!    segments and the next `seek` chosen ([`segments`]). Segments with no text or no length
//!    are dropped; the others' tokens extend the conditioning text, which is reset after a
//!    window decoded above temperature 0.5 or always without `condition_on_previous_text`.
//!
//! Decoding at temperature 0 is beam search (`beam > 1`) or greedy; above 0 it draws `best_of`
//! samples (seeded: `seed`, window and temperature fix each draw) and keeps the best by
//! length-normalised score. A window decodes at most 224 tokens and never past the model's
//! 448 positions.
//!
//! The modules, by job: `windows` walks the file's windows ([`TranscribeSession`]), `decode`
//! decodes one window with [`fallback`], [`segments`] cuts its tokens into timed segments,
//! [`format`](mod@format) writes a transcript and [`Observer`] watches one as it runs; the
//! options, results and errors are in `types`. This module holds what every session shares
//! ([`Transcriber`]).

pub mod alignment;
mod batched;
pub mod cues;
mod decode;
pub mod fallback;
pub mod format;
mod hallucination;
mod language;
mod load;
mod observer;
pub mod segments;
mod speech;
mod types;
mod walk;
mod windows;
mod word_pass;
pub mod words;

use std::path::Path;
use std::sync::Arc;

use tessel_audio::N_FRAMES;
use tessel_kernels::Isa;
use tessel_model::{
    ArenaPlan, Batch, Limits, MemoryType, Model, Session, SessionError, WeightType,
};
use tessel_text::whisper::WhisperTokenizer;

use decode::Decoder;

pub use batched::{BatchedOptions, BatchedSession, BatchedTranscript};
pub use format::{render, write_header, write_segment, Format};
pub use observer::Observer;
pub use speech::Speech;
pub use tessel_vad::locate::open_model as open_vad;
pub use tessel_vad::timestamps::VadOptions;
pub use tessel_vad::{Vad, VadError};
pub use types::{Segment, Stats, TranscribeError, TranscribeOptions, Transcript};
pub use windows::TranscribeSession;

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
    /// The cross-attention (layer, head) pairs word timings are read from, by layer.
    alignment_heads: Arc<[(usize, usize)]>,
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
        let heads = load::alignment_heads(&directory, model.config())?;
        let mut transcriber = Transcriber::new(model, tokenizer)?;
        transcriber.english_only = english_only;
        transcriber.alignment_heads = heads.into();
        Ok(transcriber)
    }

    /// [`Transcriber::load`] (its cross-attention memory as `cross_kv` says, the default for
    /// `None`: [`Transcriber::with_cross_kv`]) and a session of it: [`Transcriber::session`],
    /// or [`Transcriber::session_with_words`] when `words`, for beams up to `beam` on
    /// `threads` threads at `isa`. The session's arena is planned, handed to `check` (which
    /// may refuse it, say for the memory available), allocated and made resident while the
    /// tokenizer is still being parsed on another thread, so that the two share the cores
    /// instead of running one after the other.
    pub fn load_with_session<E: From<TranscribeError>>(
        (dir, max_beam, weights): (&Path, usize, Option<WeightType>),
        cross_kv: Option<MemoryType>,
        (isa, beam, threads, words): (Isa, usize, usize, bool),
        check: impl FnOnce(&ArenaPlan) -> Result<(), E>,
    ) -> Result<(Transcriber, TranscribeSession), E> {
        let session = |model: &Arc<Model<'static>>,
                       directory: &tessel_model::load::directory::Directory| {
            let heads = load::alignment_heads(directory, model.config())?;
            let cross_kv = cross_kv.unwrap_or(default_cross_kv(model));
            let limits = limits_of(model, beam, threads, cross_kv);
            let planned = if words { heads.len() } else { 0 };
            let plan = ArenaPlan::with_alignment(model.config(), limits, planned)
                .map_err(|e| TranscribeError::Session(SessionError::from(e)))?;
            check(&plan)?;
            let session = Session::with_alignment(Arc::clone(model), isa, limits, planned)
                .map_err(TranscribeError::from)?;
            Ok::<_, E>((session, heads, cross_kv))
        };
        let (model, tokenizer, directory, (session, heads, cross_kv)) =
            load::load_dir_then(dir, max_beam, weights, session)?;
        let english_only = load::english_only(&directory, &model);
        let mut transcriber = Transcriber::new(model, tokenizer)?.with_cross_kv(cross_kv);
        transcriber.english_only = english_only;
        transcriber.alignment_heads = heads.into();
        let session = transcriber.wrap(session, words)?;
        Ok((transcriber, session))
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
        let cross_kv = default_cross_kv(&model);
        let alignment_heads = load::default_alignment_heads(config).into();
        Ok(Transcriber {
            alignment_heads,
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

    /// The cross-attention (layer, head) pairs word timings are read from: the directory's
    /// `alignment_heads` (CTranslate2's `config.json`, Hugging Face's
    /// `generation_config.json`), else every head of the last half of the decoder layers, as
    /// CTranslate2's converter defaults; ordered by layer, as CTranslate2 gathers them.
    pub fn alignment_heads(&self) -> &[(usize, usize)] {
        &self.alignment_heads
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
        limits_of(&self.model, max_beam, threads, self.cross_kv)
    }

    /// A session for one user: the arena for beams up to `max_beam` on `threads` threads at
    /// `isa`, and every per-window buffer.
    pub fn session(
        &self,
        isa: Isa,
        max_beam: usize,
        threads: usize,
    ) -> Result<TranscribeSession, TranscribeError> {
        self.session_for(isa, max_beam, threads, false)
    }

    /// [`Transcriber::session`] that can also time words
    /// ([`TranscribeOptions::word_timestamps`]): its arena holds the alignment heads'
    /// cross-attention probabilities (heads × 448 × 1500 values), and the alignment's buffers
    /// are sized once.
    pub fn session_with_words(
        &self,
        isa: Isa,
        max_beam: usize,
        threads: usize,
    ) -> Result<TranscribeSession, TranscribeError> {
        self.session_for(isa, max_beam, threads, true)
    }

    /// A session for batched transcription ([`BatchedSession`]): a batch of `slots` slots,
    /// each planned as [`Transcriber::session`] plans one (beams up to `max_beam`), on
    /// `threads` threads; with `words`, room to time words as
    /// [`Transcriber::session_with_words`] has.
    pub fn batched_session(
        &self,
        isa: Isa,
        (max_beam, slots): (usize, usize),
        threads: usize,
        words: bool,
    ) -> Result<BatchedSession, TranscribeError> {
        if slots == 0 {
            return Err(TranscribeError::BadOption(
                "a batched session needs at least one slot".into(),
            ));
        }
        let limits = Limits {
            max_batch: slots,
            ..self.limits(max_beam, threads)
        };
        let heads = if words { self.alignment_heads.len() } else { 0 };
        let batch = Batch::with_alignment(Arc::clone(&self.model), isa, limits, heads)?;
        BatchedSession::new(batched::BatchedParts {
            batch,
            tokenizer: Arc::clone(&self.tokenizer),
            decoder: self.decoder(),
            multilingual: self.multilingual,
            n_mels: self.n_mels,
            heads: words.then(|| Arc::clone(&self.alignment_heads)),
        })
    }

    /// A decoder of the transcriber's rule sets.
    fn decoder(&self) -> Decoder {
        let (suppress, blank) = (Arc::clone(&self.suppress), Arc::clone(&self.blank));
        Decoder::new(Arc::clone(&self.tokenizer), suppress, blank)
    }

    fn session_for(
        &self,
        isa: Isa,
        max_beam: usize,
        threads: usize,
        words: bool,
    ) -> Result<TranscribeSession, TranscribeError> {
        let limits = self.limits(max_beam, threads);
        let heads = if words { self.alignment_heads.len() } else { 0 };
        let session = Session::with_alignment(Arc::clone(&self.model), isa, limits, heads)?;
        self.wrap(session, words)
    }

    /// The transcription session over the model session `session` (planned by
    /// [`Transcriber::limits`], with the alignment heads when `words`).
    fn wrap(
        &self,
        session: decode::WhisperSession,
        words: bool,
    ) -> Result<TranscribeSession, TranscribeError> {
        let tokenizer = Arc::clone(&self.tokenizer);
        let decoder = self.decoder();
        let heads = words.then(|| Arc::clone(&self.alignment_heads));
        TranscribeSession::new(session, tokenizer, decoder, self.multilingual, self.n_mels)
            .map(|s| s.with_words(heads))
    }
}

/// How sessions store the cross-attention K/V of `model` by default: `f32` for `f32` weights
/// (results as the reference computes them), `f16` for 16-bit and int8 weights.
fn default_cross_kv(model: &Model<'_>) -> MemoryType {
    match model.generator().weight_type() {
        WeightType::F32 => MemoryType::F32,
        _ => MemoryType::F16,
    }
}

/// The limits of a one-user session of `model` ([`Transcriber::limits`]).
fn limits_of(model: &Model<'_>, max_beam: usize, threads: usize, cross_kv: MemoryType) -> Limits {
    Limits {
        max_src_len: N_FRAMES / 2,
        max_tgt_len: model.config().max_tgt_len,
        max_beam,
        max_batch: 1,
        encode_sources: 1,
        threads,
        cross_kv,
    }
}
