//! Standard output and a monotonic clock through the C library, for a program without `std`.

use core::fmt;

#[link(name = "c")]
extern "C" {
    fn write(fd: i32, buf: *const u8, count: usize) -> isize;
    fn clock_gettime(clock: i32, time: *mut Timespec) -> i32;
}

/// `struct timespec` of 64-bit Linux targets.
#[repr(C)]
struct Timespec {
    seconds: i64,
    nanoseconds: i64,
}

/// Linux's `CLOCK_MONOTONIC`.
const CLOCK_MONOTONIC: i32 = 1;

/// File descriptor 1, written unbuffered.
pub struct Stdout;

impl fmt::Write for Stdout {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            // SAFETY: `rest` is a live byte slice; `write` reads at most `rest.len()` bytes
            // from its start and keeps no pointer after returning.
            let written = unsafe { write(1, rest.as_ptr(), rest.len()) };
            let Ok(written) = usize::try_from(written) else {
                return Err(fmt::Error);
            };
            if written == 0 {
                return Err(fmt::Error);
            }
            rest = &rest[written.min(rest.len())..];
        }
        Ok(())
    }
}

/// Nanoseconds on the monotonic clock (0 if it cannot be read).
pub fn now_ns() -> u64 {
    let mut time = Timespec {
        seconds: 0,
        nanoseconds: 0,
    };
    // SAFETY: `time` is a valid, writable `struct timespec` for the duration of the call.
    if unsafe { clock_gettime(CLOCK_MONOTONIC, &mut time) } != 0 {
        return 0;
    }
    let seconds = u64::try_from(time.seconds).unwrap_or(0);
    let nanoseconds = u64::try_from(time.nanoseconds).unwrap_or(0);
    seconds
        .saturating_mul(1_000_000_000)
        .saturating_add(nanoseconds)
}
