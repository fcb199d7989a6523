//! `tessel_transcriber` and `tessel_transcribe`: speech to timed text with a Whisper model
//! directory, through the pipeline's [`Transcriber`] (openai-whisper's algorithm as
//! faster-whisper runs it: 30 s windows, timestamps, temperature fallback, conditioning on
//! the previous text).
//!
//! A transcriber holds the model, the tokenizer and one session (one thread at a time). A
//! transcription writes its segments into a caller array of [`tessel_segment`] and their
//! texts, concatenated, into one caller text buffer that each segment indexes; when either is
//! too small the call reports both sizes and keeps the transcript, so that the retry with
//! the same audio and options copies it instead of transcribing again. With word timestamps
//! each segment names its words (`first_word`, `n_words`), which `tessel_transcriber_words`
//! copies from the kept transcript into a caller array of [`tessel_word`] and a text buffer
//! of their own, by the same rules. With `batch_size` above 0 the call runs faster-whisper's
//! `BatchedInferencePipeline` instead ([`BatchedSession`]: speech chunks of up to 30 s,
//! `batch_size` of them decoded together) on a second session the transcriber makes at the
//! first such call and keeps. Task-level calls allocate (the spectrogram, the segments'
//! text); only the token-level calls of `tessel_session` do not.

use std::ffi::{c_char, CStr};
use std::path::Path;

use tessel_audio::{load_wav, ReadOptions};
use tessel_kernels::Isa;
use tessel_model::load::directory::Modality;
use tessel_model::SessionError;
use tessel_pipeline::transcribe::words::{APPEND_PUNCTUATIONS, PREPEND_PUNCTUATIONS};
use tessel_pipeline::transcribe::{
    BatchedOptions, BatchedSession, Segment, TranscribeError, TranscribeOptions, TranscribeSession,
    Transcriber, VadError, VadOptions,
};
use tessel_text::whisper::Task;
use tessel_text::TextError;

use crate::args;
use crate::dir_kind;
use crate::exclusive;
use crate::info;
use crate::status::{fail, guard, tessel_status, Error};
use crate::vad::{tessel_vad_options, Detector};

/// A transcriber handle: "tslwhspr" in its first word.
const KIND: exclusive::Kind = exclusive::Kind::task(u64::from_le_bytes(*b"tslwhspr"));

/// A Whisper model with its tokenizer and one session; used by one thread at a time. Created
/// by `tessel_transcriber_load`, freed by `tessel_transcriber_free`.
#[allow(non_camel_case_types)]
pub struct tessel_transcriber {
    _opaque: [u8; 0],
}

/// One timed piece of a transcript; its text is `text[text_offset .. text_offset + text_len]`
/// of the text buffer the same call filled (UTF-8, not NUL-terminated on its own).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct tessel_segment {
    /// Start, seconds from the start of the audio.
    pub start: f64,
    /// End, seconds.
    pub end: f64,
    /// Byte offset of its text in the text buffer.
    pub text_offset: usize,
    /// Bytes of its text.
    pub text_len: usize,
    /// With word timestamps: the index of its first word among the words
    /// `tessel_transcriber_words` copies (0 without).
    pub first_word: usize,
    /// With word timestamps: how many words it holds (0 without; a segment may have none).
    pub n_words: usize,
}

/// One timed word of a transcript (faster-whisper's `Word`); its text is
/// `text[text_offset .. text_offset + text_len]` of the text buffer the same
/// `tessel_transcriber_words` call filled (UTF-8, with its leading space and the punctuation
/// merged into it, not NUL-terminated on its own).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct tessel_word {
    /// Start, seconds from the start of the audio (rounded to 10 ms, as faster-whisper's).
    pub start: f64,
    /// End, seconds.
    pub end: f64,
    /// The mean probability of its tokens.
    pub probability: f64,
    /// Byte offset of its text in the text buffer.
    pub text_offset: usize,
    /// Bytes of its text.
    pub text_len: usize,
}

