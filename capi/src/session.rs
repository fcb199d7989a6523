//! `tessel_session`: one model's working state in one arena, allocated at creation
//! (`tessel_session_new`) or placed in a caller buffer (`tessel_session_new_in_buffer`), and
//! the token-level calls that run it.
//!
//! A session is used by one thread at a time. Every call takes the session's `busy` flag with
//! one compare-and-swap and gives it back on return (a panic included); a second thread, or a
//! step callback calling back into its own session, gets `TESSEL_ERR_BUSY` instead of a data
//! race. After `tessel_session_new` no call here allocates: the session's arena, the
//! hypotheses' copy and the token buffer of the text call are all sized at creation, and a
//! refusal's message is formatted into a fixed thread-local buffer.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use ::tessel_model::{Request, RunError, SearchOptions, StepLogits};

use crate::args;
use crate::engine::{self, EngineSession};
use crate::exclusive;
use crate::handle::ModelHandle;
use crate::info;
use crate::model::{self, tessel_limits, tessel_model};
use crate::status::{fail, guard, tessel_status, Error};

/// A session handle: "tslsessn" in its first word.
const KIND: exclusive::Kind = exclusive::Kind {
    tag: u64::from_le_bytes(*b"tslsessn"),
    null: "the session handle is NULL",
    other: "not a session handle",
    busy: "the session is in use by another call (one thread at a time)",
    busy_free: "the session is in use",
};

/// One model's working state; used by one thread at a time. Created by `tessel_session_new`,
/// freed by `tessel_session_free`.
#[allow(non_camel_case_types)]
pub struct tessel_session {
    _opaque: [u8; 0],
}

/// The finished hypotheses of the last search, copied out of the arena.
struct Results {
    /// `max_beam × max_tgt_len` tokens, hypothesis `i` from `i * stride`.
    tokens: Vec<u32>,
    lens: Vec<usize>,
    scores: Vec<f32>,
    count: usize,
    stride: usize,
}

struct Inner {
    session: EngineSession,
    /// The session's model handle (its vocabulary, for the text call).
    model: Arc<ModelHandle>,
    results: Results,
    /// Source ids of the text call, `max_src_len` reserved.
    ids: Vec<u32>,
}

// A session may move between threads (one at a time), through a raw pointer the compiler
// cannot check.
const _: () = {
    const fn moves_between_threads<T: Send>() {}
    moves_between_threads::<Inner>();
};

/// Runs `body` with exclusive access to `session`'s state, or fails with `TESSEL_ERR_BUSY`.
///
/// # Safety
/// `session` is NULL or points to at least 16 readable bytes; a pointer from
/// `tessel_session_new` must not have been freed.
unsafe fn with_session(
    session: *mut tessel_session,
    body: impl FnOnce(&mut Inner) -> Result<(), Error>,
) -> tessel_status {
    // SAFETY: the caller's contract; a session handle holds an `Inner`.
    unsafe { exclusive::with(session, KIND, body) }
}

/// Writes what `value` reads from `session`'s state into `*out` (checked as [`args::store`]
/// checks it, `what` naming a NULL one).
///
/// # Safety
/// As [`with_session`] for `session`; `out` is NULL or writable.
unsafe fn read_into<T>(
    session: *mut tessel_session,
    (out, what): (*mut T, &'static str),
    value: impl FnOnce(&Inner) -> T,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        // SAFETY: the caller's contract for `out`.
        unsafe { args::store(out, what, || Ok(value(inner))) }
    };
    // SAFETY: the caller's contract for `session`.
    unsafe { with_session(session, body) }
}

/// Runs `call` on `session`'s engine session with the caller's array `ptr[0..len]` (checked
/// as [`args::slice`] checks it, `what` naming a NULL one); its refusal is `TESSEL_ERR_RUN`.
///
/// # Safety
/// As [`with_session`] for `session`; `ptr` as [`args::slice`] requires for `len` elements.
unsafe fn with_array<T>(
    session: *mut tessel_session,
    (ptr, len, what): (*const T, usize, &'static str),
    call: fn(&mut EngineSession, &[T]) -> Result<(), RunError>,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        // SAFETY: the caller's contract for `ptr`.
        let array = unsafe { args::slice(ptr, len, what) }?;
        call(&mut inner.session, array).map_err(Error::run)
    };
    // SAFETY: the caller's contract for `session`.
    unsafe { with_session(session, body) }
}

