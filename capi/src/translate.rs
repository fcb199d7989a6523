//! `tessel_translator` and `tessel_translate`: text to text over a translation model
//! directory (Marian, BART/mBART, M2M100/NLLB, T5 or CTranslate2 with its tokenizer), through
//! the pipeline's [`Translator`]: the directory's tokenizer, its generation config, the source
//! and target languages.
//!
//! A translator holds the model, the tokenizer and one session (one thread at a time). A
//! translation writes the best hypothesis's text into the caller's buffer; when the buffer is
//! too small the call reports the length and keeps the text, so that the retry with the same
//! source and a larger buffer copies it instead of translating again. Task-level calls
//! allocate (tokens, strings); only the token-level calls of `tessel_session` do not.

use std::ffi::c_char;
use std::path::Path;
use std::str::FromStr;

use tessel_model::load::directory::Modality;
use tessel_model::{SessionError, WeightType};
use tessel_pipeline::{
    generation_defaults, LoadSettings, TranslateError, TranslateOptions, Translating, Translator,
};
use tessel_text::TextError;

use crate::args;
use crate::dir_kind;
use crate::exclusive;
use crate::info;
use crate::status::{guard, tessel_status, Error};

/// A translator handle: "tsltrans" in its first word.
const KIND: exclusive::Kind = exclusive::Kind::task(u64::from_le_bytes(*b"tsltrans"));

/// A translation model with its tokenizer and one session; used by one thread at a time.
/// Created by `tessel_translator_load`, freed by `tessel_translator_free`.
#[allow(non_camel_case_types)]
pub struct tessel_translator {
    _opaque: [u8; 0],
}

/// How `tessel_translator_load` sets a translator up. Start from
/// `tessel_translate_options_default()`.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct tessel_translate_options {
    /// Source language code (e.g. "eng_Latn" for NLLB, "en_XX" for mBART), for the families
    /// that take one; NULL for the tokenizer's default or families without languages.
    pub source_lang: *const c_char,
    /// Target language code, as `source_lang` (it becomes the forced first token).
    pub target_lang: *const c_char,
    /// Beam width, 1..=`TESSEL_MAX_BEAM` (128); 0 (the default) for the directory's
    /// generation config (`num_beams`, or `num_return_sequences` when larger), which the
    /// session is then planned for.
    pub beam: usize,
    /// Cut sources longer than the model reads (keeping the closing token) instead of
    /// refusing them with `TESSEL_ERR_ARGUMENT`. Default false.
    pub truncate: bool,
    /// Threads each GEMM runs on, at most `TESSEL_MAX_THREADS` (64); 0 (the default) for 1.
    pub threads: usize,
    /// Storage of the linear weights ("f32", "f16", "bf16", "bf16-dot"), NULL (the default)
    /// for the stored type.
    pub weights: *const c_char,
}

/// The default translator setup: the tokenizer's languages, the directory's beam, no
/// truncation, one thread, stored weights.
#[no_mangle]
pub extern "C" fn tessel_translate_options_default() -> tessel_translate_options {
    tessel_translate_options {
        source_lang: std::ptr::null(),
        target_lang: std::ptr::null(),
        beam: 0,
        truncate: false,
        threads: 0,
        weights: std::ptr::null(),
    }
}

/// A translator's state.
struct State {
    session: Translating,
    options: TranslateOptions,
    /// The last source and its translation, kept for a retry with a larger buffer.
    last: Option<(String, String)>,
}

fn translate_error(error: TranslateError) -> Error {
    let status = match &error {
        TranslateError::ModelDir(_) => tessel_status::TESSEL_ERR_LOAD,
        // Ids the model generated that its tokenizer lacks: not the caller's text.
        TranslateError::Tokenizer(TextError::UnknownId { .. }) => tessel_status::TESSEL_ERR_RUN,
        TranslateError::Tokenizer(_) | TranslateError::SourceTooLong { .. } => {
            tessel_status::TESSEL_ERR_ARGUMENT
        }
        TranslateError::NotTextModel(_) => tessel_status::TESSEL_ERR_UNSUPPORTED,
        TranslateError::Session(SessionError::OutOfMemory { .. }) => {
            tessel_status::TESSEL_ERR_OUT_OF_MEMORY
        }
        TranslateError::Session(_) => tessel_status::TESSEL_ERR_ARGUMENT,
        TranslateError::Run(_) => tessel_status::TESSEL_ERR_RUN,
    };
    Error::boxed(status, error)
}

/// An optional C string.
///
/// # Safety
/// `ptr` is NULL or NUL-terminated.
unsafe fn optional<'a>(ptr: *const c_char, what: &'static str) -> Result<Option<&'a str>, Error> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    unsafe { args::text(ptr, what) }.map(Some)
}

/// The widest beam the translator's session is planned for: the options' beam, else the
/// generation config's (`num_beams`, or `num_return_sequences` when larger).
fn planned_beam(dir: &Path, options: &tessel_translate_options) -> Result<usize, Error> {
    if options.beam > 0 {
        return args::bounded("beam", options.beam, args::TESSEL_MAX_BEAM);
    }
    let generation =
        generation_defaults(dir).map_err(|e| translate_error(TranslateError::ModelDir(e)))?;
    let decode = &generation.options;
    let beam = decode.search.beam.max(decode.num_hypotheses).max(1);
    if beam > args::TESSEL_MAX_BEAM {
        return Err(Error::boxed(
            tessel_status::TESSEL_ERR_UNSUPPORTED,
            format!(
                "{}: the generation config asks for beam {beam}, above TESSEL_MAX_BEAM ({}); \
                 set tessel_translate_options.beam",
                dir.display(),
                args::TESSEL_MAX_BEAM
            ),
        ));
    }
    Ok(beam)
}

