//! tessel's own format: a [`Model`] from PyTorch `nn.Transformer` safetensors (`config.json`
//! holding the [`Config`] itself) or from seeded random weights.
//!
//! # Tensor names (PyTorch `nn.Transformer` state_dict, plus embeddings and generator)
//!
//! | name | shape |
//! |---|---|
//! | `src_embed.weight` (absent when `share_embeddings`) | `[src_vocab, d]` |
//! | `tgt_embed.weight` | `[tgt_vocab, d]` |
//! | `src_pos.weight`, `tgt_pos.weight` (learned positions only) | `[max_src_len, d]`, `[max_tgt_len, d]` |
//! | `encoder.layers.{i}.self_attn.in_proj_weight` / `in_proj_bias` | `[3d, d]` / `[3d]` |
//! | `encoder.layers.{i}.self_attn.out_proj.weight` / `.bias` | `[d, d]` / `[d]` |
//! | `encoder.layers.{i}.linear1.weight` / `.bias` | `[d_ff, d]` / `[d_ff]` |
//! | `encoder.layers.{i}.linear2.weight` / `.bias` | `[d, d_ff]` / `[d]` |
//! | `encoder.layers.{i}.norm1`, `norm2` `.weight` / `.bias` | `[d]` |
//! | `decoder.layers.{i}.self_attn.*`, `multihead_attn.*` (same as above) | |
//! | `decoder.layers.{i}.linear1/linear2/norm1/norm2/norm3.*` | |
//! | `encoder.norm.*`, `decoder.norm.*` (when `final_norm`) | `[d]` |
//! | `generator.weight` (absent when `tie_output`) / `generator.bias` | `[tgt_vocab, d]` / `[tgt_vocab]` |
//!
//! Biases are present exactly when the config's `biases` says so. Tensors may be `F32`, `F16`
//! or `BF16` (each independently).

mod build;

use std::path::Path;

use super::error::io_error;
use super::source::{RandomSource, RecordingSource, SafetensorsSource, TensorSource};
use super::{LoadError, LoadOptions};
use crate::config::Config;
use crate::model::Model;

impl Model<'_> {
    /// Builds a model with seeded random weights (same seed, same weights).
    pub fn random(config: Config, seed: u64) -> Result<Model<'static>, LoadError> {
        Model::random_with(config, seed, &LoadOptions::default())
    }

    /// [`Model::random`], laid out as `options` say.
    pub fn random_with(
        config: Config,
        seed: u64,
        options: &LoadOptions,
    ) -> Result<Model<'static>, LoadError> {
        let mut source = RandomSource::new(seed, config.d_model);
        Model::build_from(config, &mut source, options)
    }

    /// Loads `config.json` and `model.safetensors` from `dir`.
    pub fn load_dir(dir: &Path) -> Result<Model<'static>, LoadError> {
        Model::load_dir_with(dir, &LoadOptions::default())
    }

    /// [`Model::load_dir`], laid out as `options` say.
    pub fn load_dir_with(dir: &Path, options: &LoadOptions) -> Result<Model<'static>, LoadError> {
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path).map_err(io_error(&config_path))?;
        let config = Config::from_json(&text)?;
        Model::load_safetensors_with(config, &dir.join("model.safetensors"), options)
    }

    /// Memory-maps a safetensors file and lays its tensors out for `config`.
    pub fn load_safetensors(config: Config, path: &Path) -> Result<Model<'static>, LoadError> {
        Model::load_safetensors_with(config, path, &LoadOptions::default())
    }

    /// [`Model::load_safetensors`], laid out as `options` say.
    pub fn load_safetensors_with(
        config: Config,
        path: &Path,
        options: &LoadOptions,
    ) -> Result<Model<'static>, LoadError> {
        let file = std::fs::File::open(path).map_err(io_error(path))?;
        // SAFETY: the map is read-only and lives only for this call; the weights are copied into
        // the model's own buffers before it is dropped. As with every mmap, a concurrent
        // truncation of the file by another process is outside what this can guard against.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_error(path))?;
        Model::from_safetensors_bytes_with(config, &map, options)
    }

    /// Lays out the tensors of an in-memory safetensors file for `config`.
    pub fn from_safetensors_bytes(
        config: Config,
        bytes: &[u8],
    ) -> Result<Model<'static>, LoadError> {
        Model::from_safetensors_bytes_with(config, bytes, &LoadOptions::default())
    }

    /// [`Model::from_safetensors_bytes`], laid out as `options` say.
    pub fn from_safetensors_bytes_with(
        config: Config,
        bytes: &[u8],
        options: &LoadOptions,
    ) -> Result<Model<'static>, LoadError> {
        config.validate()?;
        let mut source = SafetensorsSource::parse(bytes)?;
        Model::build_from(config, &mut source, options)
    }

    /// Validates `config`, builds the model from `source` and checks every tensor was used.
    fn build_from(
        config: Config,
        source: &mut dyn TensorSource,
        options: &LoadOptions,
    ) -> Result<Model<'static>, LoadError> {
        config.validate()?;
        let model = build::model(config, source, options)?;
        source.check_all_used()?;
        Ok(model)
    }

    /// The tensors (name and shape, in load order) a weights file for `config` must hold:
    /// exactly these. Builds a zero model to find out, so it costs one model's memory
    /// for the duration of the call.
    pub fn expected_tensors(config: &Config) -> Result<Vec<(String, Vec<usize>)>, LoadError> {
        config.validate()?;
        let mut source = RecordingSource::default();
        build::model(config.clone(), &mut source, &LoadOptions::default())?;
        Ok(source.requested)
    }
}
