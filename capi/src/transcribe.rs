//! `tessel_transcriber` and `tessel_transcribe`: speech to timed text with a Whisper model
//! directory, through the pipeline's [`Transcriber`] (openai-whisper's algorithm as
//! faster-whisper runs it: 30 s windows, timestamps, temperature fallback, conditioning on
//! the previous text).
//!
//! A transcriber holds the model, the tokenizer and one session (one thread at a time). A
//! transcription writes its segments into a caller array of [`tessel_segment`] and their
//! texts, concatenated, into one caller text buffer that each segment indexes; when either is
//! too small the call reports both sizes and keeps the transcript, so that the retry with
//! the same audio and options copies it instead of transcribing again. Task-level calls
//! allocate (the spectrogram, the segments' text); only the token-level calls of
//! `tessel_session` do not.

use std::ffi::c_char;
use std::path::Path;

use tessel_audio::{load_wav, ReadOptions};
use tessel_model::load::directory::Modality;
use tessel_model::SessionError;
use tessel_pipeline::transcribe::{
    TranscribeError, TranscribeOptions, TranscribeSession, Transcriber, VadError, VadOptions,
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
}

/// How `tessel_transcribe` decodes. Start from `tessel_transcribe_options_default()`.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct tessel_transcribe_options {
    /// Beam width at temperature 0 (1: greedy; at most the transcriber's `max_beam`).
    /// Default 5.
    pub beam: usize,
    /// Timed segments within each window (default true); false gives one segment per window.
    pub timestamps: bool,
    /// Prompt each window with the text so far (default true).
    pub condition_on_previous_text: bool,
    /// Translate to English instead of transcribing (multilingual models). Default false.
    pub translate: bool,
    /// Spoken language (code or English name, one of Whisper's 100), or NULL (the default)
    /// to detect it on multilingual models. An unknown code, a language the vocabulary lacks,
    /// or any language but English on an English-only model is `TESSEL_ERR_ARGUMENT`.
    pub language: *const c_char,
    /// Text to condition the first window on, or NULL (the default).
    pub initial_prompt: *const c_char,
    /// Voice activity detection first (default off): only the speech is transcribed, and
    /// the segments' times are the original audio's.
    pub vad: tessel_vad_options,
}

/// The reference's defaults: beam 5, timestamps, conditioned on previous text, transcribe,
/// language detected, no prompt (temperature fallback 0, 0.2 … 1.0 with best of 5), no voice
/// activity detection.
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
    }
}

/// A transcriber's state.
struct State {
    session: TranscribeSession,
    detector: Detector,
    /// The last audio and options, with their segments and text, kept for a retry with larger
    /// buffers.
    last: Option<Last>,
}

