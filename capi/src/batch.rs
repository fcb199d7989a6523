//! `tessel_batch`: one model's working state for up to `max_batch` sequences decoded
//! together, each in its own slot, allocated at creation (`tessel_batch_new`), and the calls
//! that run it: encode a source into a slot, submit a search for it, step every running slot
//! at once, and read a finished slot's hypotheses.
//!
//! A slot can be submitted while others run (continuous batching): its search joins the next
//! step, and a slot that finishes leaves the products. Each slot's result is the one a plain
//! session gives the same source and options.
//!
//! A batch is used by one thread at a time, as a session is (the busy flag of
//! [`crate::exclusive`]). After `tessel_batch_new` no call here allocates: every slot's
//! search options and step callback live in the handle from creation, and a finished slot's
//! hypotheses are read from its own part of the arena, which the other slots' steps leave
//! alone.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};

use ::tessel_model::search::Unwatched;
use ::tessel_model::{Batch, BeamRules, Hypotheses, Request, SearchOptions, StepLogits};

use crate::args;
use crate::engine::{self, SharedModel};
use crate::exclusive;
use crate::info;
use crate::model::{self, tessel_limits, tessel_model};
use crate::session::{
    call_on_step, put_hypothesis, search_error, search_options, tessel_generate_options,
    tessel_generate_options_default, tessel_step_callback,
};
use crate::status::{fail, guard, tessel_status, Error};

/// A batch handle: "tslbatch" in its first word.
const KIND: exclusive::Kind = exclusive::Kind {
    tag: u64::from_le_bytes(*b"tslbatch"),
    null: "the batch handle is NULL",
    other: "not a batch handle",
    busy: "the batch is in use by another call (one thread at a time)",
    busy_free: "the batch is in use",
};

/// Up to `max_batch` sequences decoded together; used by one thread at a time. Created by
/// `tessel_batch_new`, freed by `tessel_batch_free`.
#[allow(non_camel_case_types)]
pub struct tessel_batch {
    _opaque: [u8; 0],
}

/// A slot's step callback and its `user_data`, as the last `tessel_batch_submit` gave them.
#[derive(Clone, Copy)]
struct Hook {
    on_step: tessel_step_callback,
    user_data: *mut c_void,
}

// SAFETY: `user_data` is the caller's, handed over for the slot's search; it is only passed
// back to the caller's callback, by the one thread inside a call on the batch.
unsafe impl Send for Hook {}

/// A slot's logits processor: calls the slot's [`Hook`]. Boxed once per slot at creation.
type Processor = Box<dyn FnMut(&mut StepLogits<'_>) + Send>;

/// A slot's request as [`Batch::step`] takes it: its search options and its processor.
type SlotRequest = Request<'static, Processor, Unwatched>;

struct Inner {
    batch: Batch<SharedModel>,
    /// Every slot's request, by slot.
    requests: Vec<SlotRequest>,
    /// Every slot's hook, shared with its processor.
    hooks: Vec<Arc<Mutex<Hook>>>,
    /// Whether each slot's last admitted search has a step callback (which non-finite logits
    /// then blame).
    callbacks: Vec<bool>,
}

// A batch may move between threads (one at a time), through a raw pointer the compiler
// cannot check.
const _: () = {
    const fn moves_between_threads<T: Send>() {}
    moves_between_threads::<Inner>();
};

impl Inner {
    fn new(batch: Batch<SharedModel>) -> Inner {
        let slots = batch.slots();
        let hooks: Vec<_> = (0..slots)
            .map(|_| {
                Arc::new(Mutex::new(Hook {
                    on_step: None,
                    user_data: std::ptr::null_mut(),
                }))
            })
            .collect();
        let requests = hooks
            .iter()
            .map(|hook| slot_request(Arc::clone(hook)))
            .collect();
        Inner {
            batch,
            requests,
            hooks,
            callbacks: vec![false; slots],
        }
    }

    /// `slot`, checked against the batch's slots (`TESSEL_ERR_ARGUMENT`).
    fn slot(&self, slot: usize) -> Result<usize, Error> {
        let max = self.batch.slots();
        if slot < max {
            return Ok(slot);
        }
        let error = ::tessel_model::RunError::BadSlot { slot, max };
        Err(Error::run(error).with_status(tessel_status::TESSEL_ERR_ARGUMENT))
    }

    /// Refuses a call that would disturb `slot`'s running search.
    fn idle(&self, slot: usize) -> Result<(), Error> {
        if self.batch.running(slot) {
            return fail(
                tessel_status::TESSEL_ERR_RUN,
                "the slot's search is still running (step the batch until tessel_batch_running \
                 says false)",
            );
        }
        Ok(())
    }

    /// The hypotheses of `slot`'s finished search, or why there are none.
    fn finished(&mut self, slot: usize) -> Result<Hypotheses<'_>, Error> {
        let slot = self.slot(slot)?;
        self.idle(slot)?;
        let blame = self.callbacks[slot];
        self.batch.hypotheses(slot).map_err(|e| match e {
            ::tessel_model::RunError::NotEncoded => Error::new(
                tessel_status::TESSEL_ERR_RUN,
                "the slot has no finished search (tessel_batch_submit one, then step)",
            ),
            e => search_error(e, blame),
        })
    }
}