/// How `tessel_transcribe` decodes. Start from `tessel_transcribe_options_default()` (the
/// sequential transcription, faster-whisper's `WhisperModel.transcribe`) or
/// `tessel_transcribe_options_batched()` (faster-whisper's `BatchedInferencePipeline`).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct tessel_transcribe_options {
    /// Beam width at temperature 0 (1: greedy; at most the transcriber's `max_beam`).
    /// Default 5.
    pub beam: usize,
    /// Timed segments within each window (default true); false gives one segment per window.
    pub timestamps: bool,
    /// Prompt each window with the text so far (default true). Not read with `batch_size`
    /// above 0 (the batched pipeline never conditions on earlier text).
    pub condition_on_previous_text: bool,
    /// Translate to English instead of transcribing (multilingual models). Default false.
    pub translate: bool,
    /// Spoken language (code or English name, one of Whisper's 100), or NULL (the default)
    /// to detect it on multilingual models. An unknown code, a language the vocabulary lacks,
    /// or any language but English on an English-only model is `TESSEL_ERR_ARGUMENT`.
    pub language: *const c_char,
    /// Text to condition the first window on, or NULL (the default). With `batch_size` above
    /// 0 every chunk is prompted with it (encoded as given, without a leading space, as
    /// faster-whisper's batched pipeline does).
    pub initial_prompt: *const c_char,
    /// Voice activity detection first (default off): only the speech is transcribed, and
    /// the segments' times are the original audio's. With `batch_size` above 0, `enabled` is
    /// faster-whisper's batched `vad_filter`: the speech found is packed into the chunks of
    /// up to 30 s the batches decode (`max_speech_duration_s` capped at 30); off, the audio
    /// must be shorter than 30 s (one chunk), else `TESSEL_ERR_ARGUMENT`.
    pub vad: tessel_vad_options,
    /// Time every word (faster-whisper's `word_timestamps`; default false): each segment's
    /// `first_word` and `n_words` name its words, which `tessel_transcriber_words` copies
    /// after the call; segment bounds move to their words as faster-whisper's do. The first
    /// call that asks for it replaces the transcriber's session with one whose arena also
    /// holds the alignment heads' cross-attention (heads × 448 × 1500 floats; the heads are
    /// the directory's `alignment_heads`, else every head of the last half of the decoder
    /// layers), which later calls keep.
    pub word_timestamps: bool,
    /// With word timestamps: the punctuation marks merged into the word that follows them,
    /// UTF-8, NUL-terminated (default faster-whisper's `"'“¿([{-`). NULL is
    /// `TESSEL_ERR_NULL`, invalid UTF-8 `TESSEL_ERR_ARGUMENT`; not read without word
    /// timestamps.
    pub prepend_punctuations: *const c_char,
    /// With word timestamps: the punctuation marks merged into the word before them, as
    /// `prepend_punctuations` (default faster-whisper's `"'.。,，!！?？:：”)]}、`).
    pub append_punctuations: *const c_char,
    /// Beam search patience (faster-whisper's `patience`; default 1): a window's search goes
    /// on until round(beam × patience) hypotheses have finished. Not finite or not above 0:
    /// `TESSEL_ERR_ARGUMENT`.
    pub patience: f32,
    /// With word timestamps: skip silences longer than this many seconds around a likely
    /// hallucination (faster-whisper's `hallucination_silence_threshold`); 0 (the default) is
    /// off. Negative or not finite: `TESSEL_ERR_ARGUMENT`. Not read with `batch_size` above
    /// 0 (checked all the same).
    pub hallucination_silence_threshold: f64,
    /// Chunks decoded together: 0 (the default) runs the sequential transcription; N in
    /// 1..=`TESSEL_MAX_BATCH` runs faster-whisper's `BatchedInferencePipeline` (its
    /// `batch_size`): the audio is cut into chunks of up to 30 s (see `vad`), N of them are
    /// decoded together, without conditioning on earlier text, temperature fallback or
    /// silence thresholds (the first temperature's decoding is kept), each chunk's segments
    /// in the original audio's times. The first call with a `batch_size` above 0 makes the
    /// transcriber a batched session of that many slots, which later calls keep; a call with
    /// a larger `batch_size`, or with `word_timestamps` when the kept session cannot time
    /// words, replaces it (never with fewer slots). Its arena holds per slot one window's
    /// cross-attention keys and values, the beams' decoder caches and logits, and once what
    /// a sequential session holds besides (encoder buffers, scratch, with word timestamps the
    /// alignment heads' attention); the transcriber keeps its sequential session as well.
    /// Above `TESSEL_MAX_BATCH`: `TESSEL_ERR_ARGUMENT`.
    pub batch_size: usize,
    /// With `batch_size` above 0: prompt each chunk with its own most likely language
    /// (faster-whisper's batched `multilingual`; multilingual models, ignored on English-only
    /// ones), even over `language`. Default false; true with `batch_size` 0 is
    /// `TESSEL_ERR_ARGUMENT`.
    pub multilingual: bool,
}

/// faster-whisper's `prepend_punctuations`, NUL-terminated (the pipeline's default).
const PREPEND: &CStr = c"\"'“¿([{-";
/// faster-whisper's `append_punctuations`, NUL-terminated (the pipeline's default).
const APPEND: &CStr = c"\"'.。,，!！?？:：”)]}、";

/// Whether `c` holds the bytes of `s`.
const fn same(c: &CStr, s: &str) -> bool {
    let (c, s) = (c.to_bytes(), s.as_bytes());
    if c.len() != s.len() {
        return false;
    }
    let mut i = 0;
    while i < c.len() {
        if c[i] != s[i] {
            return false;
        }
        i += 1;
    }
    true
}

const _: () = assert!(same(PREPEND, PREPEND_PUNCTUATIONS) && same(APPEND, APPEND_PUNCTUATIONS));

