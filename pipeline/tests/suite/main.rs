//! The pipeline's golden tests, as one test binary.

mod batched_chunks;
mod batched_golden;
mod cues_golden;
mod options_golden;
mod timed;
mod transcribe_golden;
mod translate_golden;
mod vad_golden;
mod words_golden;