/// Creates a session over `model` planned for `limits` (NULL, or zero fields: the model's
/// maxima; threads 0: 1), at the ISA level `tessel_isa_name` reports. A length or beam above
/// the model's (`tessel_model_get_info`), or threads above `TESSEL_MAX_THREADS` (64), is
/// `TESSEL_ERR_ARGUMENT`; an arena that cannot be allocated `TESSEL_ERR_OUT_OF_MEMORY`. Allocates the arena
/// (`tessel_session_arena_bytes`) and starts `threads - 1` workers, once; nothing after this
/// allocates. The session holds a reference to the model.
///
/// # Safety
/// `model` is NULL or a live model handle; `limits` is NULL or valid; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_session_new(
    model: *mut tessel_model,
    limits: *const tessel_limits,
    out: *mut *mut tessel_session,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract for each pointer.
        let (shared, limits, out) = unsafe { model::planned(model, limits, out) }?;
        let isa = info::session_isa()?;
        let session = engine::new_session(Arc::clone(&shared), isa, limits)?;
        *out = into_handle(session, shared);
        Ok(())
    })
}

/// Creates a session over `model` whose arena lives in the caller's `buffer` (`len` bytes,
/// any alignment): nothing is allocated for the arena, and the part used is zeroed. The buffer
/// must stay valid, and must not be touched, until `tessel_session_free` returns. The session
/// runs on the calling thread: `limits->threads` must be 0 or 1. `*needed` (NULL to skip)
/// receives the bytes the buffer needs, `tessel_session_arena_bytes` for the same limits;
/// a shorter buffer is `TESSEL_ERR_BUFFER_TOO_SMALL` and creates nothing. Otherwise as
/// `tessel_session_new`: the session's bookkeeping (the handle, the copy of the finished
/// hypotheses and the text call's source ids, about `4 · (max_beam · max_tgt_len +
/// max_src_len)` bytes) is allocated here, once.
///
/// # Safety
/// `model` is NULL or a live model handle; `limits` is NULL or valid; `buffer` is NULL or
/// points to `len` writable bytes that outlive the session and are used by nothing else
/// meanwhile; `needed` and `out` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_session_new_in_buffer(
    model: *mut tessel_model,
    limits: *const tessel_limits,
    buffer: *mut c_void,
    len: usize,
    needed: *mut usize,
    out: *mut *mut tessel_session,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract for each pointer.
        let ((shared, limits, out), needed) =
            unsafe { (model::planned(model, limits, out)?, needed.as_mut()) };
        if limits.threads != 1 {
            return fail(
                tessel_status::TESSEL_ERR_ARGUMENT,
                "a session in a caller buffer runs on the calling thread: threads must be 0 or 1",
            );
        }
        let bytes = engine::arena_bytes(&shared.model, limits)?;
        if let Some(needed) = needed {
            *needed = bytes;
        }
        if len < bytes {
            return fail(
                tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL,
                "the buffer is smaller than tessel_session_arena_bytes (written to needed)",
            );
        }
        if buffer.is_null() {
            return fail(tessel_status::TESSEL_ERR_NULL, "buffer is NULL");
        }
        // SAFETY: non-NULL; the caller guarantees `len` writable bytes, used by nothing else,
        // that outlive the session: the session holds them as `'static` for exactly that long
        // and `tessel_session_free` ends its use.
        let buffer: &'static mut [u8] =
            unsafe { std::slice::from_raw_parts_mut(buffer.cast::<u8>(), len) };
        let isa = info::session_isa()?;
        let session = engine::new_session_in(Arc::clone(&shared), isa, limits, buffer)?;
        *out = into_handle(session, shared);
        Ok(())
    })
}