/// The reference's defaults: beam 5, timestamps, conditioned on previous text, transcribe,
/// language detected, no prompt (temperature fallback 0, 0.2 … 1.0 with best of 5), no voice
/// activity detection, no word timestamps (with faster-whisper's punctuation strings, static).
#[no_mangle]
pub extern "C" fn tessel_transcribe_options_default() -> tessel_transcribe_options {
    tessel_transcribe_options {
        beam: 5,
        timestamps: true,
        condition_on_previous_text: true,
        translate: false,
        language: std::ptr::null(),
        initial_prompt: std::ptr::null(),
        vad: tessel_vad_options::default(),
        word_timestamps: false,
        prepend_punctuations: PREPEND.as_ptr(),
        append_punctuations: APPEND.as_ptr(),
        patience: 1.0,
        hallucination_silence_threshold: 0.0,
        batch_size: 0,
        multilingual: false,
    }
}

/// faster-whisper's `BatchedInferencePipeline.transcribe` defaults: as
/// `tessel_transcribe_options_default()`, but `batch_size` 8, no timestamps (one segment per
/// chunk) and voice activity detection on with the batched pipeline's detector options
/// (`max_speech_duration_s` 30, `min_silence_duration_ms` 160, the others faster-whisper's
/// `VadOptions` defaults).
#[no_mangle]
pub extern "C" fn tessel_transcribe_options_batched() -> tessel_transcribe_options {
    let batched = BatchedOptions::default();
    let mut vad = tessel_vad_options::from(&batched.vad);
    vad.enabled = batched.vad_filter;
    tessel_transcribe_options {
        timestamps: false,
        vad,
        batch_size: batched.batch_size,
        multilingual: batched.multilingual,
        ..tessel_transcribe_options_default()
    }
}

/// A transcriber's state.
struct State {
    transcriber: Transcriber,
    /// The level, widest beam and threads its sessions are made for.
    planned: (Isa, usize, usize),
    session: TranscribeSession,
    /// Whether `session` can time words (made so at the first call that asked).
    timing_words: bool,
    /// The batched session, made at the first call with a `batch_size` above 0.
    batched: Option<Batched>,
    detector: Detector,
    /// The last audio and options, with their segments and text, kept for a retry with larger
    /// buffers.
    last: Option<Last>,
    /// Whether `last` is the transcript of the latest transcription call (which returned
    /// `TESSEL_OK` or `TESSEL_ERR_BUFFER_TOO_SMALL`): the one `tessel_transcriber_words` reads.
    current: bool,
}

/// A transcriber's batched session and whether it can time words.
struct Batched {
    session: BatchedSession,
    words: bool,
}

/// What a transcription call asks for, in the pipeline's terms.
#[derive(Clone, Debug, PartialEq)]
struct Asked {
    options: TranscribeOptions,
    /// The sequential transcription's detector options, when detection is on.
    vad: Option<VadOptions>,
    /// The batched pipeline's options (detection included), when `batch_size` is above 0.
    batched: Option<BatchedOptions>,
}

struct Last {
    samples: Vec<f32>,
    asked: Asked,
    segments: Vec<tessel_segment>,
    text: String,
    /// Every segment's words, in order (with word timestamps), and their texts concatenated.
    words: Vec<tessel_word>,
    words_text: String,
}

fn transcribe_error(error: TranscribeError) -> Error {
    let status = match &error {
        TranscribeError::ModelDir { .. }
        | TranscribeError::Open(_)
        | TranscribeError::Load(_)
        | TranscribeError::Ct2(_)
        | TranscribeError::Audio(_) => tessel_status::TESSEL_ERR_LOAD,
        TranscribeError::NotWhisper(_) => tessel_status::TESSEL_ERR_UNSUPPORTED,
        // Ids the model generated that its tokenizer lacks: not the caller's doing.
        TranscribeError::Text(TextError::UnknownId { .. }) => tessel_status::TESSEL_ERR_RUN,
        TranscribeError::Text(_)
        | TranscribeError::Mel(_)
        | TranscribeError::EmptyAudio
        | TranscribeError::BadOption(_) => tessel_status::TESSEL_ERR_ARGUMENT,
        TranscribeError::Session(SessionError::OutOfMemory { .. }) => {
            tessel_status::TESSEL_ERR_OUT_OF_MEMORY
        }
        TranscribeError::Session(_) => tessel_status::TESSEL_ERR_ARGUMENT,
        TranscribeError::Vad(VadError::SampleRate(_) | VadError::InvalidArgument(_)) => {
            tessel_status::TESSEL_ERR_ARGUMENT
        }
        TranscribeError::Vad(VadError::Kernel(_)) => tessel_status::TESSEL_ERR_RUN,
        TranscribeError::Vad(_) => tessel_status::TESSEL_ERR_LOAD,
        // The C observer has no way to stop a transcription.
        TranscribeError::Run(_) | TranscribeError::Stopped => tessel_status::TESSEL_ERR_RUN,
    };
    Error::boxed(status, error)
}

