//! What every C API test needs: the thread's last error message and a status check, and a
//! first decoder step.

use std::ffi::CStr;

use tessel::{tessel_decode_step, tessel_last_error, tessel_session, tessel_status};

/// The calling thread's last error message.
pub fn last_error() -> String {
    // SAFETY: `tessel_last_error` returns a NUL-terminated string owned by the thread, valid
    // until its next call on this thread; it is copied before that.
    unsafe { CStr::from_ptr(tessel_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Fails the test with the last error message unless `status` is `TESSEL_OK`.
#[track_caller]
pub fn ok(status: tessel_status) {
    assert_eq!(status, tessel_status::TESSEL_OK, "{}", last_error());
}

/// Fails the test unless a load returned `status`, with a last error message containing
/// `says`, and left its out-pointer `loaded` NULL; `case` names the load in the failures.
#[allow(dead_code)] // Not every test binary loads a task-level handle.
#[track_caller]
pub fn refused_load<T>(
    case: &str,
    got: tessel_status,
    loaded: *mut T,
    status: tessel_status,
    says: &str,
) {
    let message = last_error();
    assert_eq!(got, status, "{case}: {message}");
    assert!(message.contains(says), "{case}: {message}");
    assert!(loaded.is_null(), "{case}: the out-pointer is not NULL");
}

/// Runs one decoder step from `bos` on `session` into `logits` (the target vocabulary's
/// length), without allocating.
///
/// # Safety
/// `session` is a live session handle that has encoded a source.
#[allow(dead_code)] // Not every test binary steps a session.
#[track_caller]
pub unsafe fn step_from(session: *mut tessel_session, bos: u32, logits: &mut [f32]) {
    let bos = [bos];
    let mut len = 0;
    // SAFETY: the caller's contract for `session`; the arrays are of the stated lengths.
    ok(unsafe {
        tessel_decode_step(
            session,
            bos.as_ptr(),
            1,
            logits.as_mut_ptr(),
            logits.len(),
            &mut len,
        )
    });
}