/// Boxes `session` into a C handle with its result buffers, sized for its limits.
fn into_handle(session: EngineSession, model: Arc<ModelHandle>) -> *mut tessel_session {
    let limits = session.limits();
    let stride = limits.max_tgt_len;
    let inner = Inner {
        session,
        model,
        results: Results {
            tokens: vec![0; limits.max_beam * stride],
            lens: vec![0; limits.max_beam],
            scores: vec![0.0; limits.max_beam],
            count: 0,
            stride,
        },
        ids: Vec::with_capacity(limits.max_src_len),
    };
    exclusive::into_raw(KIND, inner)
}

/// Frees `session` (NULL is accepted) and drops its model reference. `TESSEL_ERR_BUSY` if
/// another thread is inside a call on it (then nothing is freed).
///
/// # Safety
/// `session` is NULL or a live session handle; it must not be used after success.
#[no_mangle]
pub unsafe extern "C" fn tessel_session_free(session: *mut tessel_session) -> tessel_status {
    // SAFETY: the caller's contract; a session handle holds an `Inner`.
    unsafe { exclusive::free::<Inner, _>(session, KIND) }
}

/// Writes the limits `session` was planned for (zero fields resolved) into `*limits`.
///
/// # Safety
/// `session` is NULL or a live session handle; `limits` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_session_get_limits(
    session: *mut tessel_session,
    limits: *mut tessel_limits,
) -> tessel_status {
    let value = |inner: &Inner| tessel_limits::of(inner.session.limits());
    // SAFETY: the caller's contract for `session` and `limits`.
    unsafe { read_into(session, (limits, "limits is NULL"), value) }
}

/// Writes the ISA level `session` runs at into `*name` (static, NUL-terminated).
///
/// # Safety
/// `session` is NULL or a live session handle; `name` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_session_isa_name(
    session: *mut tessel_session,
    name: *mut *const c_char,
) -> tessel_status {
    let value = |inner: &Inner| info::isa_name(inner.session.isa());
    // SAFETY: the caller's contract for `session` and `name`.
    unsafe { read_into(session, (name, "name is NULL"), value) }
}

/// Runs the encoder over source ids `ids[0..len]` and resets the decoder. Refused with
/// `TESSEL_ERR_RUN` (the session unchanged): an empty source or one longer than the session's
/// `max_src_len`, an id at or above the model's `src_vocab`, a model that reads audio.
///
/// # Safety
/// `session` is NULL or a live session handle; `ids` is NULL or points to `len` ids.
#[no_mangle]
pub unsafe extern "C" fn tessel_encode(
    session: *mut tessel_session,
    ids: *const u32,
    len: usize,
) -> tessel_status {
    // SAFETY: the caller's contract for `session` and `ids`.
    unsafe { with_array(session, (ids, len, "ids is NULL"), EngineSession::encode) }
}

/// Forgets the decoded positions and keeps the encoded source (and its cross-attention K/V):
/// the next `tessel_decode_step` starts again at position 0.
///
/// # Safety
/// `session` is NULL or a live session handle.
#[no_mangle]
pub unsafe extern "C" fn tessel_reset_decoder(session: *mut tessel_session) -> tessel_status {
    let body = |inner: &mut Inner| {
        inner.session.reset_decoder();
        Ok(())
    };
    // SAFETY: the caller's contract for `session`.
    unsafe { with_session(session, body) }
}

/// Runs a Whisper-style model's convolutional front end and encoder over log-mel features
/// `mel[0..len]`, laid out `n_mels × frames` (bin-major), `frames` even and at most
/// `2 · max_src_len` (3000, one 30 s window, for Whisper); resets the decoder. Other lengths,
/// or a model that reads tokens, are `TESSEL_ERR_RUN`.
///
/// # Safety
/// `session` is NULL or a live session handle; `mel` is NULL or points to `len` floats.
#[no_mangle]
pub unsafe extern "C" fn tessel_encode_audio(
    session: *mut tessel_session,
    mel: *const f32,
    len: usize,
) -> tessel_status {
    // SAFETY: the caller's contract for `session` and `mel`.
    unsafe {
        with_array(
            session,
            (mel, len, "mel is NULL"),
            EngineSession::encode_audio,
        )
    }
}