/// Loads the Whisper model in directory `path` (UTF-8, NUL-terminated; Hugging Face or
/// CTranslate2 with its tokenizer) and creates its session for beams up to `max_beam`
/// (1..=`TESSEL_MAX_BEAM`, 128; 0: 5) on `threads` threads (at most `TESSEL_MAX_THREADS`, 64;
/// 0: 1). The session holds one 30 s window (1500 encoder positions) and the model's decoder
/// positions (448); a batched session (`tessel_transcribe_options.batch_size`) is made at the
/// first call that asks for one. `multilingual` is 1 to treat the model as multilingual
/// (language and task tokens, language detection), 0 as English-only, -1 to decide by its
/// vocabulary size as the reference does. Refused: a directory that cannot be loaded
/// (`TESSEL_ERR_LOAD`); a directory of a text-to-text model or a model that does not read audio
/// (`TESSEL_ERR_UNSUPPORTED`, naming what the directory is); `max_beam` or `threads` out of
/// range, `multilingual` outside -1..=1, or 1 for a model its directory says is English-only (a
/// `.en` vocabulary of 51864 tokens, CTranslate2's empty `lang_ids`, `is_multilingual: false`),
/// which would end every window at once (`TESSEL_ERR_ARGUMENT`). On success `*out` holds the
/// transcriber. Allocates (the weights, the tokenizer, the arena).
///
/// # Safety
/// `path` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_transcriber_load(
    path: *const c_char,
    max_beam: usize,
    threads: usize,
    multilingual: i32,
    out: *mut *mut tessel_transcriber,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract for each pointer.
        let (path, out) = unsafe { (args::text(path, "path is NULL")?, args::handle_out(out)?) };
        if !(-1..=1).contains(&multilingual) {
            return fail(
                tessel_status::TESSEL_ERR_ARGUMENT,
                "multilingual must be -1 (from the vocabulary), 0 or 1",
            );
        }
        let max_beam = match max_beam {
            0 => 5,
            beam => args::bounded("max_beam", beam, args::TESSEL_MAX_BEAM)?,
        };
        let dir = Path::new(path);
        dir_kind::require(dir, Modality::Speech)?;
        let mut transcriber = Transcriber::load(dir, max_beam, None).map_err(transcribe_error)?;
        if multilingual >= 0 {
            transcriber = transcriber
                .try_multilingual(multilingual == 1)
                .map_err(transcribe_error)?;
        }
        let isa = info::session_isa()?;
        let threads = threads.max(1);
        let session = transcriber
            .session(isa, max_beam, threads)
            .map_err(transcribe_error)?;
        *out = exclusive::into_raw(
            KIND,
            State {
                transcriber,
                planned: (isa, max_beam, threads),
                session,
                timing_words: false,
                batched: None,
                detector: Detector::new(isa),
                last: None,
                current: false,
            },
        );
        Ok(())
    })
}

/// An optional C string, owned.
///
/// # Safety
/// `ptr` is NULL or NUL-terminated.
unsafe fn optional(ptr: *const c_char, what: &'static str) -> Result<Option<String>, Error> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    unsafe { args::text(ptr, what) }.map(|s| Some(s.to_owned()))
}

/// A punctuation string of the options, owned: `TESSEL_ERR_NULL` naming `null` when NULL,
/// `TESSEL_ERR_ARGUMENT` naming `what` when not UTF-8.
///
/// # Safety
/// `ptr` is NULL or NUL-terminated.
unsafe fn punctuation(
    ptr: *const c_char,
    null: &'static str,
    what: &'static str,
) -> Result<String, Error> {
    // SAFETY: the caller's contract.
    match unsafe { args::text(ptr, null) } {
        Ok(text) => Ok(text.to_owned()),
        Err(e) if e.status() == tessel_status::TESSEL_ERR_ARGUMENT => {
            fail(tessel_status::TESSEL_ERR_ARGUMENT, what)
        }
        Err(e) => Err(e),
    }
}

/// The pipeline's options for `options` (NULL: the defaults): the detector's when voice
/// activity detection is on, the batched pipeline's when `batch_size` is above 0.
///
/// # Safety
/// `options` is NULL or valid, its strings NULL or NUL-terminated.
unsafe fn pipeline_options(options: *const tessel_transcribe_options) -> Result<Asked, Error> {
    // SAFETY: the caller's contract.
    let options = unsafe { options.as_ref() }
        .copied()
        .unwrap_or_else(|| tessel_transcribe_options_default());
    let (vad, batched) = batching(&options, options.vad.checked()?)?;
    let (prepend_punctuations, append_punctuations) = if options.word_timestamps {
        // SAFETY: the caller's contract for the strings.
        unsafe {
            (
                punctuation(
                    options.prepend_punctuations,
                    "prepend_punctuations is NULL",
                    "prepend_punctuations is not valid UTF-8",
                )?,
                punctuation(
                    options.append_punctuations,
                    "append_punctuations is NULL",
                    "append_punctuations is not valid UTF-8",
                )?,
            )
        }
    } else {
        (
            PREPEND_PUNCTUATIONS.to_owned(),
            APPEND_PUNCTUATIONS.to_owned(),
        )
    };
    let options = TranscribeOptions {
        beam: options.beam,
        timestamps: options.timestamps,
        condition_on_previous_text: options.condition_on_previous_text,
        task: if options.translate {
            Task::Translate
        } else {
            Task::Transcribe
        },
        // SAFETY: the caller's contract for the strings.
        language: unsafe { optional(options.language, "language") }?,
        // SAFETY: as above.
        initial_prompt: unsafe { optional(options.initial_prompt, "initial_prompt") }?,
        word_timestamps: options.word_timestamps,
        prepend_punctuations,
        append_punctuations,
        patience: options.patience,
        hallucination_silence_threshold: silence_threshold(
            options.hallucination_silence_threshold,
        )?,
        ..TranscribeOptions::default()
    };
    Ok(Asked {
        options,
        vad,
        batched,
    })
}

