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

use std::ffi::{c_char, CStr};
use std::path::Path;
use std::str::FromStr;

use tessel_model::load::directory::Modality;
use tessel_model::{SessionError, WeightType};
use tessel_pipeline::{
    generation_defaults, BatchTranslating, LoadSettings, TranslateError, TranslateOptions,
    Translating, Translator,
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
    /// Threads each GEMM runs on.
    threads: usize,
    /// The last source and its translation, kept for a retry with a larger buffer.
    last: Option<(String, String)>,
    /// The batched session of `tessel_translate_batch`, made by its first call.
    batch: Option<BatchTranslating>,
    /// The last lines of `tessel_translate_batch` and their outputs, kept for a retry.
    last_lines: Option<(Vec<String>, Vec<LineOutput>)>,
}

/// One line's translation, or its failure's status and message.
type LineOutput = Result<String, (tessel_status, String)>;

fn translate_error(error: TranslateError) -> Error {
    Error::boxed(translate_status(&error), error)
}

/// The status of a translation failure.
fn translate_status(error: &TranslateError) -> tessel_status {
    match error {
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
    }
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
    let threads = options.threads.max(1);
    let session = translator
        .session(info::session_isa()?, threads)
        .map_err(translate_error)?;
    Ok(State {
        session,
        options: defaults,
        threads,
        last: None,
        batch: None,
        last_lines: None,
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
                args::handle_out(out)?,
            )
        };
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
        let (text, out, len) = unsafe { args::text_to_text(text, (out, cap, len)) }?;
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

/// Translates `lines[0..n]` (each UTF-8, NUL-terminated) decoding up to `max_batch` of them
/// together (1..=`TESSEL_MAX_BATCH`), sorted by length as CTranslate2's `translate_batch`
/// does; each line's text is the one `tessel_translate` gives it. The outputs are written in
/// input order into `out` (`cap` bytes), each NUL-terminated, line `i`'s from
/// `out + offsets[i]` (`offsets`: `n` entries); `*len` receives the bytes they take, NULs
/// included. `TESSEL_ERR_BUFFER_TOO_SMALL` with `*len` and `offsets` written when
/// `cap < *len`: the outputs are kept, and a retry with the same lines copies them. A line
/// that fails (refused by the tokenizer, too long without `truncate`) gets an empty output
/// and its status in `statuses[i]` (NULL to skip; `TESSEL_OK` for the others), and the call
/// returns the first failing line's status, its message naming the line, after writing every
/// output. The first call, and one with another `max_batch`, plans the batch's arena.
/// Allocates.
///
/// # Safety
/// `translator` is NULL or a live translator; `lines` is NULL or points to `n` pointers,
/// each NULL or NUL-terminated; `out` is NULL or points to `cap` writable bytes; `offsets` is
/// NULL or points to `n` writable sizes; `len` is NULL or writable; `statuses` is NULL or
/// points to `n` writable statuses.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // The C signature: inputs, output buffer, layout, statuses.
pub unsafe extern "C" fn tessel_translate_batch(
    translator: *mut tessel_translator,
    lines: *const *const c_char,
    n: usize,
    max_batch: usize,
    out: *mut c_char,
    cap: usize,
    offsets: *mut usize,
    len: *mut usize,
    statuses: *mut tessel_status,
) -> tessel_status {
    let body = |state: &mut State| {
        // SAFETY: the caller's contract for each pointer.
        let (lines, out, offsets, len, statuses) = unsafe {
            (
                line_texts(args::slice(lines, n, "lines is NULL")?)?,
                args::slice_mut(out.cast::<u8>(), cap, "out is NULL")?,
                args::slice_mut(offsets, n, "offsets is NULL")?,
                args::write(len, "len is NULL")?,
                match statuses.is_null() {
                    true => None,
                    false => Some(args::slice_mut(statuses, n, "statuses is NULL")?),
                },
            )
        };
        let max_batch = args::bounded("max_batch", max_batch, args::TESSEL_MAX_BATCH)?;
        let outputs = batch_outputs(state, &lines, max_batch)?;
        if let Some(statuses) = statuses {
            for (status, output) in statuses.iter_mut().zip(outputs) {
                *status = output
                    .as_ref()
                    .map_or_else(|e| e.0, |_| tessel_status::TESSEL_OK);
            }
        }
        put_lines(outputs, out, offsets, len)?;
        match outputs
            .iter()
            .enumerate()
            .find_map(|(i, o)| Some(i).zip(o.as_ref().err()))
        {
            Some((i, (status, message))) => {
                Err(Error::boxed(*status, format!("line {i}: {message}")))
            }
            None => Ok(()),
        }
    };
    // SAFETY: the caller's contract for `translator`; its state is a `State`.
    unsafe { exclusive::with(translator, KIND, body) }
}

/// The lines `pointers` point to, or `TESSEL_ERR_NULL` / `TESSEL_ERR_ARGUMENT` naming the
/// first that is NULL or not UTF-8.
///
/// # Safety
/// Every pointer is NULL or NUL-terminated.
unsafe fn line_texts<'a>(pointers: &[*const c_char]) -> Result<Vec<&'a str>, Error> {
    pointers
        .iter()
        .enumerate()
        .map(|(i, &line)| {
            if line.is_null() {
                return Err(Error::boxed(
                    tessel_status::TESSEL_ERR_NULL,
                    format!("lines[{i}] is NULL"),
                ));
            }
            // SAFETY: the caller's contract: non-NULL, NUL-terminated.
            let text = unsafe { CStr::from_ptr(line) };
            text.to_str().map_err(|e| {
                Error::boxed(
                    tessel_status::TESSEL_ERR_ARGUMENT,
                    format!("lines[{i}] is not UTF-8: {e}"),
                )
            })
        })
        .collect()
}

/// The outputs of `lines`: kept from the last call with the same lines, else translated by the
/// state's batched session (made for `max_batch` slots when it has another count).
fn batch_outputs<'s>(
    state: &'s mut State,
    lines: &[&str],
    max_batch: usize,
) -> Result<&'s [LineOutput], Error> {
    let kept = matches!(&state.last_lines, Some((last, _)) if last.iter().eq(lines.iter()));
    if !kept {
        state.last_lines = None;
        let batch = match state.batch.take() {
            Some(batch) if batch.max_batch() == max_batch => state.batch.insert(batch),
            _ => {
                let isa = info::session_isa()?;
                let batch = state
                    .session
                    .translator()
                    .batch(isa, state.threads, max_batch);
                state.batch.insert(batch.map_err(translate_error)?)
            }
        };
        let outputs = batch
            .translate_lines(lines, &state.options)
            .into_iter()
            .map(|result| match result {
                Ok(mut best) if !best.is_empty() => Ok(best.swap_remove(0).text),
                Ok(_) => Ok(String::new()),
                Err(e) => Err((translate_status(&e), e.to_string())),
            })
            .collect();
        let lines = lines.iter().map(|line| (*line).to_owned()).collect();
        state.last_lines = Some((lines, outputs));
    }
    Ok(state
        .last_lines
        .as_ref()
        .map_or(&[], |(_, outputs)| outputs))
}

/// A line's output text: empty when it failed.
fn line_text(output: &LineOutput) -> &str {
    output.as_ref().map_or("", String::as_str)
}

/// Writes `outputs` (a failed line's as empty) one after the other, each NUL-terminated, into
/// `out`, where each starts into `offsets` and the bytes they take into `len`;
/// `TESSEL_ERR_BUFFER_TOO_SMALL` (only `offsets` and `len` written) when they do not fit.
fn put_lines(
    outputs: &[LineOutput],
    out: &mut [u8],
    offsets: &mut [usize],
    len: &mut usize,
) -> Result<(), Error> {
    let mut at = 0;
    for (offset, output) in offsets.iter_mut().zip(outputs) {
        *offset = at;
        at += line_text(output).len() + 1;
    }
    *len = at;
    if out.len() < at {
        return Err(Error::new(
            tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL,
            "the output buffer is too small (the bytes needed were written to len)",
        ));
    }
    for (&offset, output) in offsets.iter().zip(outputs) {
        let text = line_text(output).as_bytes();
        out[offset..offset + text.len()].copy_from_slice(text);
        out[offset + text.len()] = 0;
    }
    Ok(())
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