/// A slot's request with a processor calling `hook`.
fn slot_request(hook: Arc<Mutex<Hook>>) -> SlotRequest {
    let process: Processor = Box::new(move |logits: &mut StepLogits<'_>| {
        let Hook { on_step, user_data } = *hook.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: the hook is what the caller gave `tessel_batch_submit` for the search this
        // step belongs to.
        unsafe { call_on_step(on_step, user_data, logits) }
    });
    Request {
        search: SearchOptions::greedy(1),
        prefix: None,
        rules: BeamRules::Plain,
        process,
        on_step: |_| {},
    }
}

/// Runs `body` with exclusive access to `batch`'s state, or fails with `TESSEL_ERR_BUSY`.
///
/// # Safety
/// `batch` is NULL or points to at least 16 readable bytes; a pointer from `tessel_batch_new`
/// must not have been freed.
unsafe fn with_batch(
    batch: *mut tessel_batch,
    body: impl FnOnce(&mut Inner) -> Result<(), Error>,
) -> tessel_status {
    // SAFETY: the caller's contract; a batch handle holds an `Inner`.
    unsafe { exclusive::with(batch, KIND, body) }
}

/// Creates a batch of `max_batch` slots (1..=`TESSEL_MAX_BATCH`, 1024) over `model`, each
/// planned for `limits` as `tessel_session_new` plans a session (NULL, or zero fields: the
/// model's maxima; threads 0: 1), at the ISA level `tessel_isa_name` reports. Every step runs
/// up to `max_batch × max_beam` decoder rows together. Limits out of range are
/// `TESSEL_ERR_ARGUMENT`; an arena that cannot be allocated `TESSEL_ERR_OUT_OF_MEMORY`.
/// Allocates the arena and every slot's bookkeeping and starts `threads - 1` workers, once;
/// nothing after this allocates. The batch holds a reference to the model.
///
/// # Safety
/// `model` is NULL or a live model handle; `limits` is NULL or valid; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_batch_new(
    model: *mut tessel_model,
    limits: *const tessel_limits,
    max_batch: usize,
    out: *mut *mut tessel_batch,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract for each pointer.
        let (shared, limits, out) = unsafe { model::planned(model, limits, out) }?;
        let max_batch = args::bounded("max_batch", max_batch, args::TESSEL_MAX_BATCH)?;
        let limits = limits.with_batch(max_batch);
        let isa = info::session_isa()?;
        let batch = engine::new_batch(shared, isa, limits)?;
        *out = exclusive::into_raw(KIND, Inner::new(batch));
        Ok(())
    })
}

/// Frees `batch` (NULL is accepted) and drops its model reference; running searches end with
/// it. `TESSEL_ERR_BUSY` if another thread is inside a call on it (then nothing is freed).
///
/// # Safety
/// `batch` is NULL or a live batch handle; it must not be used after success.
#[no_mangle]
pub unsafe extern "C" fn tessel_batch_free(batch: *mut tessel_batch) -> tessel_status {
    // SAFETY: the caller's contract; a batch handle holds an `Inner`.
    unsafe { exclusive::free::<Inner, _>(batch, KIND) }
}

/// Writes the limits each slot of `batch` was planned for (zero fields resolved) into
/// `*limits` and its number of slots into `*max_batch` (NULL to skip either).
///
/// # Safety
/// `batch` is NULL or a live batch handle; `limits` and `max_batch` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_batch_get_limits(
    batch: *mut tessel_batch,
    limits: *mut tessel_limits,
    max_batch: *mut usize,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        let l = inner.batch.limits();
        // SAFETY: the caller's contract for `limits` and `max_batch`.
        let (limits, max_batch) = unsafe { (limits.as_mut(), max_batch.as_mut()) };
        if let Some(limits) = limits {
            *limits = tessel_limits::of(l);
        }
        if let Some(max_batch) = max_batch {
            *max_batch = l.max_batch;
        }
        Ok(())
    };
    // SAFETY: the caller's contract for `batch`.
    unsafe { with_batch(batch, body) }
}