/// The sequential transcription's detector options (`vad`, checked) and none for the batched
/// pipeline when `options.batch_size` is 0; else none and the batched pipeline's, `vad`
/// cutting the chunks (speech chunks of at most 30 s).
fn batching(
    options: &tessel_transcribe_options,
    vad: Option<VadOptions>,
) -> Result<(Option<VadOptions>, Option<BatchedOptions>), Error> {
    if options.batch_size == 0 {
        if options.multilingual {
            return fail(
                tessel_status::TESSEL_ERR_ARGUMENT,
                "multilingual (a language per chunk) needs batch_size above 0 (the batched \
                 pipeline)",
            );
        }
        return Ok((vad, None));
    }
    let batch_size = args::bounded("batch_size", options.batch_size, args::TESSEL_MAX_BATCH)?;
    let longest = BatchedOptions::default_vad().max_speech_duration_s;
    let batched = BatchedOptions {
        batch_size,
        multilingual: options.multilingual,
        vad_filter: vad.is_some(),
        // Off, the detector's options are not read (but still checked by the pipeline).
        vad: match vad {
            Some(vad) => VadOptions {
                max_speech_duration_s: vad.max_speech_duration_s.min(longest),
                ..vad
            },
            None => BatchedOptions::default_vad(),
        },
    };
    Ok((None, Some(batched)))
}

/// The C field's hallucination threshold: 0 is off, a positive finite value is seconds.
fn silence_threshold(seconds: f64) -> Result<Option<f64>, Error> {
    match seconds {
        0.0 => Ok(None),
        s if s.is_finite() && s > 0.0 => Ok(Some(s)),
        _ => fail(
            tessel_status::TESSEL_ERR_ARGUMENT,
            "hallucination_silence_threshold must be 0 (off) or a positive number of seconds",
        ),
    }
}

/// Where a list of items (segments or words) and their text go: the caller's arrays, their
/// capacities and the sizes to write, with what a refusal calls them.
struct Outputs<T> {
    items: *mut T,
    items_cap: usize,
    n_items: *mut usize,
    text: *mut c_char,
    text_cap: usize,
    text_len: *mut usize,
    names: &'static OutputNames,
}

/// What refusals of one kind of [`Outputs`] say.
struct OutputNames {
    /// A NULL item array.
    items: &'static str,
    /// A NULL item count.
    n_items: &'static str,
    /// An item array or text buffer too small.
    too_small: &'static str,
}

impl Outputs<tessel_segment> {
    /// The outputs of `tessel_transcribe` and `tessel_transcribe_wav`.
    fn segments(
        (segments, segments_cap, n_segments): (*mut tessel_segment, usize, *mut usize),
        (text, text_cap, text_len): (*mut c_char, usize, *mut usize),
    ) -> Self {
        const NAMES: OutputNames = OutputNames {
            items: "segments is NULL",
            n_items: "n_segments is NULL",
            too_small: "the segment array or the text buffer is too small (n_segments and \
                        text_len were written; the transcript is kept for the retry)",
        };
        Outputs {
            items: segments,
            items_cap: segments_cap,
            n_items: n_segments,
            text,
            text_cap,
            text_len,
            names: &NAMES,
        }
    }
}

impl Outputs<tessel_word> {
    /// The outputs of `tessel_transcriber_words`.
    fn words(
        (words, words_cap, n_words): (*mut tessel_word, usize, *mut usize),
        (text, text_cap, text_len): (*mut c_char, usize, *mut usize),
    ) -> Self {
        const NAMES: OutputNames = OutputNames {
            items: "words is NULL",
            n_items: "n_words is NULL",
            too_small: "the word array or the text buffer is too small (n_words and text_len \
                        were written)",
        };
        Outputs {
            items: words,
            items_cap: words_cap,
            n_items: n_words,
            text,
            text_cap,
            text_len,
            names: &NAMES,
        }
    }
}

