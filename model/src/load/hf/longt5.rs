//! LongT5 (`google/long-t5-local-base` and the like) from a Hugging Face directory: T5 whose
//! encoder attends locally.
//!
//! With `encoder_attention_type: "local"`, each encoder query sees the keys within
//! `local_radius` positions of it (`transformers` splits the source into blocks of
//! `local_radius + 1` and masks each query's three blocks to that distance, which is the same
//! band), with the stack's bucketed relative position bias; the encoder's layers are named
//! `LocalSelfAttention`. The rest is T5's (`super::t5`), including how `tie_word_embeddings`
//! is read: the published checkpoints (`false`) run the shared table unscaled.
//!
//! With `encoder_attention_type: "transient-global"` (`google/long-t5-tglobal-*`), the
//! encoder's layers are named `TransientGlobalSelfAttention` and each query also sees one
//! side key per block of `global_block_size` source positions (each layer's
//! `global_input_layer_norm` over the block's summed inputs, through the layer's own K and V)
//! with the first layer's `global_relative_attention_bias` by block distance
//! ([`crate::layers::TransientGlobal`]).
//!
//! No position table bounds the source: sessions plan for [`DEFAULT_MAX_SOURCE`] tokens, the
//! length LongT5 was published for, and its targets for the settings' length.

use std::path::Path;

use serde::Deserialize;

use super::t5::{self, EncoderAttention};
use super::{config_error, read_config};
use crate::load::{LoadError, LoadOptions};
use crate::model::Model;

/// Longest source a LongT5 session plans for unless told otherwise.
pub const DEFAULT_MAX_SOURCE: usize = 16384;

/// The fields of a LongT5 `config.json` besides T5's.
#[derive(Clone, Debug, Deserialize)]
struct LongConfig {
    #[serde(default = "local")]
    encoder_attention_type: String,
    #[serde(default = "radius")]
    local_radius: usize,
    #[serde(default = "block")]
    global_block_size: usize,
}

fn local() -> String {
    "local".into()
}
fn radius() -> usize {
    127
}
fn block() -> usize {
    16
}

/// Loads a Hugging Face LongT5 directory, its targets planned for `max_len` positions.
pub fn load_hf_dir(
    dir: &Path,
    max_len: usize,
    max_beam: usize,
    options: &LoadOptions,
) -> Result<Model<'static>, LoadError> {
    let text = read_config(dir)?;
    let long: LongConfig = serde_json::from_str(&text).map_err(config_error)?;
    let (module, global_block) = match long.encoder_attention_type.as_str() {
        "local" => ("LocalSelfAttention", None),
        "transient-global" => ("TransientGlobalSelfAttention", Some(long.global_block_size)),
        other => {
            return Err(config_error(format_args!(
                "encoder_attention_type `{other}`"
            )))
        }
    };
    let (mut config, scale_outputs) = t5::config_from_hf(&text, max_len, max_beam)?;
    config.max_src_len = DEFAULT_MAX_SOURCE;
    config.global_block_size = global_block;
    config.validate()?;
    let encoder = EncoderAttention {
        module,
        radius: Some(long.local_radius),
        global_block,
    };
    t5::load_with(dir, config, scale_outputs, encoder, options)
}
