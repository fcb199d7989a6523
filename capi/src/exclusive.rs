//! A C handle used by one thread at a time: a tag naming its kind, a busy flag and the state,
//! for `tessel_session`, `tessel_batch` and the task-level handles (`tessel_translator`,
//! `tessel_transcriber`).
//!
//! Every call checks the tag (a pointer of another kind is `TESSEL_ERR_HANDLE`), takes the
//! busy flag with one compare-and-swap (an overlapping call is `TESSEL_ERR_BUSY`) and gives it
//! back on return, a panic included.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::status::{fail, guard, tessel_status, Error};

/// The tag a handle gets when it is freed.
const DEAD_TAG: u64 = u64::from_le_bytes(*b"tsl-dead");

/// A kind of handle: the tag in its first word and what its refusals say.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    /// The tag of a live handle of this kind.
    pub tag: u64,
    /// A NULL handle.
    pub null: &'static str,
    /// A pointer that is not a handle of this kind.
    pub other: &'static str,
    /// A call while another thread is inside one.
    pub busy: &'static str,
    /// A free while another thread is inside a call.
    pub busy_free: &'static str,
}

impl Kind {
    /// A task-level handle tagged `tag`.
    pub const fn task(tag: u64) -> Kind {
        Kind {
            tag,
            null: "the handle is NULL",
            other: "a handle of another kind",
            busy: "the handle is in use by another call (one thread at a time)",
            busy_free: "the handle is in use",
        }
    }
}

/// What a handle points to.
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

/// Boxes `value` as a handle of `kind`, cast to the C type `C`.
pub fn into_raw<T, C>(kind: Kind, value: T) -> *mut C {
    let handle = Box::new(Exclusive {
        tag: kind.tag,
        busy: AtomicBool::new(false),
        inner: UnsafeCell::new(value),
    });
    Box::into_raw(handle).cast::<C>()
}

/// The handle behind `ptr`, checked against `kind`'s tag.
///
/// # Safety
/// `ptr` is NULL or points to at least 8 readable bytes; a handle made by [`into_raw`] must
/// not have been freed.
unsafe fn checked<'a, T, C>(ptr: *mut C, kind: Kind) -> Result<&'a Exclusive<T>, Error> {
    let ptr = ptr.cast::<Exclusive<T>>();
    if ptr.is_null() {
        return fail(tessel_status::TESSEL_ERR_NULL, kind.null);
    }
    if !ptr.is_aligned() {
        return fail(tessel_status::TESSEL_ERR_HANDLE, kind.other);
    }
    // SAFETY: aligned, non-NULL and readable by the caller's contract; the tag is the first
    // field of the `repr(C)` `Exclusive`.
    if unsafe { ptr.cast::<u64>().read() } != kind.tag {
        return fail(tessel_status::TESSEL_ERR_HANDLE, kind.other);
    }
    // SAFETY: the tag says this is a live `Exclusive<T>` from `into_raw`; shared access only
    // (the state is behind the busy flag).
    Ok(unsafe { &*ptr })
}

/// Takes the busy flag of the handle `ptr` of `kind`, or fails with `TESSEL_ERR_BUSY` and
/// `busy`.
///
/// # Safety
/// As [`checked`].
unsafe fn take<'a, T, C>(
    ptr: *mut C,
    kind: Kind,
    busy: &'static str,
) -> Result<&'a Exclusive<T>, Error> {
    // SAFETY: the caller's contract.
    let handle = unsafe { checked::<T, C>(ptr, kind) }?;
    if handle
        .busy
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return fail(tessel_status::TESSEL_ERR_BUSY, busy);
    }
    Ok(handle)
}

/// Runs `body` with exclusive access to the state of the handle `ptr` of `kind`.
///
/// # Safety
/// As [`checked`], with `T` the type the handle was made with for `kind`.
pub unsafe fn with<T, C>(
    ptr: *mut C,
    kind: Kind,
    body: impl FnOnce(&mut T) -> Result<(), Error>,
) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let handle = unsafe { take::<T, C>(ptr, kind, kind.busy) }?;
        let _busy = Busy(&handle.busy);
        // SAFETY: the busy flag is ours until `_busy` drops: no other reference to the state.
        body(unsafe { &mut *handle.inner.get() })
    })
}

/// Frees the handle `ptr` of `kind` (NULL does nothing); `TESSEL_ERR_BUSY` while another
/// thread is inside a call on it.
///
/// # Safety
/// As [`with`]; the handle must not be used after success.
pub unsafe fn free<T, C>(ptr: *mut C, kind: Kind) -> tessel_status {
    guard(|| {
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's contract; the busy flag stays taken while the handle is freed.
        unsafe { take::<T, C>(ptr, kind, kind.busy_free) }?;
        // SAFETY: the tag says the pointer came from `Box::into_raw` in `into_raw`, and the
        // busy flag keeps every other call out; the caller gives the handle up.
        let mut owned = unsafe { Box::from_raw(ptr.cast::<Exclusive<T>>()) };
        owned.tag = DEAD_TAG;
        drop(owned);
        Ok(())
    })
}
