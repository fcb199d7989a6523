//! Loading a [`Model`] from PyTorch `nn.Transformer` safetensors or seeded random weights, and
//! the `Loader` every Hugging Face family maps its own tensor names through.
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

pub(crate) mod source;

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use safetensors::SafeTensors;
use thiserror::Error;

use source::{RandomSource, RecordingSource, SafetensorsSource, Tensor, TensorSource};

use std::sync::Arc;

use crate::aligned::{AlignedBuf, AllocError};
use crate::config::{Config, ConfigError, NormKind, Positions};
use crate::layers::{
    Block, CrossAttention, Embedding, FeedForward, Heads, Linear, LinearError, Norm, SelfAttention,
    WeightType,
};
use crate::model::{Model, Source, Stack};

/// Why a model could not be built.
#[derive(Debug, Error)]
pub enum LoadError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The safetensors file is malformed.
    #[error("malformed safetensors file: {0}")]
    Malformed(String),
    /// A tensor the config requires is absent.
    #[error("tensor `{name}` is missing")]
    Missing {
        /// Tensor name.
        name: String,
    },
    /// A tensor has the wrong shape.
    #[error("tensor `{name}` has shape {got:?}, expected {expected:?}")]
    Shape {
        /// Tensor name.
        name: String,
        /// Shape the config implies.
        expected: Vec<usize>,
        /// Shape in the file.
        got: Vec<usize>,
    },
    /// A tensor is not `F32`.
    #[error("tensor `{name}` has dtype {dtype}, expected F32")]
    Dtype {
        /// Tensor name.
        name: String,
        /// Its dtype.
        dtype: String,
    },
    /// The file holds a tensor this config does not use.
    #[error("tensor `{name}` is not used by this config")]
    Unexpected {
        /// Tensor name.
        name: String,
    },
    /// A tensor holds a NaN or infinity.
    #[error("tensor `{name}` holds a non-finite value")]
    NonFinite {
        /// Tensor name.
        name: String,
    },
    /// A tensor or table the config asks for could not be allocated.
    #[error("cannot allocate {bytes} bytes for `{what}`")]
    OutOfMemory {
        /// Which tensor or table.
        what: String,
        /// Its size.
        bytes: usize,
    },
}

/// The linear layer of `rows` of the `[_ × inp]` weight `tensor` (named `name`) with `bias`,
/// packed as `storage` straight from the stored element type.
pub(crate) fn linear_rows(
    name: &str,
    tensor: &Tensor<'_>,
    rows: std::ops::Range<usize>,
    inp: usize,
    bias: Option<&[f32]>,
    storage: WeightType,
) -> Result<Linear<'static>, LoadError> {
    let n = rows.len();
    let elements = rows.start * inp..rows.end * inp;
    let layer = match tensor {
        Tensor::F32(w) => Linear::packed(storage, n, inp, &w[elements], bias),
        Tensor::F16(w) => Linear::packed(storage, n, inp, &w[elements], bias),
        Tensor::Bf16(w) => Linear::packed(storage, n, inp, &w[elements], bias),
    };
    layer.map_err(linear_error(name))
}

/// Maps a refused allocation for `what` to [`LoadError::OutOfMemory`].
pub(crate) fn out_of_memory(what: &str) -> impl Fn(AllocError) -> LoadError + '_ {
    move |e| LoadError::OutOfMemory {
        what: what.to_owned(),
        bytes: e.bytes,
    }
}

/// Maps a [`LinearError`] of the layer whose weight is `name` to a [`LoadError`].
pub(crate) fn linear_error(name: &str) -> impl Fn(LinearError) -> LoadError + '_ {
    move |e| match e {
        LinearError::Shape(e) => LoadError::Malformed(format!("{name}: {e}")),
        LinearError::Alloc(e) => out_of_memory(name)(e),
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LoadError + '_ {
    move |source| LoadError::Io {
        path: path.to_owned(),
        source,
    }
}

/// How a model is laid out as it is loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Storage of the linear layers' weights whatever the file holds, or `None` to keep the
    /// type each weight is stored in (`f32`, `f16`, `bf16`). Embeddings, position tables,
    /// norms and biases are `f32` in memory either way.
    pub weights: Option<WeightType>,
}

