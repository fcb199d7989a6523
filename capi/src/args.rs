//! Checked views of C arguments: NULL, alignment and `(pointer, length)` pairs become typed
//! errors before anything is dereferenced.

use std::ffi::{c_char, CStr};

use crate::status::{fail, tessel_status, Error};

/// `ptr` as a shared reference, or `TESSEL_ERR_NULL` naming `what`.
///
/// # Safety
/// A non-NULL `ptr` must point to a valid, initialised `T` that outlives `'a` and is not
/// written meanwhile.
pub unsafe fn read<'a, T>(ptr: *const T, what: &'static str) -> Result<&'a T, Error> {
    // SAFETY: the caller's contract for non-NULL pointers; `as_ref` maps NULL to `None`.
    unsafe { ptr.as_ref() }.ok_or(Error::new(tessel_status::TESSEL_ERR_NULL, what))
}

/// `ptr` as an exclusive reference, or `TESSEL_ERR_NULL` naming `what`.
///
/// # Safety
/// A non-NULL `ptr` must point to a valid `T` (an out-parameter the caller owns) that outlives
/// `'a` and is not accessed otherwise meanwhile.
pub unsafe fn write<'a, T>(ptr: *mut T, what: &'static str) -> Result<&'a mut T, Error> {
    // SAFETY: the caller's contract for non-NULL pointers; `as_mut` maps NULL to `None`.
    unsafe { ptr.as_mut() }.ok_or(Error::new(tessel_status::TESSEL_ERR_NULL, what))
}

/// The out-parameter of a call that creates a handle: checked as [`write`] checks it
/// (`TESSEL_ERR_NULL`, "out is NULL"), then set to NULL so that a failed call leaves no stale
/// handle in it.
///
/// # Safety
/// As [`write`].
pub unsafe fn handle_out<'a, H>(out: *mut *mut H) -> Result<&'a mut *mut H, Error> {
    // SAFETY: the caller's contract.
    let out = unsafe { write(out, "out is NULL") }?;
    *out = std::ptr::null_mut();
    Ok(out)
}

/// Writes what `value` gives into `*out`, once `out` is checked for NULL (`TESSEL_ERR_NULL`
/// naming `what`, before `value` runs); when `value` fails, `*out` is left as it was.
///
/// # Safety
/// As [`write`].
pub unsafe fn store<T>(
    out: *mut T,
    what: &'static str,
    value: impl FnOnce() -> Result<T, Error>,
) -> Result<(), Error> {
    // SAFETY: the caller's contract.
    let out = unsafe { write(out, what) }?;
    *out = value()?;
    Ok(())
}

/// `len` elements at `ptr` as a slice; NULL is allowed only with `len == 0`.
///
/// # Safety
/// A non-NULL `ptr` must point to `len` initialised, aligned `T`s that outlive `'a` and are
/// not written meanwhile.
pub unsafe fn slice<'a, T>(
    ptr: *const T,
    len: usize,
    what: &'static str,
) -> Result<&'a [T], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return fail(tessel_status::TESSEL_ERR_NULL, what);
    }
    if !ptr.is_aligned() {
        return fail(tessel_status::TESSEL_ERR_ARGUMENT, "misaligned array");
    }
    // SAFETY: non-NULL and aligned, and the caller guarantees `len` valid elements.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// `cap` elements at `ptr` as a writable slice; NULL is allowed only with `cap == 0`.
///
/// # Safety
/// A non-NULL `ptr` must point to `cap` writable, aligned `T`s that outlive `'a` and are not
/// accessed otherwise meanwhile.
pub unsafe fn slice_mut<'a, T>(
    ptr: *mut T,
    cap: usize,
    what: &'static str,
) -> Result<&'a mut [T], Error> {
    if cap == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return fail(tessel_status::TESSEL_ERR_NULL, what);
    }
    if !ptr.is_aligned() {
        return fail(tessel_status::TESSEL_ERR_ARGUMENT, "misaligned buffer");
    }
    // SAFETY: non-NULL and aligned, and the caller guarantees `cap` writable elements.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, cap) })
}

