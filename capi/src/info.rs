//! Process-wide queries and settings: the library version, status names, the last error, and
//! the ISA level new sessions run at (`TESSEL_ISA` or the best level, unless forced).

use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicU8, Ordering};

use tessel_kernels::isa::{Isa, Level};
use tessel_model::isa_env::isa_from_env;

use crate::args;
use crate::status::{self, guard, tessel_status, Error};

/// `FORCED` when no level is forced.
const NOT_FORCED: u8 = u8::MAX;

/// The index in `Level::ALL` of the level `tessel_isa_force` set, or `NOT_FORCED`.
static FORCED: AtomicU8 = AtomicU8::new(NOT_FORCED);

/// A level's name, NUL-terminated.
const fn level_name(level: Level) -> &'static CStr {
    match level {
        Level::Scalar => c"scalar",
        Level::Avx2 => c"avx2",
        Level::Avx512 => c"avx512",
        Level::Neon => c"neon",
    }
}

/// The level a session created now runs at: the forced one, else `TESSEL_ISA`, else the best.
pub fn session_isa() -> Result<Isa, Error> {
    let unsupported = |e| Error::boxed(tessel_status::TESSEL_ERR_UNSUPPORTED, e);
    match Level::ALL.get(usize::from(FORCED.load(Ordering::Acquire))) {
        Some(&level) => Isa::new(level).map_err(unsupported),
        None => isa_from_env().map_err(unsupported),
    }
}

/// The name of `isa`'s level, NUL-terminated and static.
pub fn isa_name(isa: Isa) -> *const c_char {
    level_name(isa.level()).as_ptr()
}

/// The library's version ("0.1.0"), NUL-terminated, static.
#[no_mangle]
pub extern "C" fn tessel_version() -> *const c_char {
    const VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(version) => version,
            Err(_) => c"unknown",
        };
    VERSION.as_ptr()
}

/// The name of status code `status` ("TESSEL_ERR_RUN"), or "unknown status" for a value that
/// is not one; NUL-terminated, static.
#[no_mangle]
pub extern "C" fn tessel_status_name(status: i32) -> *const c_char {
    let known = status::STATUSES.iter().find(|s| **s as i32 == status);
    known.map_or(c"unknown status", |s| s.name()).as_ptr()
}

/// This thread's last error message, NUL-terminated ("" before any failure). The pointer stays
/// valid until the thread exits; the text it points to is replaced by the next failing call on
/// this thread (successful calls leave it). Never allocates.
#[no_mangle]
pub extern "C" fn tessel_last_error() -> *const c_char {
    status::last_ptr()
}

/// Copies this thread's last error message, NUL-terminated, into `buf` (`cap` bytes) and its
/// length without the NUL into `*len`. `TESSEL_ERR_BUFFER_TOO_SMALL` (with `*len` written)
/// when `cap <= *len`; the message is kept either way. Messages are at most 1023 bytes.
///
/// # Safety
/// `buf` is NULL or points to `cap` writable bytes; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_last_error_copy(
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> tessel_status {
    // SAFETY: the caller's contract for `len`.
    match unsafe { len.as_mut() } {
        // Reporting this as an error would overwrite the message the caller asks for.
        None => tessel_status::TESSEL_ERR_NULL,
        Some(len) => status::copy_last(buf, cap, len),
    }
}

/// Forces the ISA level of sessions created from now on, in the whole process: "scalar",
/// "avx2", "avx512" or "neon" (a level this CPU lacks is `TESSEL_ERR_UNSUPPORTED`, an unknown
/// name `TESSEL_ERR_ARGUMENT`). NULL returns to the default: `TESSEL_ISA` if set, else the
/// best level. Existing sessions keep theirs.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tessel_isa_force(name: *const c_char) -> tessel_status {
    guard(|| {
        if name.is_null() {
            FORCED.store(NOT_FORCED, Ordering::Release);
            return Ok(());
        }
        // SAFETY: non-NULL, and the caller guarantees the terminator.
        let name = unsafe { args::text(name, "name") }?;
        let level =
            Level::parse(name).map_err(|e| Error::boxed(tessel_status::TESSEL_ERR_ARGUMENT, e))?;
        Isa::new(level).map_err(|e| Error::boxed(tessel_status::TESSEL_ERR_UNSUPPORTED, e))?;
        let index = Level::ALL.iter().position(|l| *l == level).unwrap_or(0);
        FORCED.store(index as u8, Ordering::Release);
        Ok(())
    })
}

/// Writes into `*name` the ISA level sessions created now run at ("avx512", ...; static,
/// NUL-terminated). `TESSEL_ISA` naming a level this CPU lacks is `TESSEL_ERR_UNSUPPORTED`.
///
/// # Safety
/// `name` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tessel_isa_name(name: *mut *const c_char) -> tessel_status {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { args::store(name, "name is NULL", || Ok(isa_name(session_isa()?))) }
    })
}
