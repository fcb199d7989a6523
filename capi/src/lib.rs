//! tessel-capi: the C ABI of tessel, declared in `include/tessel.h` (generated from this crate
//! by cbindgen; `tests/suite/header.rs` fails when the committed header differs).
//!
//! - [`status`]: status codes, the thread-local last error, the `catch_unwind` guard every
//!   entry point runs in;
//! - [`info`]: version, status names, the last error, the ISA level (forcing one);
//! - [`model`]: `tessel_model`, immutable and reference-counted, loaded from a directory, a
//!   packed image file or caller memory, or the embedded numbers model; model info and arena
//!   sizes;
//! - [`handle`]: what a `tessel_model` points to, tagged so other pointers are refused;
//! - [`memory`]: a model read in place from a packed image the caller owns;
//! - [`session`]: `tessel_session`, its arena allocated once at creation; encode, decode
//!   steps, beam reordering, greedy and beam search with a step callback, hypotheses into
//!   caller buffers, the numbers model's text call;
//! - [`batch`]: `tessel_batch`, up to `max_batch` sequences decoded together, each in a slot
//!   that a search is submitted to at any step; polled, its hypotheses into caller buffers;
//! - [`translate`]: `tessel_translator`, text to text over a translation model directory, one
//!   line or many decoded together;
//! - [`transcribe`]: `tessel_transcriber`, speech to timed segments over a Whisper directory;
//! - [`exclusive`]: the one-thread-at-a-time handle of batches and the task-level calls;
//! - [`dir_kind`]: speech or text, told from a directory's files before a task-level load;
//! - [`engine`]: the one module that builds models and sessions of `tessel-model`;
//! - [`args`]: checked views of C pointers and lengths.
//!
//! The rules the header states: every call that can fail returns a [`status::tessel_status`]
//! and never unwinds; NULL, mismatched handles and out-of-range arguments are errors; models
//! are shared by threads, a session or a batch is used by one thread at a time; after
//! `tessel_session_new` or `tessel_batch_new` the token-level calls do not allocate.

pub mod args;
pub mod dir_kind;
pub mod engine;
pub mod exclusive;
pub mod handle;
pub mod info;
pub mod memory;
pub mod model;
pub mod session;
// After `session`, whose types it uses: cbindgen writes the header in this order.
pub mod batch;
pub mod status;
pub mod transcribe;
pub mod translate;
pub mod vad;

pub use batch::*;
pub use handle::ModelHandle;
pub use info::*;
pub use model::*;
pub use session::*;
pub use status::tessel_status;
pub use transcribe::*;
pub use translate::*;
pub use vad::tessel_vad_options;