/// Decodes one position for each of `beams` rows: row `i` continues with `tokens[i]`. The
/// logits, `beams × tgt_vocab` floats, are copied into `logits` (`logits_cap` floats) and their
/// count into `*logits_len`. A buffer too small is refused before the step runs
/// (`TESSEL_ERR_BUFFER_TOO_SMALL`, `*logits_len` written, session unchanged). The first step
/// after encode sets the number of beams (1..=the session's `max_beam`); later steps keep it
/// (`tessel_reorder_beams` changes which history each row continues). A step past the
/// session's `max_tgt_len` positions, an id at or above `tgt_vocab`, or no encode yet is
/// `TESSEL_ERR_RUN`.
///
/// # Safety
/// `session` is NULL or a live session handle; `tokens` is NULL or points to `beams` ids;
/// `logits` is NULL or points to `logits_cap` writable floats; `logits_len` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_decode_step(
    session: *mut tessel_session,
    tokens: *const u32,
    beams: usize,
    logits: *mut f32,
    logits_cap: usize,
    logits_len: *mut usize,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        // SAFETY: the caller's contract for each pointer.
        let (tokens, logits_len) = unsafe {
            (
                args::slice(tokens, beams, "tokens is NULL")?,
                args::write(logits_len, "logits_len is NULL")?,
            )
        };
        let vocab = inner.session.model().config().tgt_vocab;
        let needed = beams.checked_mul(vocab).ok_or(Error::new(
            tessel_status::TESSEL_ERR_ARGUMENT,
            "beams × vocabulary overflows",
        ))?;
        *logits_len = needed;
        if logits_cap < needed {
            return fail(
                tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL,
                "the logits buffer is smaller than beams × tgt_vocab (written to logits_len)",
            );
        }
        // SAFETY: the caller's contract for `logits`.
        let out = unsafe { args::slice_mut(logits, logits_cap, "logits is NULL") }?;
        let row = inner.session.decode_step(tokens).map_err(Error::run)?;
        out[..row.len()].copy_from_slice(row);
        Ok(())
    };
    // SAFETY: the caller's contract for `session`.
    unsafe { with_session(session, body) }
}

/// Makes beam `i` continue the history of beam `parents[i]` for `i < n` (the number of beams
/// becomes `n`), by copying cache rows inside the arena.
///
/// # Safety
/// `session` is NULL or a live session handle; `parents` is NULL or points to `n` indices.
#[no_mangle]
pub unsafe extern "C" fn tessel_reorder_beams(
    session: *mut tessel_session,
    parents: *const u32,
    n: usize,
) -> tessel_status {
    // SAFETY: the caller's contract for `session` and `parents`.
    unsafe {
        with_array(
            session,
            (parents, n, "parents is NULL"),
            EngineSession::reorder_beams,
        )
    }
}

/// What a step callback sees after each decoder step, before the search ranks the
/// continuations.
#[allow(non_camel_case_types)]
#[repr(C)]
pub struct tessel_step {
    /// Step index (0 for the step after the prefix's last token).
    pub step: usize,
    /// Live hypotheses: rows of `logits`.
    pub beams: usize,
    /// Target vocabulary size: the length of a row.
    pub vocab: usize,
    /// The raw logits, `beams × vocab`, row `i` for hypothesis `i`. The callback may change
    /// them (set `-INFINITY` to forbid a token); the search ranks what it leaves, and when it
    /// leaves no finite candidate (every logit NaN or `-INFINITY`, or a greedy best of
    /// `+INFINITY`) `tessel_generate` returns `TESSEL_ERR_ARGUMENT` naming the step.
    pub logits: *mut f32,
    /// Reserved: read a hypothesis's tokens with `tessel_step_tokens`.
    pub internal: *const c_void,
}

