//! The tokenizer tests, as one test binary.

mod common;
mod families;
mod hf;
mod hf_direct;
mod spm;
mod whisper;
