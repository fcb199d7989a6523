//! The command-line tests, as one test binary: each runs the built `tessel` as a user does.

mod cli;
mod transcribe;
mod translate;