impl<T: Copy> Outputs<T> {
    /// The item count and text length to write, checked for NULL.
    ///
    /// # Safety
    /// `n_items` and `text_len` are NULL or writable, and not accessed otherwise meanwhile.
    unsafe fn sizes<'a>(&self) -> Result<(&'a mut usize, &'a mut usize), Error> {
        // SAFETY: the caller's contract for each pointer.
        unsafe {
            Ok((
                args::write(self.n_items, self.names.n_items)?,
                args::write(self.text_len, "text_len is NULL")?,
            ))
        }
    }

    /// Writes the sizes of `items` and `text` into `n_items` and `text_len` (from
    /// [`Outputs::sizes`]), then copies both, the text NUL-terminated;
    /// `TESSEL_ERR_BUFFER_TOO_SMALL`, only the sizes written, when either does not fit.
    ///
    /// # Safety
    /// `items` and `text` (the pointers) are NULL or point to their capacities of writable
    /// elements, not accessed otherwise meanwhile.
    unsafe fn put(
        &self,
        (items, text): (&[T], &str),
        n_items: &mut usize,
        text_len: &mut usize,
    ) -> Result<(), Error> {
        *n_items = items.len();
        *text_len = text.len();
        if self.items_cap < items.len() || self.text_cap <= text.len() {
            return fail(
                tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL,
                self.names.too_small,
            );
        }
        // SAFETY: the caller's contract for the arrays and their capacities.
        let (items_out, text_out) = unsafe {
            (
                args::slice_mut(self.items, self.items_cap, self.names.items)?,
                args::slice_mut(self.text.cast::<u8>(), self.text_cap, "text is NULL")?,
            )
        };
        items_out[..items.len()].copy_from_slice(items);
        args::put_text(text, text_out, text_len)
    }
}

/// The transcript of `samples` (of their speech, with voice activity detection) with its
/// segments indexing its text, in the original audio's times.
fn transcript(state: &mut State, samples: &[f32], asked: Asked) -> Result<Last, Error> {
    let segments = match &asked.batched {
        Some(batched) => batched_segments(state, samples, &asked.options, batched)?,
        None => sequential_segments(state, samples, &asked.options, asked.vad.as_ref())?,
    };
    let (segments, text, words, words_text) = flatten(&segments);
    Ok(Last {
        samples: samples.to_vec(),
        asked,
        segments,
        text,
        words,
        words_text,
    })
}

/// The sequential transcription's segments of `samples` (of their speech, with `vad`), in
/// the original audio's times.
fn sequential_segments(
    state: &mut State,
    samples: &[f32],
    options: &TranscribeOptions,
    vad: Option<&VadOptions>,
) -> Result<Vec<Segment>, Error> {
    let speech = match vad {
        Some(vad) => Some(
            state
                .detector
                .speech(samples, vad)
                .map_err(transcribe_error)?,
        ),
        None => None,
    };
    let heard = speech.as_ref().map_or(samples, |speech| &speech.samples);
    if options.word_timestamps && !state.timing_words {
        let (isa, max_beam, threads) = state.planned;
        state.session = state
            .transcriber
            .session_with_words(isa, max_beam, threads)
            .map_err(transcribe_error)?;
        state.timing_words = true;
    }
    let mut segments = Vec::new();
    // No speech: no segments, as faster-whisper gives.
    if !heard.is_empty() {
        let transcript = state
            .session
            .transcribe(heard, options, &mut ())
            .map_err(transcribe_error)?;
        segments = transcript.segments;
    }
    if let Some(speech) = &speech {
        segments = segments.iter().map(|s| speech.restore(s)).collect();
    }
    Ok(segments)
}

/// The batched pipeline's segments of `samples`, in the original audio's times (the pipeline
/// maps them back itself), on the transcriber's batched session: made, or replaced by one
/// with more slots or able to time words, when the kept one cannot run `batched`.
fn batched_segments(
    state: &mut State,
    samples: &[f32],
    options: &TranscribeOptions,
    batched: &BatchedOptions,
) -> Result<Vec<Segment>, Error> {
    // Less than one mel frame: refused as the sequential transcription refuses it.
    if samples.len() < tessel_audio::HOP_LENGTH {
        return Err(transcribe_error(TranscribeError::EmptyAudio));
    }
    let vad = match batched.vad_filter {
        true => Some(state.detector.vad().map_err(transcribe_error)?),
        false => None,
    };
    let words = options.word_timestamps;
    let kept = match &mut state.batched {
        Some(kept) if kept.session.slots() >= batched.batch_size && (kept.words || !words) => kept,
        slot => {
            // The kept session goes first: the two arenas are never held together.
            let (slots, words) = match slot.take() {
                Some(old) => (
                    old.session.slots().max(batched.batch_size),
                    old.words || words,
                ),
                None => (batched.batch_size, words),
            };
            let (isa, max_beam, threads) = state.planned;
            let session = state
                .transcriber
                .batched_session(isa, (max_beam, slots), threads, words)
                .map_err(transcribe_error)?;
            slot.insert(Batched { session, words })
        }
    };
    let done = kept
        .session
        .transcribe(samples, options, batched, vad, &mut ())
        .map_err(transcribe_error)?;
    Ok(done.transcript.segments)
}

/// The C segments of `segments` indexing their text, concatenated, and their words indexing
/// the words' text, concatenated.
fn flatten(segments: &[Segment]) -> (Vec<tessel_segment>, String, Vec<tessel_word>, String) {
    let (mut text, mut words, mut words_text) = (String::new(), Vec::new(), String::new());
    let segments = segments
        .iter()
        .map(|s| {
            let (text_offset, first_word) = (text.len(), words.len());
            text.push_str(&s.text);
            for w in &s.words {
                words.push(tessel_word {
                    start: w.start,
                    end: w.end,
                    probability: w.probability,
                    text_offset: words_text.len(),
                    text_len: w.word.len(),
                });
                words_text.push_str(&w.word);
            }
            tessel_segment {
                start: s.start,
                end: s.end,
                text_offset,
                text_len: s.text.len(),
                first_word,
                n_words: s.words.len(),
            }
        })
        .collect();
    (segments, text, words, words_text)
}

