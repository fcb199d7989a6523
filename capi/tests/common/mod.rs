//! What every C API test needs: the thread's last error message and a status check.

use std::ffi::CStr;

use tessel::{tessel_last_error, tessel_status};

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