/// Called after each decoder step of `tessel_generate` with the options' `user_data`. The
/// `step` pointer and what it points to are valid only during the call. The callback must not
/// unwind (C++ exceptions, `longjmp`) through tessel; calls on the same session from inside it
/// are refused with `TESSEL_ERR_BUSY`.
#[allow(non_camel_case_types)]
pub type tessel_step_callback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, step: *mut tessel_step)>;

/// How `tessel_generate` searches. Start from `tessel_generate_options_default()`.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct tessel_generate_options {
    /// Beam width, 1 for greedy search (at most the session's `max_beam`). Default 1.
    pub beam: usize,
    /// Tokens to generate at most; 0 (the default) for as many as the session's target
    /// positions allow after the prefix.
    pub max_steps: usize,
    /// Exponent α of the length normalisation `score / length^α` (0: the raw sum of
    /// log-probabilities). Default 1.
    pub length_penalty: f32,
    /// Finish a hypothesis at EOS (default true); false runs exactly `max_steps` steps.
    pub stop_at_eos: bool,
    /// Forced start of the target (e.g. BOS then language and task tokens), `prefix_len` ids;
    /// NULL with 0 (the default) starts from the model's BOS.
    pub prefix: *const u32,
    /// See `prefix`.
    pub prefix_len: usize,
    /// Called after every step, or NULL (the default).
    pub on_step: tessel_step_callback,
    /// Passed to `on_step`.
    pub user_data: *mut c_void,
}

/// The default search: greedy, as many steps as the session allows, length penalty 1, stop
/// at EOS, from BOS, no callback.
#[no_mangle]
pub extern "C" fn tessel_generate_options_default() -> tessel_generate_options {
    tessel_generate_options {
        beam: 1,
        max_steps: 0,
        length_penalty: 1.0,
        stop_at_eos: true,
        prefix: std::ptr::null(),
        prefix_len: 0,
        on_step: None,
        user_data: std::ptr::null_mut(),
    }
}

/// Writes into `*tokens` and `*len` the tokens hypothesis `beam` has generated so far in the
/// step `step` describes (`step->step` of them, the prefix excluded). Valid only inside the
/// callback that received `step`.
///
/// # Safety
/// `step` is NULL or the pointer a step callback received, used during that call; `tokens`
/// and `len` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_step_tokens(
    step: *const tessel_step,
    beam: usize,
    tokens: *mut *const u32,
    len: *mut usize,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract for each pointer.
        let (step, tokens, len) = unsafe {
            (
                args::read(step, "step is NULL")?,
                args::write(tokens, "tokens is NULL")?,
                args::write(len, "len is NULL")?,
            )
        };
        if beam >= step.beams {
            return fail(
                tessel_status::TESSEL_ERR_ARGUMENT,
                "beam is not below step->beams",
            );
        }
        if step.internal.is_null() {
            return fail(tessel_status::TESSEL_ERR_ARGUMENT, "not a step from tessel");
        }
        // SAFETY: `internal` is the `StepLogits` `tessel_generate` built the step from, alive
        // for the duration of the callback, which is when the caller may call this.
        let logits = unsafe { &*step.internal.cast::<StepLogits<'_>>() };
        let history = logits.tokens(beam);
        *tokens = history.as_ptr();
        *len = history.len();
        Ok(())
    })
}

/// Calls `callback` (if any) with `user_data` on the logits of one step, as a `tessel_step`
/// that `tessel_step_tokens` can read.
///
/// # Safety
/// `callback` and `user_data` are what a caller supplied for the search running the step.
pub(crate) unsafe fn call_on_step(
    callback: tessel_step_callback,
    user_data: *mut c_void,
    logits: &mut StepLogits<'_>,
) {
    let Some(callback) = callback else {
        return;
    };
    let mut step = tessel_step {
        step: logits.step,
        beams: logits.beams,
        vocab: logits.vocab,
        logits: logits.logits.as_mut_ptr(),
        internal: std::ptr::null(),
    };
    step.internal = std::ptr::from_ref(&*logits).cast::<c_void>();
    // SAFETY: the caller's contract for `callback` and `user_data`; `step` and the logits it
    // points to live until the callback returns.
    unsafe { callback(user_data, &mut step) };
}

