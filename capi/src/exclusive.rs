//! A C handle used by one thread at a time: a tag naming its kind, a busy flag and the state,
//! for the task-level handles (`tessel_translator`, `tessel_transcriber`).
//!
//! Every call checks the tag (a pointer of another kind is `TESSEL_ERR_HANDLE`), takes the
//! busy flag with one compare-and-swap (an overlapping call is `TESSEL_ERR_BUSY`) and gives it
//! back on return, a panic included, as `tessel_session` does.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::status::{fail, guard, tessel_status, Error};

/// The tag a handle gets when it is freed.
const DEAD_TAG: u64 = u64::from_le_bytes(*b"tsl-dead");

/// What a task-level handle points to.
#[repr(C)]
pub struct Exclusive<T> {
    tag: u64,
    busy: AtomicBool,
    inner: UnsafeCell<T>,
}

/// Releases the busy flag when dropped (also when a panic unwinds).
struct Busy<'a>(&'a AtomicBool);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Boxes `value` as a handle tagged `tag`, cast to the C type `C`.
pub fn into_raw<T, C>(tag: u64, value: T) -> *mut C {
    let handle = Box::new(Exclusive {
        tag,
        busy: AtomicBool::new(false),
        inner: UnsafeCell::new(value),
    });
    Box::into_raw(handle).cast::<C>()
}

/// The handle behind `ptr`, checked against `tag`.
///
/// # Safety
/// `ptr` is NULL or points to at least 8 readable bytes; a handle made by [`into_raw`] must
/// not have been freed.
unsafe fn checked<'a, T, C>(ptr: *mut C, tag: u64) -> Result<&'a Exclusive<T>, Error> {
    let ptr = ptr.cast::<Exclusive<T>>();
    if ptr.is_null() {
        return fail(tessel_status::TESSEL_ERR_NULL, "the handle is NULL");
    }
    if !ptr.is_aligned() {
        return fail(tessel_status::TESSEL_ERR_HANDLE, "a handle of another kind");
    }
    // SAFETY: aligned, non-NULL and readable by the caller's contract; the tag is the first
    // field of the `repr(C)` `Exclusive`.
    if unsafe { ptr.cast::<u64>().read() } != tag {
        return fail(tessel_status::TESSEL_ERR_HANDLE, "a handle of another kind");
    }
    // SAFETY: the tag says this is a live `Exclusive<T>` from `into_raw`; shared access only
    // (the state is behind the busy flag).
    Ok(unsafe { &*ptr })
}

/// Runs `body` with exclusive access to the state of the handle `ptr` (tagged `tag`).
///
/// # Safety
/// As [`checked`], with `T` the type the handle was made with for `tag`.
pub unsafe fn with<T, C>(
    ptr: *mut C,
    tag: u64,
    body: impl FnOnce(&mut T) -> Result<(), Error>,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let handle = unsafe { checked::<T, C>(ptr, tag) }?;
        if handle
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return fail(
                tessel_status::TESSEL_ERR_BUSY,
                "the handle is in use by another call (one thread at a time)",
            );
        }
        let _busy = Busy(&handle.busy);
        // SAFETY: the busy flag is ours until `_busy` drops: no other reference to the state.
        body(unsafe { &mut *handle.inner.get() })
    })
}

/// Frees the handle `ptr` (tagged `tag`; NULL does nothing); `TESSEL_ERR_BUSY` while another
/// thread is inside a call on it.
///
/// # Safety
/// As [`with`]; the handle must not be used after success.
pub unsafe fn free<T, C>(ptr: *mut C, tag: u64) -> tessel_status {
    guard(|| {
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let handle = unsafe { checked::<T, C>(ptr, tag) }?;
        if handle
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return fail(tessel_status::TESSEL_ERR_BUSY, "the handle is in use");
        }
        // SAFETY: the tag says the pointer came from `Box::into_raw` in `into_raw`, and the
        // busy flag keeps every other call out; the caller gives the handle up.
        let mut owned = unsafe { Box::from_raw(ptr.cast::<Exclusive<T>>()) };
        owned.tag = DEAD_TAG;
        drop(owned);
        Ok(())
    })
}