impl LoadOptions {
    /// Linear weights stored as `weights`.
    pub fn weights(weights: WeightType) -> LoadOptions {
        LoadOptions {
            weights: Some(weights),
        }
    }
}

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
        let file =
            SafeTensors::deserialize(bytes).map_err(|e| LoadError::Malformed(e.to_string()))?;
        let mut source = SafetensorsSource {
            file,
            used: HashSet::new(),
        };
        Model::build_from(config, &mut source, options)
    }

    /// Validates `config`, builds the model from `source` and checks every tensor was used.
    fn build_from(
        config: Config,
        source: &mut dyn TensorSource,
        options: &LoadOptions,
    ) -> Result<Model<'static>, LoadError> {
        config.validate()?;
        let model = Model::build(config, source, options)?;
        match source.first_unused() {
            Some(name) => Err(LoadError::Unexpected { name }),
            None => Ok(model),
        }
    }

    /// The tensors (name and shape, in load order) a weights file for `config` must hold:
    /// exactly these. Builds a zero model to find out, so it costs one model's memory
    /// for the duration of the call.
    pub fn expected_tensors(config: &Config) -> Result<Vec<(String, Vec<usize>)>, LoadError> {
        config.validate()?;
        let mut source = RecordingSource::default();
        Model::build(config.clone(), &mut source, &LoadOptions::default())?;
        Ok(source.requested)
    }

    fn build(
        config: Config,
        source: &mut dyn TensorSource,
        options: &LoadOptions,
    ) -> Result<Model<'static>, LoadError> {
        let d = config.d_model;
        let mut loader = Loader {
            source,
            config: &config,
            options,
        };
        let (target_table, target_type) = loader.table("tgt_embed.weight", config.tgt_vocab)?;
        let target_table = Arc::new(target_table);
        let source_table = if config.share_embeddings {
            Arc::clone(&target_table)
        } else {
            Arc::new(loader.table("src_embed.weight", config.src_vocab)?.0)
        };
        let (src_pos, tgt_pos) = match config.positions {
            Positions::Learned => (
                loader.table("src_pos.weight", config.max_src_len)?.0,
                loader.table("tgt_pos.weight", config.max_tgt_len)?.0,
            ),
            Positions::Sinusoidal => (
                sinusoidal_table("source positions", config.max_src_len, d)?,
                sinusoidal_table("target positions", config.max_tgt_len, d)?,
            ),
        };
        let scale = if config.scale_embeddings {
            (d as f32).sqrt()
        } else {
            1.0
        };
        let source = Embedding::new(source_table, d, scale).with_positions(src_pos, 0);
        let target = Embedding::new(Arc::clone(&target_table), d, scale).with_positions(tgt_pos, 0);
        let mut encoder = Vec::with_capacity(config.encoder_layers);
        for i in 0..config.encoder_layers {
            let p = format!("encoder.layers.{i}");
            let attention = loader.self_attention(&format!("{p}.self_attn"))?;
            let norm1 = loader.norm(&format!("{p}.norm1"))?;
            let ffn = loader.feed_forward(&p)?;
            let norm2 = loader.norm(&format!("{p}.norm2"))?;
            encoder.push(block(
                &p,
                config.norm,
                (norm1, attention),
                None,
                (norm2, ffn),
            )?);
        }
        let mut decoder = Vec::with_capacity(config.decoder_layers);
        for i in 0..config.decoder_layers {
            let p = format!("decoder.layers.{i}");
            let attention = loader.self_attention(&format!("{p}.self_attn"))?;
            let cross = loader.cross_attention(&format!("{p}.multihead_attn"))?;
            let norm1 = loader.norm(&format!("{p}.norm1"))?;
            let norm2 = loader.norm(&format!("{p}.norm2"))?;
            let ffn = loader.feed_forward(&p)?;
            let norm3 = loader.norm(&format!("{p}.norm3"))?;
            let cross = Some((norm2, cross));
            decoder.push(block(
                &p,
                config.norm,
                (norm1, attention),
                cross,
                (norm3, ffn),
            )?);
        }
        let (encoder_norm, decoder_norm) = if config.final_norm {
            (
                Some(loader.norm("encoder.norm")?),
                Some(loader.norm("decoder.norm")?),
            )
        } else {
            (None, None)
        };
        let generator = if config.tie_output {
            let bias = if config.biases.generator {
                Some(loader.vector("generator.bias", config.tgt_vocab)?)
            } else {
                None
            };
            let storage = loader.options.weights.unwrap_or(target_type);
            Linear::packed(
                storage,
                config.tgt_vocab,
                d,
                target_table.as_slice(),
                bias.as_deref(),
            )
            .map_err(linear_error("tgt_embed.weight"))?
        } else {
            let [generator] = loader.linears(
                "generator.weight",
                "generator.bias",
                [config.tgt_vocab],
                d,
                config.biases.generator,
            )?;
            generator
        };
        Ok(Model {
            config,
            source: Source::Tokens(source),
            target,
            encoder: Stack::new(encoder, encoder_norm),
            decoder: Stack::new(decoder, decoder_norm),
            generator,
        })
    }
}

