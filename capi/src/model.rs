//! `tessel_model`: an immutable, reference-counted model shared by any number of sessions on
//! any threads.
//!
//! The handle is `Arc::into_raw` of a [`ModelHandle`], whose first field is a tag: a pointer
//! whose first word is not the model tag (a session handle, say) is refused with
//! `TESSEL_ERR_HANDLE` instead of being used. `tessel_model_retain` and
//! `tessel_model_release` move the `Arc`'s strong count; each session holds one reference.

use std::ffi::c_char;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use ::tessel_model::{Limits, Model, WeightType};

use crate::args;
use crate::engine::{self, Loaded};
use crate::handle::{ModelHandle, MODEL_TAG};
use crate::status::{fail, guard, tessel_status, Error};
use ::tessel_model::LoadSettings;

/// An immutable model, shared by sessions and threads; created by a `tessel_model_load_*`
/// call, released with `tessel_model_release`.
#[allow(non_camel_case_types)]
pub struct tessel_model {
    _opaque: [u8; 0],
}

/// How `tessel_model_load_dir` loads. Start from `tessel_load_options_default()`.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct tessel_load_options {
    /// Widest beam sessions may plan for, where the directory's config does not state it
    /// (Hugging Face and CTranslate2 directories): 1..=`TESSEL_MAX_BEAM` (128), else
    /// `TESSEL_ERR_ARGUMENT`. Default 4.
    pub max_beam: usize,
    /// Longest source and target, where the config does not state it (T5, CTranslate2
    /// translation models; capped by stored position tables): 1..=`TESSEL_MAX_LEN` (65536),
    /// else `TESSEL_ERR_ARGUMENT`. Whisper ignores it: its encoder reads whole 30 s windows
    /// (the model's 1500 positions) and its decoder the model's positions. Default 512.
    pub max_len: usize,
    /// Storage of the linear layers' weights: "f32", "f16", "bf16", "bf16-dot", or NULL to
    /// keep the type the files store.
    pub weights: *const c_char,
}

/// What a model is: its sizes, special ids and maxima.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct tessel_model_info {
    /// Source vocabulary size (valid ids are below it).
    pub src_vocab: usize,
    /// Target vocabulary size: the length of one row of logits.
    pub tgt_vocab: usize,
    /// Decoder start id.
    pub bos_id: u32,
    /// End-of-sequence id.
    pub eos_id: u32,
    /// Padding id.
    pub pad_id: u32,
    /// Mel bins per audio frame for models that read audio (`tessel_encode_audio`), 0 for
    /// models that read tokens (`tessel_encode`).
    pub n_mels: usize,
    /// Bytes of weights held in memory.
    pub weight_bytes: usize,
    /// The model's maximum source length, target positions and beam width.
    pub max_src_len: usize,
    /// See `max_src_len`.
    pub max_tgt_len: usize,
    /// See `max_src_len`.
    pub max_beam: usize,
    /// Whether `tessel_numbers_read` works on this model's sessions (it came with a vocabulary
    /// in the numbers model's format).
    pub has_text_vocab: bool,
}

/// The sizes a session plans its arena for. A zero field means the model's maximum (one thread
/// for `threads`); a field above the model's maximum (`tessel_model_info`) is
/// `TESSEL_ERR_ARGUMENT`.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct tessel_limits {
    /// Longest source (tokens, or encoder positions: half the audio frames).
    pub max_src_len: usize,
    /// Most target positions, the start token included.
    pub max_tgt_len: usize,
    /// Widest beam.
    pub max_beam: usize,
    /// Threads each GEMM runs on, the calling thread included (at most `TESSEL_MAX_THREADS`,
    /// 64); the workers start with the session.
    pub threads: usize,
}

impl tessel_limits {
    /// The C view of `limits` (a session's or a batch's; `max_batch` is not in it).
    pub(crate) fn of(limits: Limits) -> tessel_limits {
        tessel_limits {
            max_src_len: limits.max_src_len,
            max_tgt_len: limits.max_tgt_len,
            max_beam: limits.max_beam,
            threads: limits.threads,
        }
    }
}

