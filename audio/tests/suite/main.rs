//! The audio tests that need no process of their own, as one test binary (`no_alloc`
//! installs a counting global allocator and stays a binary of its own).

mod golden;
mod mel_api;
mod wav;