struct Last {
    samples: Vec<f32>,
    options: (TranscribeOptions, Option<VadOptions>),
    segments: Vec<tessel_segment>,
    text: String,
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
/// positions (448). `multilingual` is 1 to treat the model as multilingual (language and task
/// tokens, language detection), 0 as English-only, -1 to decide by its vocabulary size as the
/// reference does. Refused: a directory that cannot be loaded (`TESSEL_ERR_LOAD`); a
/// directory of a text-to-text model or a model that does not read audio
/// (`TESSEL_ERR_UNSUPPORTED`, naming what the directory is); `max_beam` or `threads` out of
/// range, `multilingual` outside -1..=1, or 1 for a model its directory says is English-only
/// (a `.en` vocabulary of 51864 tokens, CTranslate2's empty `lang_ids`, `is_multilingual:
/// false`), which would end every window at once (`TESSEL_ERR_ARGUMENT`). On success `*out`
/// holds the transcriber. Allocates (the weights, the tokenizer, the arena).
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
        let (path, out) = unsafe {
            (
                args::text(path, "path is NULL")?,
                args::write(out, "out is NULL")?,
            )
        };
        *out = std::ptr::null_mut();
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
        let session = transcriber
            .session(isa, max_beam, threads.max(1))
            .map_err(transcribe_error)?;
        *out = exclusive::into_raw(
            KIND,
            State {
                session,
                detector: Detector::new(isa),
                last: None,
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

/// The pipeline's options for `options` (NULL: the defaults), and the detector's when voice
/// activity detection is on.
///
/// # Safety
/// `options` is NULL or valid, its strings NULL or NUL-terminated.
unsafe fn pipeline_options(
    options: *const tessel_transcribe_options,
) -> Result<(TranscribeOptions, Option<VadOptions>), Error> {
    // SAFETY: the caller's contract.
    let options = unsafe { options.as_ref() }
        .copied()
        .unwrap_or_else(|| tessel_transcribe_options_default());
    let vad = options.vad.checked()?;
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
        ..TranscribeOptions::default()
    };
    Ok((options, vad))
}

/// Where a transcription goes: the caller's arrays and sizes.
struct Outputs {
    segments: *mut tessel_segment,
    segments_cap: usize,
    n_segments: *mut usize,
    text: *mut c_char,
    text_cap: usize,
    text_len: *mut usize,
}

/// The transcript of `samples` (of their speech, with voice activity detection) with its
/// segments indexing its text, in the original audio's times.
fn transcript(
    state: &mut State,
    samples: &[f32],
    (options, vad): (TranscribeOptions, Option<VadOptions>),
) -> Result<Last, Error> {
    let speech = match &vad {
        Some(vad) => Some(
            state
                .detector
                .speech(samples, vad)
                .map_err(transcribe_error)?,
        ),
        None => None,
    };
    let heard = speech.as_ref().map_or(samples, |speech| &speech.samples);
    let mut segments = Vec::new();
    // No speech: no segments, as faster-whisper gives.
    if !heard.is_empty() {
        let transcript = state
            .session
            .transcribe(heard, &options, &mut ())
            .map_err(transcribe_error)?;
        segments = transcript.segments;
    }
    if let Some(speech) = &speech {
        segments = segments.iter().map(|s| speech.restore(s)).collect();
    }
    let mut text = String::new();
    let segments = segments
        .iter()
        .map(|s| {
            let text_offset = text.len();
            text.push_str(&s.text);
            tessel_segment {
                start: s.start,
                end: s.end,
                text_offset,
                text_len: s.text.len(),
            }
        })
        .collect();
    Ok(Last {
        samples: samples.to_vec(),
        options: (options, vad),
        segments,
        text,
    })
}

/// Transcribes `samples` (or copies the kept transcript of the same audio and options) into
/// `outputs`.
///
/// # Safety
/// `outputs` holds NULL or valid pointers for their capacities.
unsafe fn run(
    state: &mut State,
    samples: &[f32],
    options: (TranscribeOptions, Option<VadOptions>),
    outputs: &Outputs,
) -> Result<(), Error> {
    // SAFETY: the caller's contract for each pointer.
    let (n_segments, text_len) = unsafe {
        (
            args::write(outputs.n_segments, "n_segments is NULL")?,
            args::write(outputs.text_len, "text_len is NULL")?,
        )
    };
    let kept = matches!(&state.last, Some(last)
        if last.options == options
            && last.samples.len() == samples.len()
            && last.samples.iter().zip(samples).all(|(a, b)| a.to_bits() == b.to_bits()));
    let last = match state.last.take() {
        Some(last) if kept => state.last.insert(last),
        previous => match transcript(state, samples, options) {
            Ok(fresh) => state.last.insert(fresh),
            Err(error) => {
                state.last = previous;
                return Err(error);
            }
        },
    };
    *n_segments = last.segments.len();
    *text_len = last.text.len();
    if outputs.segments_cap < last.segments.len() || outputs.text_cap <= last.text.len() {
        return fail(
            tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL,
            "the segment array or the text buffer is too small (n_segments and text_len were \
             written; the transcript is kept for the retry)",
        );
    }
    // SAFETY: the caller's contract for the arrays and their capacities.
    let (segments, text) = unsafe {
        (
            args::slice_mut(outputs.segments, outputs.segments_cap, "segments is NULL")?,
            args::slice_mut(outputs.text.cast::<u8>(), outputs.text_cap, "text is NULL")?,
        )
    };
    segments[..last.segments.len()].copy_from_slice(&last.segments);
    args::put_text(&last.text, text, text_len)
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
    outputs: &Outputs,
) -> tessel_status {
    let body = |state: &mut State| {
        let audio = audio()?;
        // SAFETY: the caller's contract for `options`.
        let options = unsafe { pipeline_options(options) }?;
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
        unsafe { run(state, samples, options, outputs) }
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
/// with the same samples and options copies it. Refused: less than 10 ms of audio,
/// non-finite samples, options out of range (a beam of 0 or above the transcriber's
/// `max_beam`, a language as `language` says, `translate` on an English-only model, `vad` as
/// `tessel_vad_options` says) (`TESSEL_ERR_ARGUMENT`); generated ids the tokenizer cannot
/// decode are `TESSEL_ERR_RUN`.
/// Allocates.
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
    let outputs = Outputs {
        segments,
        segments_cap,
        n_segments,
        text,
        text_cap,
        text_len,
    };
    // SAFETY: the caller's contract for `samples`.
    let audio =
        || unsafe { args::slice(samples, n_samples, "samples is NULL") }.map(Audio::Samples);
    // SAFETY: the caller's contract for `transcriber`, `options` and the outputs.
    unsafe { transcribe_into(transcriber, audio, options, &outputs) }
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
    let outputs = Outputs {
        segments,
        segments_cap,
        n_segments,
        text,
        text_cap,
        text_len,
    };
    // SAFETY: the caller's contract for `path`.
    let audio = || unsafe { args::text(path, "path is NULL") }.map(Audio::Wav);
    // SAFETY: the caller's contract for `transcriber`, `options` and the outputs.
    unsafe { transcribe_into(transcriber, audio, options, &outputs) }
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