/// Wraps a Rust model as a C handle with one reference (for Rust hosts that build a model
/// themselves and hand it to C code). Release it with `tessel_model_release`.
pub fn model_handle(model: Model<'static>) -> *mut tessel_model {
    into_handle(Loaded {
        model,
        vocab: None,
        blocks: None,
    })
}

fn into_handle(loaded: Loaded) -> *mut tessel_model {
    let handle = Arc::new(ModelHandle::new(loaded.model, loaded.vocab, loaded.blocks));
    Arc::into_raw(handle).cast_mut().cast::<tessel_model>()
}

/// The handle behind `model`, checked: NULL, misaligned and untagged pointers are errors.
///
/// # Safety
/// `model` is NULL or points to at least 8 readable bytes; a pointer from
/// `tessel_model_load_*` must not have been released to zero.
pub unsafe fn handle<'a>(model: *const tessel_model) -> Result<&'a ModelHandle, Error> {
    let ptr = model.cast::<ModelHandle>();
    if ptr.is_null() {
        return fail(tessel_status::TESSEL_ERR_NULL, "the model handle is NULL");
    }
    if !ptr.is_aligned() {
        return fail(tessel_status::TESSEL_ERR_HANDLE, "not a model handle");
    }
    // SAFETY: aligned and non-NULL; the caller guarantees the first word is readable. The
    // tag is the first field of the `repr(C)` `ModelHandle`.
    let tag = unsafe { ptr.cast::<u64>().read() };
    if tag != MODEL_TAG {
        return fail(tessel_status::TESSEL_ERR_HANDLE, "not a model handle");
    }
    // SAFETY: the tag says this is a live `ModelHandle` from `into_handle`.
    Ok(unsafe { &*ptr })
}

/// A new strong reference to the handle behind `model` (checked as [`handle`]).
///
/// # Safety
/// As [`handle`].
pub unsafe fn share(model: *const tessel_model) -> Result<Arc<ModelHandle>, Error> {
    // SAFETY: the caller's contract.
    let checked = unsafe { handle(model) }?;
    let ptr: *const ModelHandle = checked;
    // SAFETY: `ptr` came from `Arc::into_raw` (the tag says so) and the caller holds a
    // reference, so the count is at least one while we add ours.
    unsafe {
        Arc::increment_strong_count(ptr);
        Ok(Arc::from_raw(ptr))
    }
}

/// The checked arguments of a call that creates a handle over `model` planned for `limits`,
/// in this order: a new reference to the model (as [`share`]), `limits` resolved as
/// [`ModelHandle::limits`] resolves them, and `out` as [`args::handle_out`] gives it.
///
/// # Safety
/// As [`share`] for `model`; `limits` is NULL or valid; `out` as [`args::handle_out`].
pub unsafe fn planned<'a, H>(
    model: *const tessel_model,
    limits: *const tessel_limits,
    out: *mut *mut H,
) -> Result<(Arc<ModelHandle>, Limits, &'a mut *mut H), Error> {
    // SAFETY: the caller's contract for each pointer.
    let (shared, limits, out) = unsafe { (share(model)?, limits.as_ref(), args::handle_out(out)?) };
    let limits = shared.limits(limits);
    Ok((shared, limits, out))
}

impl ModelHandle {
    /// `limits` with zero fields replaced by the model's maxima (threads by 1).
    pub fn limits(&self, limits: Option<&tessel_limits>) -> Limits {
        let max = Limits::of(self.model.config());
        let given = limits.copied().unwrap_or_default();
        let or = |value: usize, default: usize| if value == 0 { default } else { value };
        Limits {
            max_src_len: or(given.max_src_len, max.max_src_len),
            max_tgt_len: or(given.max_tgt_len, max.max_tgt_len),
            max_beam: or(given.max_beam, max.max_beam),
            max_batch: 1,
            encode_sources: 1,
            threads: or(given.threads, 1),
            cross_kv: ::tessel_model::MemoryType::F32,
        }
    }
}

/// The default load options: beam 4, length 512, weights as stored.
#[no_mangle]
pub extern "C" fn tessel_load_options_default() -> tessel_load_options {
    tessel_load_options {
        max_beam: 4,
        max_len: 512,
        weights: std::ptr::null(),
    }
}

