//! Hugging Face directories (`config.json` + `model.safetensors`), one module per family: its
//! `config.json` mapped onto a [`crate::Config`] and its tensor names onto the shared
//! [`crate::layers`], never a copy of the encoder/decoder passes.
//!
//! - `bart`: Marian (OPUS-MT), BART, mBART and M2M100/NLLB;
//! - `led`: LED (BART with Longformer's encoder self-attention);
//! - `t5`: T5, mT5 and Flan-T5;
//! - `longt5`: LongT5 with local encoder attention (T5's layers, named apart);
//! - `whisper`: Whisper;
//! - `blocks`: the block layout the BART-derived families and Whisper share;
//! - `sublayers`: the attention and feed-forward layers of every family, from a table of
//!   their tensor names;
//! - `tables`: which tensors hold the token tables and the output projection, as
//!   `transformers` ties them.
//!
//! [`crate::load::directory::FAMILIES`] lists which `model_type` each loads.

pub mod bart;
mod blocks;
pub mod led;
pub mod longt5;
mod sublayers;
pub mod t5;
mod tables;
pub mod whisper;

use std::path::Path;

use super::LoadError;
use crate::config::FfnActivation;

/// A `config.json` that cannot be read as the family's: `what` is wrong with it.
fn config_error(what: impl core::fmt::Display) -> LoadError {
    LoadError::Malformed(format!("config.json: {what}"))
}

/// The file `name` of `dir`.
fn read(dir: &Path, name: &str) -> Result<Vec<u8>, LoadError> {
    let path = dir.join(name);
    std::fs::read(&path).map_err(|source| LoadError::Io { path, source })
}

/// The text of `dir`'s `config.json`.
fn read_config(dir: &Path) -> Result<String, LoadError> {
    String::from_utf8(read(dir, "config.json")?).map_err(config_error)
}

/// The feed-forward activation a `config.json`'s `activation_function` names.
fn activation(name: &str) -> Result<FfnActivation, LoadError> {
    match name {
        "gelu" => Ok(FfnActivation::Gelu),
        "gelu_new" | "gelu_pytorch_tanh" => Ok(FfnActivation::GeluTanh),
        "relu" => Ok(FfnActivation::Relu),
        "silu" | "swish" => Ok(FfnActivation::Silu),
        other => Err(config_error(format_args!("activation `{other}`"))),
    }
}