fn load(dir: &Path, options: &tessel_translate_options) -> Result<State, Error> {
    // SAFETY: the caller of `tessel_translator_load` guarantees NULL or NUL-terminated strings.
    let (source, target, weights) = unsafe {
        (
            optional(options.source_lang, "source_lang")?,
            optional(options.target_lang, "target_lang")?,
            optional(options.weights, "weights")?,
        )
    };
    let weights = weights
        .map(WeightType::from_str)
        .transpose()
        .map_err(|e| Error::boxed(tessel_status::TESSEL_ERR_ARGUMENT, e))?;
    dir_kind::require(dir, Modality::Text)?;
    let settings = LoadSettings {
        max_beam: planned_beam(dir, options)?,
        weights,
        ..LoadSettings::default()
    };
    let translator = Translator::load(dir, settings, source, target).map_err(translate_error)?;
    let mut defaults = translator.defaults().clone();
    if options.beam > 0 {
        defaults.decode.search.beam = options.beam;
        defaults.decode.num_hypotheses = 1;
    }
    defaults.truncate = options.truncate;
    let session = translator
        .session(info::session_isa()?, options.threads.max(1))
        .map_err(translate_error)?;
    Ok(State {
        session,
        options: defaults,
        last: None,
    })
}

/// Loads the translation model in directory `path` (UTF-8, NUL-terminated) with its tokenizer
/// and generation config, and creates its session, as `options` (NULL: the defaults) say: it
/// is planned for `options->beam`, or without one for the generation config's beam, so every
/// translation with the defaults fits it. Refused: a directory that cannot be loaded
/// (`TESSEL_ERR_LOAD`), an unknown language code, a beam above `TESSEL_MAX_BEAM` or threads
/// above `TESSEL_MAX_THREADS` (`TESSEL_ERR_ARGUMENT`), a speech model or a generation config
/// asking for a beam above `TESSEL_MAX_BEAM` (`TESSEL_ERR_UNSUPPORTED`, naming what the
/// directory is). On success `*out` holds the translator. Allocates (the weights, the
/// tokenizer, the arena).
///
/// # Safety
/// `path` is NULL or NUL-terminated; `options` is NULL or valid, its strings NULL or
/// NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_translator_load(
    path: *const c_char,
    options: *const tessel_translate_options,
    out: *mut *mut tessel_translator,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract for each pointer.
        let (path, options, out) = unsafe {
            (
                args::text(path, "path is NULL")?,
                options.as_ref().copied(),
                args::write(out, "out is NULL")?,
            )
        };
        *out = std::ptr::null_mut();
        let options = options.unwrap_or_else(|| tessel_translate_options_default());
        let state = load(Path::new(path), &options)?;
        *out = exclusive::into_raw(KIND, state);
        Ok(())
    })
}

/// Translates `text` (UTF-8, NUL-terminated) and writes the best hypothesis's text,
/// NUL-terminated, into `out` (`cap` bytes) and its length without the NUL into `*len`.
/// `TESSEL_ERR_BUFFER_TOO_SMALL` with `*len` written when `cap <= *len`: the translation is
/// kept, and a retry with the same text copies it. A source the tokenizer refuses, or longer
/// than the model's `max_src_len` without `truncate`, is `TESSEL_ERR_ARGUMENT`; generated ids
/// the tokenizer cannot decode are `TESSEL_ERR_RUN`.
/// Allocates (tokens and strings).
///
/// # Safety
/// `translator` is NULL or a live translator; `text` is NULL or NUL-terminated; `out` is NULL
/// or points to `cap` writable bytes; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_translate(
    translator: *mut tessel_translator,
    text: *const c_char,
    out: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> tessel_status {
    let body = |state: &mut State| {
        // SAFETY: the caller's contract for each pointer.
        let (text, out, len) = unsafe {
            (
                args::text(text, "text is NULL")?,
                args::slice_mut(out.cast::<u8>(), cap, "out is NULL")?,
                args::write(len, "len is NULL")?,
            )
        };
        let cached = matches!(&state.last, Some((source, _)) if source == text);
        if !cached {
            state.last = None;
            let mut best = state
                .session
                .translate_with(text, &state.options)
                .map_err(translate_error)?;
            let output = if best.is_empty() {
                String::new()
            } else {
                best.swap_remove(0).text
            };
            state.last = Some((text.to_owned(), output));
        }
        let output = state
            .last
            .as_ref()
            .map_or("", |(_, output)| output.as_str());
        args::put_text(output, out, len)
    };
    // SAFETY: the caller's contract for `translator`; its state is a `State`.
    unsafe { exclusive::with(translator, KIND, body) }
}

/// Frees `translator` (NULL is accepted). `TESSEL_ERR_BUSY` if another thread is inside a
/// call on it (then nothing is freed).
///
/// # Safety
/// `translator` is NULL or a live translator; it must not be used after success.
#[no_mangle]
pub unsafe extern "C" fn tessel_translator_free(
    translator: *mut tessel_translator,
) -> tessel_status {
    // SAFETY: the caller's contract; its state is a `State`.
    unsafe { exclusive::free::<State, _>(translator, KIND) }
}