fn settings(options: Option<&tessel_load_options>) -> Result<LoadSettings, Error> {
    let options = options
        .copied()
        .unwrap_or_else(|| tessel_load_options_default());
    let max_beam = args::bounded("max_beam", options.max_beam, args::TESSEL_MAX_BEAM)?;
    let max_len = args::bounded("max_len", options.max_len, args::TESSEL_MAX_LEN)?;
    let weights = if options.weights.is_null() {
        None
    } else {
        // SAFETY: non-NULL; the caller guarantees a NUL-terminated string.
        let name = unsafe { args::text(options.weights, "weights") }?;
        Some(
            WeightType::from_str(name)
                .map_err(|e| Error::boxed(tessel_status::TESSEL_ERR_ARGUMENT, e))?,
        )
    };
    Ok(LoadSettings {
        max_beam,
        max_len,
        weights,
    })
}

/// Loads the model in directory `path` (UTF-8, NUL-terminated), detecting its format:
/// CTranslate2 (`model.bin`), Hugging Face Whisper, T5/mT5, Marian/BART/mBART/M2M100
/// (`config.json` with a `model_type`), or tessel's `nn.Transformer` layout (`config.json` and
/// `model.safetensors`). `options` may be NULL for the defaults. On success `*out` holds a
/// model with one reference. Allocates (the weights).
///
/// # Safety
/// `path` is a NUL-terminated string; `options` is NULL or valid; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_model_load_dir(
    path: *const c_char,
    options: *const tessel_load_options,
    out: *mut *mut tessel_model,
) -> tessel_status {
    // SAFETY: the caller's contract, passed on.
    unsafe { load_with(path, options, out, engine::load_dir) }
}

/// Loads `path` (UTF-8, NUL-terminated): a directory as `tessel_model_load_dir` does, a file
/// whose first bytes are the packed image's magic as `tessel_model_load_file` does; anything
/// else is `TESSEL_ERR_LOAD`. `options` (NULL for the defaults) applies to directories.
/// Allocates (the weights).
///
/// # Safety
/// `path` is a NUL-terminated string; `options` is NULL or valid; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_model_load(
    path: *const c_char,
    options: *const tessel_load_options,
    out: *mut *mut tessel_model,
) -> tessel_status {
    // SAFETY: the caller's contract, passed on.
    unsafe { load_with(path, options, out, engine::load_path) }
}

/// Runs `load` on `path` with `options` and stores the model in `*out` (NULL first, so a
/// failed load leaves no stale handle).
///
/// # Safety
/// `path` is a NUL-terminated string; `options` is NULL or valid; `out` is NULL or writable.
unsafe fn load_with(
    path: *const c_char,
    options: *const tessel_load_options,
    out: *mut *mut tessel_model,
    load: fn(&Path, LoadSettings) -> Result<Loaded, Error>,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract for each pointer.
        let (path, options, out) = unsafe {
            (
                args::text(path, "path is NULL")?,
                options.as_ref(),
                args::handle_out(out)?,
            )
        };
        *out = into_handle(load(Path::new(path), settings(options)?)?);
        Ok(())
    })
}

/// Loads the packed image file at `path` (UTF-8, NUL-terminated; written by `tessel pack`):
/// read into memory and copied into the model, so the file may change afterwards. A malformed
/// image, or one with a NaN or infinite value in any float tensor (the message names the
/// tensor), is `TESSEL_ERR_LOAD`. On success `*out` holds a model with one reference. Allocates
/// (the weights).
///
/// # Safety
/// `path` is a NUL-terminated string; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_model_load_file(
    path: *const c_char,
    out: *mut *mut tessel_model,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract for each pointer.
        let (path, out) = unsafe { (args::text(path, "path is NULL")?, args::handle_out(out)?) };
        *out = into_handle(engine::load_image_file(Path::new(path))?);
        Ok(())
    })
}