/// Runs the encoder over source ids `ids[0..len]` into slot `slot`, replacing what the slot
/// held (its last search's hypotheses included); the other slots, running or not, are left
/// alone. A slot at or above `max_batch` is `TESSEL_ERR_ARGUMENT`; a slot whose search is
/// running, an empty source or one longer than `max_src_len`, an id at or above the model's
/// `src_vocab`, or a model that reads audio is `TESSEL_ERR_RUN` (the slot unchanged).
///
/// # Safety
/// `batch` is NULL or a live batch handle; `ids` is NULL or points to `len` ids.
#[no_mangle]
pub unsafe extern "C" fn tessel_batch_encode(
    batch: *mut tessel_batch,
    slot: usize,
    ids: *const u32,
    len: usize,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        // SAFETY: the caller's contract for `ids`.
        let ids = unsafe { args::slice(ids, len, "ids is NULL") }?;
        let slot = inner.slot(slot)?;
        inner.idle(slot)?;
        inner.batch.encode(slot, ids).map_err(Error::run)
    };
    // SAFETY: the caller's contract for `batch`.
    unsafe { with_batch(batch, body) }
}

/// Starts a search over slot `slot`'s encoded source as `options` says (NULL: the defaults;
/// as `tessel_generate` takes them): a prefix longer than one token is fed now, and from the
/// next `tessel_batch_step` the slot decodes together with the other running slots. The
/// options are copied (the prefix is read during this call only); `on_step` is called with
/// `user_data` after each of the slot's steps, inside `tessel_batch_step`. Refused, the slot
/// unchanged: a slot at or above `max_batch` (`TESSEL_ERR_ARGUMENT`); a slot with no encoded
/// source, one whose search is still running, a beam of 0 or above `max_beam`, a prefix and
/// `max_steps` needing more than `max_tgt_len` positions, a prefix id outside the target
/// vocabulary (`TESSEL_ERR_RUN`).
///
/// # Safety
/// `batch` is NULL or a live batch handle; `options` is NULL or valid, with `prefix` pointing
/// to `prefix_len` ids, and its `user_data` valid for `on_step` until the slot's search ends.
#[no_mangle]
pub unsafe extern "C" fn tessel_batch_submit(
    batch: *mut tessel_batch,
    slot: usize,
    options: *const tessel_generate_options,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        // SAFETY: the caller's contract for `options`.
        let options = unsafe { options.as_ref() }
            .copied()
            .unwrap_or_else(|| tessel_generate_options_default());
        let slot = inner.slot(slot)?;
        if inner.batch.source_len(slot).is_none() {
            return fail(
                tessel_status::TESSEL_ERR_RUN,
                "the slot holds no encoded source (tessel_batch_encode it first)",
            );
        }
        inner.idle(slot)?;
        submit(inner, slot, &options)
    };
    // SAFETY: the caller's contract for `batch`.
    unsafe { with_batch(batch, body) }
}

/// Admits `options`' search into `slot` (checked to exist, be encoded and be idle).
fn submit(inner: &mut Inner, slot: usize, options: &tessel_generate_options) -> Result<(), Error> {
    let bos = [inner.batch.model().config().bos_id];
    let max_tgt_len = inner.batch.limits().max_tgt_len;
    let (search, prefix) = search_options(options, max_tgt_len, &bos)?;
    *inner.hooks[slot]
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Hook {
        on_step: options.on_step,
        user_data: options.user_data,
    };
    let stored = &mut inner.requests[slot];
    stored.search = search;
    let mut request = Request {
        search,
        prefix: Some(prefix),
        rules: stored.rules,
        process: &mut stored.process,
        on_step: stored.on_step,
    };
    let had_callback = options.on_step.is_some();
    inner
        .batch
        .admit(slot, &mut request)
        .map_err(|e| search_error(e, had_callback))?;
    inner.callbacks[slot] = had_callback;
    Ok(())
}

