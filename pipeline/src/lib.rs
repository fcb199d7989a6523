//! tessel-pipeline: the tasks users run, text and audio in and text out, over
//! [`tessel_model`] (the model and its sessions), [`tessel_text`] (the model directory's own
//! tokenizer) and [`tessel_audio`] (WAV reading and Whisper's log-mel front end).
//!
//! A task object holds one shared, immutable model and tokenizer; each concurrent user gets
//! its own session, whose arena is planned from the model and the limits before the first
//! input, as everywhere in tessel.

pub mod model_dir;
pub mod transcribe;
pub mod translate;

pub use model_dir::{generation_defaults, LoadSettings, ModelDir, ModelDirError};
pub use translate::{random_seed, score_ids, token_batches};
pub use translate::{
    BatchShape, BatchTranslating, Hypothesis, IdsBatch, IdsResult, LineResult, Ticket,
    TranslateError, TranslateOptions, TranslateQueue, Translating, Translation, Translator,
};