/// Reads the packed image in `data[0..len]` (one whole image, as `tessel pack` writes it) in
/// place: every tensor borrows these bytes, none is copied. `data` must start on a 64-byte
/// boundary (`TESSEL_ERR_MISALIGNED` otherwise, e.g. `aligned_alloc(64, ...)` or
/// `_Alignas(64)`); a malformed image, or one with a NaN or infinite value in any float tensor
/// (checked once here; the message names the tensor), is `TESSEL_ERR_LOAD`. The caller keeps the bytes alive
/// and unchanged until the model's last reference is released (sessions hold references).
/// On success `*out` holds a model with one reference. Allocates a few hundred bytes per
/// layer (the layers' descriptors), not the weights.
///
/// # Safety
/// `data` is NULL or points to `len` readable bytes that stay valid and unwritten while the
/// model lives; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_model_load_memory(
    data: *const u8,
    len: usize,
    out: *mut *mut tessel_model,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract for `out`.
        let out = unsafe { args::handle_out(out) }?;
        if data.is_null() {
            return fail(tessel_status::TESSEL_ERR_NULL, "data is NULL");
        }
        // SAFETY: non-NULL, and the caller guarantees `len` readable bytes that outlive the
        // model (every reference to it, sessions included) and are not written meanwhile:
        // the model holds them as `'static` for exactly that long.
        let bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(data, len) };
        *out = into_handle(engine::load_memory(bytes)?);
        Ok(())
    })
}

/// Loads the numbers model compiled into the library (English number words to digits; its
/// vocabulary makes `tessel_numbers_read` work). On success `*out` holds a model with one
/// reference. Allocates (the weights, about 0.6 MB).
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_model_load_numbers(out: *mut *mut tessel_model) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { args::handle_out(out) }?;
        *out = into_handle(engine::numbers()?);
        Ok(())
    })
}

/// Adds a reference to `model` (for another owner, e.g. another thread).
///
/// # Safety
/// `model` is NULL or a handle from this library with at least one reference.
#[no_mangle]
pub unsafe extern "C" fn tessel_model_retain(model: *mut tessel_model) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let shared = unsafe { share(model) }?;
        std::mem::forget(shared);
        Ok(())
    })
}

/// Drops a reference to `model`; the last one (sessions hold one each) frees it. NULL is
/// accepted and does nothing.
///
/// # Safety
/// `model` is NULL or a handle from this library with at least one reference owned by the
/// caller, which it gives up.
#[no_mangle]
pub unsafe extern "C" fn tessel_model_release(model: *mut tessel_model) -> tessel_status {
    guard(|| {
        if model.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let checked: *const ModelHandle = unsafe { handle(model) }?;
        // SAFETY: `checked` came from `Arc::into_raw` and the caller gives up one reference.
        drop(unsafe { Arc::from_raw(checked) });
        Ok(())
    })
}

/// Writes `model`'s sizes, ids and maxima into `*info`.
///
/// # Safety
/// `model` is NULL or a live handle; `info` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_model_get_info(
    model: *const tessel_model,
    info: *mut tessel_model_info,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract for each pointer.
        let (handle, info) = unsafe { (handle(model)?, args::write(info, "info is NULL")?) };
        let config = handle.model.config();
        *info = tessel_model_info {
            src_vocab: config.src_vocab,
            tgt_vocab: config.tgt_vocab,
            bos_id: config.bos_id,
            eos_id: config.eos_id,
            pad_id: config.pad_id,
            n_mels: config.front_end.n_mels().unwrap_or(0),
            weight_bytes: handle.model.weight_bytes(),
            max_src_len: config.max_src_len,
            max_tgt_len: config.max_tgt_len,
            max_beam: config.max_beam,
            has_text_vocab: handle.vocab.is_some(),
        };
        Ok(())
    })
}

/// Writes the bytes a session over `model` planned for `limits` (NULL: the model's maxima)
/// needs for its arena, or refuses limits above the model's: the size of the buffer
/// `tessel_session_new_in_buffer` needs with the same limits (the arena and up to 63 bytes to
/// reach a 64-byte boundary), and at most 63 bytes above what `tessel_session_new` allocates.
///
/// # Safety
/// `model` is NULL or a live handle; `limits` is NULL or valid; `bytes` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_session_arena_bytes(
    model: *const tessel_model,
    limits: *const tessel_limits,
    bytes: *mut usize,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract for each pointer.
        let (handle, limits, bytes) = unsafe {
            (
                handle(model)?,
                limits.as_ref(),
                args::write(bytes, "bytes is NULL")?,
            )
        };
        *bytes = engine::arena_bytes(&handle.model, handle.limits(limits))?;
        Ok(())
    })
}