/// A NUL-terminated UTF-8 string.
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string that outlives `'a`.
pub unsafe fn text<'a>(ptr: *const c_char, what: &'static str) -> Result<&'a str, Error> {
    if ptr.is_null() {
        return fail(tessel_status::TESSEL_ERR_NULL, what);
    }
    // SAFETY: non-NULL, and the caller guarantees the NUL terminator.
    let bytes = unsafe { CStr::from_ptr(ptr) };
    bytes.to_str().map_err(|_| {
        Error::new(
            tessel_status::TESSEL_ERR_ARGUMENT,
            "the string is not valid UTF-8",
        )
    })
}

/// The arguments of a text-to-text call: the NUL-terminated UTF-8 `text` it reads, and the
/// buffer `out` (`cap` bytes) and length `len` that [`put_text`] fills; checked in that order.
///
/// # Safety
/// As [`text`] for `text`, [`slice_mut`] for `out` and [`write`] for `len`.
pub unsafe fn text_to_text<'a>(
    text: *const c_char,
    (out, cap, len): (*mut c_char, usize, *mut usize),
) -> Result<(&'a str, &'a mut [u8], &'a mut usize), Error> {
    // SAFETY: the caller's contract for each pointer.
    unsafe {
        Ok((
            self::text(text, "text is NULL")?,
            slice_mut(out.cast::<u8>(), cap, "out is NULL")?,
            write(len, "len is NULL")?,
        ))
    }
}

/// Writes `text` and a NUL into `out` (`cap` bytes) and its length (without the NUL) into
/// `len`; `TESSEL_ERR_BUFFER_TOO_SMALL` (nothing written but `len`) when it does not fit.
pub fn put_text(text: &str, out: &mut [u8], len: &mut usize) -> Result<(), Error> {
    *len = text.len();
    if out.len() <= text.len() {
        return fail(
            tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL,
            "the text buffer is too small; the length was written",
        );
    }
    out[..text.len()].copy_from_slice(text.as_bytes());
    out[text.len()] = 0;
    Ok(())
}

/// The widest beam any call plans for (`tessel_load_options.max_beam`,
/// `tessel_translate_options.beam`, `tessel_transcriber_load`'s `max_beam`); a wider one is
/// `TESSEL_ERR_ARGUMENT` before anything is loaded.
pub const TESSEL_MAX_BEAM: usize = 128;

/// The most threads a session's GEMMs run on (the calling thread included).
pub const TESSEL_MAX_THREADS: usize = 64;

/// The longest source or target any model plans for (`tessel_load_options.max_len`; the
/// engine's `MAX_POSITIONS`).
pub const TESSEL_MAX_LEN: usize = 65536;

/// The most sequences a batch decodes together (`tessel_batch_new`'s `max_batch`).
pub const TESSEL_MAX_BATCH: usize = 1024;

/// `value` (named `what`) checked against `1..=max`, or `TESSEL_ERR_ARGUMENT` saying both.
pub fn bounded(what: &'static str, value: usize, max: usize) -> Result<usize, Error> {
    // The header states the limits as numbers; they are the engine's.
    const _: () = assert!(TESSEL_MAX_THREADS == ::tessel_kernels::gemm::MAX_TASKS);
    const _: () = assert!(TESSEL_MAX_LEN == ::tessel_model::config::MAX_POSITIONS);
    const _: () = assert!(TESSEL_MAX_BATCH == ::tessel_model::plan::MAX_BATCH);
    if (1..=max).contains(&value) {
        Ok(value)
    } else {
        Err(Error::boxed(
            tessel_status::TESSEL_ERR_ARGUMENT,
            format!("{what} {value} is outside 1..={max}"),
        ))
    }
}