/// Transcribes `samples` (or copies the kept transcript of the same audio and options) into
/// `outputs`.
///
/// # Safety
/// `outputs` holds NULL or valid pointers for their capacities.
unsafe fn run(
    state: &mut State,
    samples: &[f32],
    asked: Asked,
    outputs: &Outputs<tessel_segment>,
) -> Result<(), Error> {
    // SAFETY: the caller's contract for each pointer.
    let (n_segments, text_len) = unsafe { outputs.sizes() }?;
    let kept = matches!(&state.last, Some(last)
        if last.asked == asked
            && last.samples.len() == samples.len()
            && last.samples.iter().zip(samples).all(|(a, b)| a.to_bits() == b.to_bits()));
    let last = match state.last.take() {
        Some(last) if kept => state.last.insert(last),
        previous => match transcript(state, samples, asked) {
            Ok(fresh) => state.last.insert(fresh),
            Err(error) => {
                state.last = previous;
                return Err(error);
            }
        },
    };
    state.current = true;
    // SAFETY: the caller's contract for the arrays and their capacities.
    unsafe { outputs.put((&last.segments, &last.text), n_segments, text_len) }
}

/// The audio a transcription call names: the caller's samples or a WAV file.
enum Audio<'a> {
    Samples(&'a [f32]),
    Wav(&'a str),
}

/// Under the transcriber's lock, takes the audio from `audio` and the options from `options`
/// (in that order, so a missing input is named first), decodes a WAV file, and transcribes
/// into `outputs` as [`run`] does.
///
/// # Safety
/// `transcriber` is NULL or a live transcriber; `options` as [`pipeline_options`] requires;
/// `outputs` holds NULL or valid pointers for their capacities.
unsafe fn transcribe_into<'a>(
    transcriber: *mut tessel_transcriber,
    audio: impl FnOnce() -> Result<Audio<'a>, Error>,
    options: *const tessel_transcribe_options,
    outputs: &Outputs<tessel_segment>,
) -> tessel_status {
    let body = |state: &mut State| {
        state.current = false;
        let audio = audio()?;
        // SAFETY: the caller's contract for `options`.
        let asked = unsafe { pipeline_options(options) }?;
        let decoded;
        let samples = match audio {
            Audio::Samples(samples) => samples,
            Audio::Wav(path) => {
                decoded = load_wav(Path::new(path), &ReadOptions::default())
                    .map_err(|e| transcribe_error(TranscribeError::Audio(e)))?;
                &decoded.samples
            }
        };
        // SAFETY: the caller's contract for the outputs.
        unsafe { run(state, samples, asked, outputs) }
    };
    // SAFETY: the caller's contract for `transcriber`; its state is a `State`.
    unsafe { exclusive::with(transcriber, KIND, body) }
}

/// Transcribes `samples[0..n_samples]`, 16 kHz mono floats in [-1, 1], as `options` (NULL:
/// the defaults) say. Writes the segments, in time order, into `segments` (`segments_cap`
/// of them) and their count into `*n_segments`; their texts, concatenated and NUL-terminated
/// (the transcript's text), into `text` (`text_cap` bytes) and its length without the NUL into
/// `*text_len`. When `segments_cap < *n_segments` or `text_cap <= *text_len` the call returns
/// `TESSEL_ERR_BUFFER_TOO_SMALL` with both sizes written and keeps the transcript: a retry
/// with the same samples and options copies it. With `options.word_timestamps`, each
/// segment's `first_word` and `n_words` name its words, which `tessel_transcriber_words`
/// copies after this call (after `TESSEL_OK` or `TESSEL_ERR_BUFFER_TOO_SMALL`). With
/// `options.batch_size` above 0 the batched pipeline transcribes (see the field), words
/// included. Refused: less than 10 ms of audio, non-finite samples, options out of range (a
/// beam of 0 or above the transcriber's `max_beam`, a language as `language` says,
/// `translate` on an English-only model, `vad` as `tessel_vad_options` says, punctuation
/// strings that are not UTF-8, `patience`, `hallucination_silence_threshold`, `batch_size`
/// or `multilingual` as their fields say), and with `batch_size` above 0 audio of 30 s or
/// more with `vad.enabled` false (`TESSEL_ERR_ARGUMENT`); a NULL punctuation string with
/// word timestamps (`TESSEL_ERR_NULL`); a batched session whose arena cannot be allocated
/// (`TESSEL_ERR_OUT_OF_MEMORY`); generated ids the tokenizer cannot decode are
/// `TESSEL_ERR_RUN`. Allocates.
///
/// # Safety
/// `transcriber` is NULL or a live transcriber; `samples` is NULL or points to `n_samples`
/// floats; `options` is NULL or valid; `segments` and `text` are NULL or point to their
/// capacities of writable elements; `n_segments` and `text_len` are NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn tessel_transcribe(
    transcriber: *mut tessel_transcriber,
    samples: *const f32,
    n_samples: usize,
    options: *const tessel_transcribe_options,
    segments: *mut tessel_segment,
    segments_cap: usize,
    n_segments: *mut usize,
    text: *mut c_char,
    text_cap: usize,
    text_len: *mut usize,
) -> tessel_status {
    let out = Outputs::segments(
        (segments, segments_cap, n_segments),
        (text, text_cap, text_len),
    );
    // SAFETY: the caller's contract for `samples`.
    let audio =
        || unsafe { args::slice(samples, n_samples, "samples is NULL") }.map(Audio::Samples);
    // SAFETY: the caller's contract for `transcriber`, `options` and the outputs.
    unsafe { transcribe_into(transcriber, audio, options, &out) }
}