/// The status of a failed search: non-finite logits after a step callback blame the
/// callback (`TESSEL_ERR_ARGUMENT`), anything else is the session's refusal.
pub(crate) fn search_error(error: RunError, had_callback: bool) -> Error {
    match error {
        RunError::NonFiniteLogits { .. } if had_callback => Error::callback(error),
        e => Error::run(e),
    }
}

/// `options` checked against the session, as the engine's search options and the prefix.
pub(crate) fn search_options<'a>(
    options: &'a tessel_generate_options,
    limits_tgt: usize,
    bos: &'a [u32; 1],
) -> Result<(SearchOptions, &'a [u32]), Error> {
    // SAFETY: the caller of `tessel_generate` or `tessel_batch_submit` guarantees `prefix`
    // points to `prefix_len` ids.
    let prefix = unsafe { args::slice(options.prefix, options.prefix_len, "prefix is NULL") }?;
    let prefix = if prefix.is_empty() { &bos[..] } else { prefix };
    let max_steps = match options.max_steps {
        0 => (limits_tgt + 1).saturating_sub(prefix.len()),
        n => n,
    };
    Ok((
        SearchOptions {
            beam: options.beam,
            max_steps,
            length_penalty: options.length_penalty,
            stop_at_eos: options.stop_at_eos,
            sampling: None,
            patience: 1.0,
        },
        prefix,
    ))
}

/// Greedy or beam search over the encoded source, as `options` says (NULL: the defaults).
/// The finished hypotheses, best first, are kept in the session until its next search; their
/// count is written into `*count`; read each with `tessel_hypothesis`. Refused
/// (`TESSEL_ERR_RUN`): no encode yet, a beam of 0 or above the session's `max_beam`, a prefix
/// and `max_steps` needing more than its `max_tgt_len` positions, a prefix id outside the
/// target vocabulary, a step whose logits (NaN weights) leave nothing finite to rank. A step
/// callback that leaves no finite logit is `TESSEL_ERR_ARGUMENT`.
///
/// # Safety
/// `session` is NULL or a live session handle; `options` is NULL or valid, with `prefix`
/// pointing to `prefix_len` ids; `count` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_generate(
    session: *mut tessel_session,
    options: *const tessel_generate_options,
    count: *mut usize,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        // SAFETY: the caller's contract for each pointer.
        let (options, count) = unsafe {
            (
                options.as_ref().copied(),
                args::write(count, "count is NULL")?,
            )
        };
        *count = 0;
        let options = options.unwrap_or_else(|| tessel_generate_options_default());
        let Inner {
            session, results, ..
        } = inner;
        results.count = 0;
        let bos = [session.model().config().bos_id];
        let (search, prefix) = search_options(&options, session.limits().max_tgt_len, &bos)?;
        let hypotheses = session
            .generate(Request::new(search).prefix(prefix).process(|logits| {
                // SAFETY: the caller supplied `on_step` and `user_data` for this call.
                unsafe { call_on_step(options.on_step, options.user_data, logits) }
            }))
            .map_err(|e| search_error(e, options.on_step.is_some()))?;
        for (i, hypothesis) in hypotheses.iter().enumerate() {
            let at = i * results.stride;
            let len = hypothesis.tokens.len();
            results.tokens[at..at + len].copy_from_slice(hypothesis.tokens);
            results.lens[i] = len;
            results.scores[i] = hypothesis.score;
            results.count = i + 1;
        }
        *count = results.count;
        Ok(())
    };
    // SAFETY: the caller's contract for `session`.
    unsafe { with_session(session, body) }
}