/// Runs one decoder step over every running slot's beams together, then each slot's search
/// step (and its step callback), and writes how many slots are still running into
/// `*running`. A slot whose search ends (EOS, `max_steps`, or a step callback that left no
/// finite logit) stops running; read it with `tessel_batch_finished`. No running slot is
/// `TESSEL_ERR_RUN` (nothing to step: submit one first).
///
/// # Safety
/// `batch` is NULL or a live batch handle; `running` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_batch_step(
    batch: *mut tessel_batch,
    running: *mut usize,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        // SAFETY: the caller's contract for `running`.
        let running = unsafe { args::write(running, "running is NULL") }?;
        let slots = inner.batch.slots();
        if !(0..slots).any(|slot| inner.batch.running(slot)) {
            *running = 0;
            return fail(
                tessel_status::TESSEL_ERR_RUN,
                "no slot is running: tessel_batch_submit a search before stepping",
            );
        }
        *running = inner
            .batch
            .step(inner.requests.as_mut_slice())
            .map_err(Error::run)?;
        Ok(())
    };
    // SAFETY: the caller's contract for `batch`.
    unsafe { with_batch(batch, body) }
}

/// Writes whether slot `slot`'s search is running (submitted and not yet ended) into
/// `*running`. A slot at or above `max_batch` is `TESSEL_ERR_ARGUMENT`.
///
/// # Safety
/// `batch` is NULL or a live batch handle; `running` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_batch_running(
    batch: *mut tessel_batch,
    slot: usize,
    running: *mut bool,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        let value = || Ok(inner.batch.running(inner.slot(slot)?));
        // SAFETY: the caller's contract for `running`.
        unsafe { args::store(running, "running is NULL", value) }
    };
    // SAFETY: the caller's contract for `batch`.
    unsafe { with_batch(batch, body) }
}

/// Writes the number of finished hypotheses of slot `slot`'s last search into `*count`; read
/// each with `tessel_batch_hypothesis`. They stay readable until the slot's next encode or
/// submit, whatever the other slots do. Refused (`*count` 0): a slot at or above `max_batch`
/// (`TESSEL_ERR_ARGUMENT`); a search still running, or none submitted since the slot's last
/// encode (`TESSEL_ERR_RUN`); a search that ended on logits with nothing finite to rank
/// (`TESSEL_ERR_ARGUMENT` when its step callback left them so, `TESSEL_ERR_RUN` otherwise).
///
/// # Safety
/// `batch` is NULL or a live batch handle; `count` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_batch_finished(
    batch: *mut tessel_batch,
    slot: usize,
    count: *mut usize,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        // SAFETY: the caller's contract for `count`.
        let count = unsafe { args::write(count, "count is NULL") }?;
        *count = 0;
        *count = inner.finished(slot)?.len();
        Ok(())
    };
    // SAFETY: the caller's contract for `batch`.
    unsafe { with_batch(batch, body) }
}

/// Copies hypothesis `index` (0 is the best) of slot `slot`'s finished search into `tokens`
/// (`cap` ids; BOS and the prefix excluded, EOS included when produced), its length into
/// `*len` and its score (length-normalised log-probability) into `*score` (NULL to skip), as
/// `tessel_hypothesis` does for a session. `TESSEL_ERR_BUFFER_TOO_SMALL` with `*len` written
/// when `cap < *len`; an index at or above the count is `TESSEL_ERR_ARGUMENT`; otherwise
/// refused as `tessel_batch_finished`.
///
/// # Safety
/// `batch` is NULL or a live batch handle; `tokens` is NULL or points to `cap` writable ids;
/// `len` is NULL or writable; `score` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_batch_hypothesis(
    batch: *mut tessel_batch,
    slot: usize,
    index: usize,
    tokens: *mut u32,
    cap: usize,
    len: *mut usize,
    score: *mut f32,
) -> tessel_status {
    let body = |inner: &mut Inner| {
        // SAFETY: the caller's contract for `len` and `score`.
        let (len, score) = unsafe { (args::write(len, "len is NULL")?, score.as_mut()) };
        let hypotheses = inner.finished(slot)?;
        let Some(hypothesis) = hypotheses.get(index) else {
            return fail(
                tessel_status::TESSEL_ERR_ARGUMENT,
                "index is not below the slot's count (tessel_batch_finished)",
            );
        };
        let found = (hypothesis.tokens, hypothesis.score);
        // SAFETY: the caller's contract for `tokens`.
        unsafe { put_hypothesis(found, (tokens, cap), len, score) }
    };
    // SAFETY: the caller's contract for `batch`.
    unsafe { with_batch(batch, body) }
}
