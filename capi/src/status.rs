//! Status codes, the thread-local last-error message and the guard every entry point runs in.
//!
//! Every exported function that can fail runs its body through [`guard`]: the body returns
//! `Result<(), Error>`, a panic is caught with `catch_unwind` and becomes
//! [`tessel_status::TESSEL_ERR_PANIC`], and the message of any failure is written into this
//! thread's fixed 1 KiB buffer (truncated at a character boundary), so that reporting an error
//! never allocates. A successful call leaves the message as it was, as `errno` does.

use std::cell::RefCell;
use std::ffi::{c_char, CStr};
use std::fmt::{self, Write as _};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tessel_model::RunError;

/// The result of every call that can fail. `TESSEL_OK` is zero; every other value is a failure
/// whose message `tessel_last_error` returns on the same thread.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum tessel_status {
    /// Success.
    TESSEL_OK = 0,
    /// A required pointer argument was NULL.
    TESSEL_ERR_NULL = 1,
    /// A handle of the wrong kind (a session where a model was expected, or a pointer that is
    /// not a live handle of this library and does not look like one).
    TESSEL_ERR_HANDLE = 2,
    /// An argument is out of range (lengths, beam width, ids, limits, names, UTF-8), or the
    /// caller's step callback left no finite logit to rank.
    TESSEL_ERR_ARGUMENT = 3,
    /// A caller buffer is too small; the call reported the size it needs and changed nothing
    /// else.
    TESSEL_ERR_BUFFER_TOO_SMALL = 4,
    /// A model could not be loaded (missing or malformed files, unsupported format).
    TESSEL_ERR_LOAD = 5,
    /// The session refused the call (decode before encode, too long, bad beam ...), or the
    /// model's output could not be used (every logit non-finite without a callback, generated
    /// ids its tokenizer lacks); the session keeps its state and stays usable.
    TESSEL_ERR_RUN = 6,
    /// Memory for a model or an arena could not be allocated.
    TESSEL_ERR_OUT_OF_MEMORY = 7,
    /// The model or the CPU lacks what the call needs (a text call on a model without a
    /// vocabulary, a directory of the other task given to a task-level loader, an ISA level
    /// this CPU does not run).
    TESSEL_ERR_UNSUPPORTED = 8,
    /// Another thread is using this session right now (a session is used by one thread at a
    /// time); nothing was done.
    TESSEL_ERR_BUSY = 9,
    /// A bug inside tessel (a Rust panic), caught at the boundary. The handle involved should
    /// be released.
    TESSEL_ERR_PANIC = 10,
    /// A caller buffer does not start on the boundary the call needs (a packed image in
    /// memory: 64 bytes); nothing was done.
    TESSEL_ERR_MISALIGNED = 11,
}

/// Every status, in code order.
pub(crate) const STATUSES: [tessel_status; 12] = [
    tessel_status::TESSEL_OK,
    tessel_status::TESSEL_ERR_NULL,
    tessel_status::TESSEL_ERR_HANDLE,
    tessel_status::TESSEL_ERR_ARGUMENT,
    tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL,
    tessel_status::TESSEL_ERR_LOAD,
    tessel_status::TESSEL_ERR_RUN,
    tessel_status::TESSEL_ERR_OUT_OF_MEMORY,
    tessel_status::TESSEL_ERR_UNSUPPORTED,
    tessel_status::TESSEL_ERR_BUSY,
    tessel_status::TESSEL_ERR_PANIC,
    tessel_status::TESSEL_ERR_MISALIGNED,
];

impl tessel_status {
    /// The constant's name, NUL-terminated.
    pub const fn name(self) -> &'static CStr {
        match self {
            tessel_status::TESSEL_OK => c"TESSEL_OK",
            tessel_status::TESSEL_ERR_NULL => c"TESSEL_ERR_NULL",
            tessel_status::TESSEL_ERR_HANDLE => c"TESSEL_ERR_HANDLE",
            tessel_status::TESSEL_ERR_ARGUMENT => c"TESSEL_ERR_ARGUMENT",
            tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL => c"TESSEL_ERR_BUFFER_TOO_SMALL",
            tessel_status::TESSEL_ERR_LOAD => c"TESSEL_ERR_LOAD",
            tessel_status::TESSEL_ERR_RUN => c"TESSEL_ERR_RUN",
            tessel_status::TESSEL_ERR_OUT_OF_MEMORY => c"TESSEL_ERR_OUT_OF_MEMORY",
            tessel_status::TESSEL_ERR_UNSUPPORTED => c"TESSEL_ERR_UNSUPPORTED",
            tessel_status::TESSEL_ERR_BUSY => c"TESSEL_ERR_BUSY",
            tessel_status::TESSEL_ERR_PANIC => c"TESSEL_ERR_PANIC",
            tessel_status::TESSEL_ERR_MISALIGNED => c"TESSEL_ERR_MISALIGNED",
        }
    }
}

/// A failure: its status and a message formatted only when it is recorded (into the
/// thread-local buffer, without allocating).
pub struct Error {
    status: tessel_status,
    message: Message,
}