/// Copies hypothesis `index` (0 is the best) of the last `tessel_generate` into `tokens`
/// (`cap` ids; BOS and the prefix excluded, EOS included when produced), its length into
/// `*len` and its score (length-normalised log-probability) into `*score` (NULL to skip).
/// `TESSEL_ERR_BUFFER_TOO_SMALL` with `*len` written when `cap < *len`.
///
/// # Safety
/// `session` is NULL or a live session handle; `tokens` is NULL or points to `cap` writable
/// ids; `len` is NULL or writable; `score` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_hypothesis(
    session: *mut tessel_session,
    index: usize,
    tokens: *mut u32,
    cap: usize,
    len: *mut usize,
    score: *mut f32,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        // SAFETY: the caller's contract for `len` and `score`.
        let (len, score) = unsafe { (args::write(len, "len is NULL")?, score.as_mut()) };
        let results = &inner.results;
        if index >= results.count {
            return fail(
                tessel_status::TESSEL_ERR_ARGUMENT,
                "index is not below the count of the last tessel_generate",
            );
        }
        let at = index * results.stride;
        let found = &results.tokens[at..at + results.lens[index]];
        // SAFETY: the caller's contract for `tokens`.
        unsafe { put_hypothesis((found, results.scores[index]), (tokens, cap), len, score) }
    };
    // SAFETY: the caller's contract for `session`.
    unsafe { with_session(session, body) }
}

/// Copies a hypothesis's `found` tokens into `tokens` (`cap` ids), their count into `*len` and
/// its score into `*score` (if asked): `tessel_hypothesis` and `tessel_batch_hypothesis`.
/// `TESSEL_ERR_BUFFER_TOO_SMALL` with `*len` written when `cap` is short.
///
/// # Safety
/// `tokens` is NULL or points to `cap` writable ids.
pub(crate) unsafe fn put_hypothesis(
    (found, found_score): (&[u32], f32),
    (tokens, cap): (*mut u32, usize),
    len: &mut usize,
    score: Option<&mut f32>,
) -> Result<(), Error> {
    let n = found.len();
    *len = n;
    if cap < n {
        return fail(
            tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL,
            "the token buffer is too small (the length was written to len)",
        );
    }
    // SAFETY: the caller's contract for `tokens`.
    let out = unsafe { args::slice_mut(tokens, cap, "tokens is NULL") }?;
    out[..n].copy_from_slice(found);
    if let Some(score) = score {
        *score = found_score;
    }
    Ok(())
}

/// Reads English number words in `text` (UTF-8, NUL-terminated) with a model that came with a
/// numbers vocabulary (`tessel_model_load_numbers`): tokenises, encodes, searches greedily and
/// writes the digits, NUL-terminated, into `out` (`cap` bytes) and their length into `*len`.
/// `TESSEL_ERR_BUFFER_TOO_SMALL` with `*len` written when `cap <= *len`; a character the
/// vocabulary lacks, or a text too long, is `TESSEL_ERR_ARGUMENT`. This text call allocates
/// (the decoded string); the token-level calls do not.
///
/// # Safety
/// `session` is NULL or a live session handle; `text` is NULL or NUL-terminated; `out` is
/// NULL or points to `cap` writable bytes; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_numbers_read(
    session: *mut tessel_session,
    text: *const c_char,
    out: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        // SAFETY: the caller's contract for each pointer.
        let (text, out, len) = unsafe { args::text_to_text(text, (out, cap, len)) }?;
        let Inner {
            session,
            ids,
            model,
            ..
        } = inner;
        let Some(vocab) = model.vocab.as_ref() else {
            return fail(
                tessel_status::TESSEL_ERR_UNSUPPORTED,
                "this model has no numbers vocabulary (load it with tessel_model_load_numbers)",
            );
        };
        vocab
            .encode_into(text, ids)
            .map_err(|e| Error::boxed(tessel_status::TESSEL_ERR_ARGUMENT, e))?;
        session.encode(ids).map_err(Error::run)?;
        let steps = vocab.max_target().min(session.limits().max_tgt_len);
        let hypotheses = session
            .generate(Request::new(SearchOptions::greedy(steps)))
            .map_err(Error::run)?;
        let best = hypotheses.best().map_or(&[][..], |h| h.tokens);
        let digits = vocab.decode(best);
        args::put_text(&digits.text, out, len)
    };
    // SAFETY: the caller's contract for `session`.
    unsafe { with_session(session, body) }
}