/// A block from its loaded layers; a layer of the wrong width is a malformed file.
pub(crate) fn block(
    prefix: &str,
    placement: crate::config::NormPlacement,
    attention: (Norm<'static>, SelfAttention<'static>),
    cross: Option<(Norm<'static>, CrossAttention<'static>)>,
    feed_forward: (Norm<'static>, FeedForward<'static>),
) -> Result<Block<'static>, LoadError> {
    Block::new(placement, attention, cross, feed_forward)
        .map_err(|e| LoadError::Malformed(format!("{prefix}: {e}")))
}

/// Reads tensors by name from a source and builds layers from them, as the config and the
/// load options say. Each family maps its own names through it.
pub(crate) struct Loader<'a> {
    pub source: &'a mut dyn TensorSource,
    pub config: &'a Config,
    pub options: &'a LoadOptions,
}

impl Loader<'_> {
    /// The tensor `name` of exactly `shape`, as stored, checked finite.
    pub(crate) fn stored(&mut self, name: &str, shape: &[usize]) -> Result<Tensor<'_>, LoadError> {
        let tensor = self.source.stored(name, shape)?;
        if !tensor.all_finite() {
            return Err(LoadError::NonFinite {
                name: name.to_owned(),
            });
        }
        Ok(tensor)
    }

    /// The tensor `name` of exactly `shape`, as `f32`, checked finite.
    pub(crate) fn tensor(
        &mut self,
        name: &str,
        shape: &[usize],
    ) -> Result<Cow<'_, [f32]>, LoadError> {
        Ok(self.stored(name, shape)?.into_f32())
    }

    /// A `rows × d_model` table as `f32`, and the type it is stored in.
    pub(crate) fn table(
        &mut self,
        name: &str,
        rows: usize,
    ) -> Result<(AlignedBuf, WeightType), LoadError> {
        let stored = self.stored(name, &[rows, self.config.d_model])?;
        let stored_type = stored.weight_type();
        let values = stored.into_f32();
        let table = AlignedBuf::from_slice(&values).map_err(out_of_memory(name))?;
        Ok((table, stored_type))
    }

    pub(crate) fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, LoadError> {
        Ok(self.tensor(name, &[len])?.into_owned())
    }

    pub(crate) fn norm(&mut self, prefix: &str) -> Result<Norm<'static>, LoadError> {
        let (d, eps, kind) = (
            self.config.d_model,
            self.config.layer_norm_eps,
            self.config.norm_kind,
        );
        let mut vector = |name: String| {
            let values = self.tensor(&name, &[d])?;
            AlignedBuf::from_slice(&values).map_err(out_of_memory(&name))
        };
        let gamma = vector(format!("{prefix}.weight"))?;
        match kind {
            NormKind::Layer => Ok(Norm::layer(gamma, vector(format!("{prefix}.bias"))?, eps)),
            NormKind::Rms => Ok(Norm::rms(gamma, eps)),
        }
    }

    pub(crate) fn heads(&self) -> Heads {
        Heads::of(self.config)
    }

    /// `linear1` (with the activation) and `linear2` of `prefix`.
    fn feed_forward(&mut self, prefix: &str) -> Result<FeedForward<'static>, LoadError> {
        let (d, f, bias) = (
            self.config.d_model,
            self.config.d_ff,
            self.config.biases.ffn,
        );
        let up = self.linear(&format!("{prefix}.linear1"), f, d, bias)?;
        let down = self.linear(&format!("{prefix}.linear2"), d, f, bias)?;
        FeedForward::new(up, down, self.config.activation.kernel())
            .map_err(|e| LoadError::Malformed(format!("{prefix}: {e}")))
    }

    pub(crate) fn linear(
        &mut self,
        prefix: &str,
        out: usize,
        inp: usize,
        bias: bool,
    ) -> Result<Linear<'static>, LoadError> {
        let [linear] = self.linears(
            &format!("{prefix}.weight"),
            &format!("{prefix}.bias"),
            [out],
            inp,
            bias,
        )?;
        Ok(linear)
    }

    /// The `[Σ parts × inp]` weight `weight` (and bias `bias_name` when `bias`) cut into layers
    /// of `parts[i]` output features each, packed as the load options say, straight from the
    /// stored element type.
    pub(crate) fn linears<const N: usize>(
        &mut self,
        weight: &str,
        bias_name: &str,
        parts: [usize; N],
        inp: usize,
        bias: bool,
    ) -> Result<[Linear<'static>; N], LoadError> {
        let out = parts.iter().sum();
        let b = if bias {
            Some(self.vector(bias_name, out)?)
        } else {
            None
        };
        let wanted = self.options.weights;
        let tensor = self.stored(weight, &[out, inp])?;
        let storage = wanted.unwrap_or(tensor.weight_type());
        let mut layers = Vec::with_capacity(N);
        let mut row0 = 0;
        for rows in parts {
            let bias = b.as_ref().map(|b| &b[row0..row0 + rows]);
            layers.push(linear_rows(
                weight,
                &tensor,
                row0..row0 + rows,
                inp,
                bias,
                storage,
            )?);
            row0 += rows;
        }
        layers
            .try_into()
            .map_err(|_| LoadError::Malformed(format!("{weight}: split into {N} layers")))
    }

    /// The `out × inp` weights `{prefix}.weight` of `prefixes` stacked into one layer (their
    /// biases `{prefix}.bias` where `biases` says so, zeros elsewhere), stored as the load
    /// options say or as the first is stored: separate Q, K and V projections as one fused
    /// projection.
    pub(crate) fn fused(
        &mut self,
        prefixes: &[&str],
        biases: &[bool],
        out: usize,
        inp: usize,
    ) -> Result<Linear<'static>, LoadError> {
        let mut parts = Vec::with_capacity(prefixes.len());
        let mut bias = vec![0.0f32; out * prefixes.len()];
        for (i, (prefix, &has_bias)) in prefixes.iter().zip(biases).enumerate() {
            parts.push(
                self.stored(&format!("{prefix}.weight"), &[out, inp])?
                    .into_owned(),
            );
            if has_bias {
                let b = self.vector(&format!("{prefix}.bias"), out)?;
                bias[i * out..(i + 1) * out].copy_from_slice(&b);
            }
        }
        let any_bias = biases.iter().any(|&b| b);
        let name = format!("{}.weight", prefixes.first().copied().unwrap_or(""));
        let tensor = Tensor::concat(parts);
        let storage = self.options.weights.unwrap_or(tensor.weight_type());
        let rows = out * prefixes.len();
        linear_rows(
            &name,
            &tensor,
            0..rows,
            inp,
            any_bias.then_some(&bias[..]),
            storage,
        )
    }

    /// `in_proj_weight [3d, d]`, `in_proj_bias`, `out_proj.*`: the fused Q/K/V projection and
    /// the output projection.
    fn self_attention(&mut self, prefix: &str) -> Result<SelfAttention<'static>, LoadError> {
        let d = self.config.d_model;
        let b = self.config.biases;
        let [qkv] = self.linears(
            &format!("{prefix}.in_proj_weight"),
            &format!("{prefix}.in_proj_bias"),
            [3 * d],
            d,
            b.attention_in,
        )?;
        let out = self.linear(&format!("{prefix}.out_proj"), d, d, b.attention_out)?;
        SelfAttention::new(qkv, out, self.heads())
            .map_err(|e| LoadError::Malformed(format!("{prefix}: {e}")))
    }

    /// As [`Loader::self_attention`], the input projection cut into the query projection (of
    /// the decoder state) and the fused K/V projection (of the encoder output).
    fn cross_attention(&mut self, prefix: &str) -> Result<CrossAttention<'static>, LoadError> {
        let d = self.config.d_model;
        let b = self.config.biases;
        let [q, kv] = self.linears(
            &format!("{prefix}.in_proj_weight"),
            &format!("{prefix}.in_proj_bias"),
            [d, 2 * d],
            d,
            b.attention_in,
        )?;
        let out = self.linear(&format!("{prefix}.out_proj"), d, d, b.attention_out)?;
        CrossAttention::new(q, kv, out, self.heads())
            .map_err(|e| LoadError::Malformed(format!("{prefix}: {e}")))
    }
}

/// The sinusoidal table of "Attention Is All You Need", computed in `f64`.
/// The sinusoidal position table, allocated fallibly: its size comes from config.json alone.
fn sinusoidal_table(what: &str, rows: usize, d: usize) -> Result<AlignedBuf, LoadError> {
    let mut table = AlignedBuf::zeros(rows.saturating_mul(d)).map_err(out_of_memory(what))?;
    let t = table.as_mut_slice();
    for pos in 0..rows {
        for i in (0..d).step_by(2) {
            let angle = pos as f64 / 10000f64.powf(i as f64 / d as f64);
            t[pos * d + i] = angle.sin() as f32;
            if i + 1 < d {
                t[pos * d + i + 1] = angle.cos() as f32;
            }
        }
    }
    Ok(table)
}