enum Message {
    Static(&'static str),
    Run(RunError),
    /// A session refusal caused by what the caller's step callback left.
    Callback(RunError),
    Display(Box<dyn fmt::Display + Send>),
}

impl Error {
    /// A failure with a fixed message.
    pub const fn new(status: tessel_status, message: &'static str) -> Error {
        Error {
            status,
            message: Message::Static(message),
        }
    }

    /// A failure whose message is `what: <error>`, the error kept until it is recorded.
    ///
    /// Boxing the error allocates; only calls documented as allocating (loading, creating a
    /// session, the text calls) use it. Refusals on the token-level path use [`Error::run`] or
    /// [`Error::new`].
    pub fn boxed(status: tessel_status, error: impl fmt::Display + Send + 'static) -> Error {
        Error {
            status,
            message: Message::Display(Box::new(error)),
        }
    }

    /// A refusal by the session, kept inline (no allocation), as `TESSEL_ERR_RUN`.
    pub fn run(error: RunError) -> Error {
        Error {
            status: tessel_status::TESSEL_ERR_RUN,
            message: Message::Run(error),
        }
    }

    /// A search the caller's step callback left nothing to rank (kept inline, no allocation),
    /// as `TESSEL_ERR_ARGUMENT`: the callback is the caller's.
    pub fn callback(error: RunError) -> Error {
        Error {
            status: tessel_status::TESSEL_ERR_ARGUMENT,
            message: Message::Callback(error),
        }
    }

    /// The same failure and message under `status`.
    pub fn with_status(self, status: tessel_status) -> Error {
        Error { status, ..self }
    }

    /// The status.
    pub fn status(&self) -> tessel_status {
        self.status
    }
}

/// `Err(Error::new(status, message))`.
pub fn fail<T>(status: tessel_status, message: &'static str) -> Result<T, Error> {
    Err(Error::new(status, message))
}

/// Capacity of the last-error buffer, NUL included.
pub const MESSAGE_CAPACITY: usize = 1024;

/// One thread's last error: its status and message (NUL-terminated within the array).
struct LastError {
    status: tessel_status,
    len: usize,
    bytes: [u8; MESSAGE_CAPACITY],
}

impl fmt::Write for LastError {
    /// Appends what fits, cutting at a character boundary; never fails, never allocates.
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = MESSAGE_CAPACITY - 1 - self.len;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

thread_local! {
    // A const initializer and no destructor: no lazy allocation on first use.
    static LAST: RefCell<LastError> = const {
        RefCell::new(LastError {
            status: tessel_status::TESSEL_OK,
            len: 0,
            bytes: [0; MESSAGE_CAPACITY],
        })
    };
}

/// Records `status` and the message `write` produces as this thread's last error.
fn record(status: tessel_status, write: impl FnOnce(&mut LastError)) {
    let _ = LAST.try_with(|last| {
        if let Ok(mut last) = last.try_borrow_mut() {
            last.status = status;
            last.len = 0;
            write(&mut last);
            let len = last.len;
            last.bytes[len] = 0;
        }
    });
}

/// Records `error` and returns its status.
pub fn report(error: Error) -> tessel_status {
    let status = error.status;
    record(status, |last| {
        let _ = match &error.message {
            Message::Static(text) => last.write_str(text),
            Message::Run(error) => write!(last, "{error}"),
            Message::Callback(error) => write!(last, "after the step callback: {error}"),
            Message::Display(shown) => write!(last, "{shown}"),
        };
    });
    status
}

/// Runs `body`, turning its error or panic into a status and this thread's last error.
pub fn guard(body: impl FnOnce() -> Result<(), Error>) -> tessel_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => tessel_status::TESSEL_OK,
        Ok(Err(error)) => report(error),
        Err(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            record(tessel_status::TESSEL_ERR_PANIC, |last| {
                let _ = write!(last, "internal error (a panic inside tessel): {text}");
            });
            tessel_status::TESSEL_ERR_PANIC
        }
    }
}

/// Copies this thread's last message into `out` (`cap` bytes, NUL-terminated) and writes its
/// length without the NUL to `len`; `TESSEL_ERR_BUFFER_TOO_SMALL` when `cap <= len`, the
/// message kept for a retry.
pub fn copy_last(out: *mut c_char, cap: usize, len: &mut usize) -> tessel_status {
    LAST.with(|last| {
        let last = last.borrow();
        *len = last.len;
        if out.is_null() || cap <= last.len {
            return tessel_status::TESSEL_ERR_BUFFER_TOO_SMALL;
        }
        // SAFETY: the caller guarantees `out` points to `cap` writable bytes and `cap > len`,
        // so `len + 1` bytes fit; the thread-local buffer cannot overlap caller memory.
        unsafe {
            std::ptr::copy_nonoverlapping(last.bytes.as_ptr(), out.cast::<u8>(), last.len + 1);
        }
        tessel_status::TESSEL_OK
    })
}

/// A pointer to this thread's last message, NUL-terminated, valid until the next failing call
/// on this thread (and the thread's exit).
pub fn last_ptr() -> *const c_char {
    LAST.with(|last| last.borrow().bytes.as_ptr().cast::<c_char>())
}
