//! The tokenizer tests, as one test binary.

mod common;
mod families;
mod hf;
mod spm;
mod whisper;
