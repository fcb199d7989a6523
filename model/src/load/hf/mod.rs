//! Hugging Face directories (`config.json` + `model.safetensors`), one module per family: its
//! `config.json` mapped onto a [`crate::Config`] and its tensor names onto the shared
//! [`crate::layers`], never a copy of the encoder/decoder passes.
//!
//! - `bart`: Marian (OPUS-MT), BART, mBART and M2M100/NLLB;
//! - `t5`: T5, mT5 and Flan-T5;
//! - `whisper`: Whisper;
//! - `blocks`: the block layout the BART-derived families and Whisper share;
//! - `tables`: which tensors hold the token tables and the output projection, as
//!   `transformers` ties them.
//!
//! [`crate::load::directory::FAMILIES`] lists which `model_type` each loads.

pub mod bart;
mod blocks;
pub mod t5;
mod tables;
pub mod whisper;
