//! The C API tests that need no process of their own, as one test binary. `image` and
//! `no_alloc` install a counting global allocator and stay binaries of their own.

mod api;
mod batched;
mod common;
mod header;
mod in_buffer;
mod load;
mod transcribe;
mod translate;
mod vad;
mod words;