/// `tessel_transcribe` over the WAV file at `path` (UTF-8, NUL-terminated; PCM 8/16/24/32-bit
/// or float, any rate and channel count, mixed to mono and resampled to 16 kHz). A file that
/// cannot be read or decoded is `TESSEL_ERR_LOAD`.
///
/// # Safety
/// As `tessel_transcribe`, with `path` NULL or NUL-terminated.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn tessel_transcribe_wav(
    transcriber: *mut tessel_transcriber,
    path: *const c_char,
    options: *const tessel_transcribe_options,
    segments: *mut tessel_segment,
    segments_cap: usize,
    n_segments: *mut usize,
    text: *mut c_char,
    text_cap: usize,
    text_len: *mut usize,
) -> tessel_status {
    let out = Outputs::segments(
        (segments, segments_cap, n_segments),
        (text, text_cap, text_len),
    );
    // SAFETY: the caller's contract for `path`.
    let audio = || unsafe { args::text(path, "path is NULL") }.map(Audio::Wav);
    // SAFETY: the caller's contract for `transcriber`, `options` and the outputs.
    unsafe { transcribe_into(transcriber, audio, options, &out) }
}

/// Copies the words of the transcriber's latest transcription (`tessel_transcribe` or
/// `tessel_transcribe_wav` with `options.word_timestamps`, which returned `TESSEL_OK` or
/// `TESSEL_ERR_BUFFER_TOO_SMALL`): every segment's words in order, segment `i`'s at
/// `words[segments[i].first_word ..]` (`segments[i].n_words` of them), into `words`
/// (`words_cap` of them) and their count into `*n_words`; their texts, concatenated and
/// NUL-terminated, into `text` (`text_cap` bytes), each word indexing it, and its length
/// without the NUL into `*text_len`. When `words_cap < *n_words` or `text_cap <= *text_len`
/// the call returns `TESSEL_ERR_BUFFER_TOO_SMALL` with both sizes written; the words stay
/// readable. `TESSEL_ERR_RUN` when the latest transcription call failed (or there was none)
/// or did not time words. Changes nothing in the transcriber.
///
/// # Safety
/// `transcriber` is NULL or a live transcriber; `words` and `text` are NULL or point to their
/// capacities of writable elements; `n_words` and `text_len` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_transcriber_words(
    transcriber: *mut tessel_transcriber,
    words: *mut tessel_word,
    words_cap: usize,
    n_words: *mut usize,
    text: *mut c_char,
    text_cap: usize,
    text_len: *mut usize,
) -> tessel_status {
    let out = Outputs::words((words, words_cap, n_words), (text, text_cap, text_len));
    let body = |state: &mut State| {
        // SAFETY: the caller's contract for each pointer.
        let (n_words, text_len) = unsafe { out.sizes() }?;
        let last = match &state.last {
            Some(last) if state.current => last,
            _ => {
                return fail(
                    tessel_status::TESSEL_ERR_RUN,
                    "no transcript to read words from: the latest tessel_transcribe call on \
                     this transcriber failed, or there was none",
                )
            }
        };
        if !last.asked.options.word_timestamps {
            return fail(
                tessel_status::TESSEL_ERR_RUN,
                "the latest transcription did not time words (options.word_timestamps was \
                 false)",
            );
        }
        // SAFETY: the caller's contract for the arrays and their capacities.
        unsafe { out.put((&last.words, &last.words_text), n_words, text_len) }
    };
    // SAFETY: the caller's contract for `transcriber`; its state is a `State`.
    unsafe { exclusive::with(transcriber, KIND, body) }
}

/// Frees `transcriber` (NULL is accepted). `TESSEL_ERR_BUSY` if another thread is inside a
/// call on it (then nothing is freed).
///
/// # Safety
/// `transcriber` is NULL or a live transcriber; it must not be used after success.
#[no_mangle]
pub unsafe extern "C" fn tessel_transcriber_free(
    transcriber: *mut tessel_transcriber,
) -> tessel_status {
    // SAFETY: the caller's contract; its state is a `State`.
    unsafe { exclusive::free::<State, _>(transcriber, KIND) }
}
