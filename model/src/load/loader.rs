//! The `Loader` every family maps its tensor names through: tensors read by name and shape,
//! built into layers as the config and the load options say.

use std::borrow::Cow;

use super::error::{linear_error, out_of_memory, LoadError};
use super::options::LoadOptions;
use super::source::{Tensor, TensorSource};
use crate::aligned::AlignedBuf;
use crate::config::{Config, NormKind};
use crate::layers::{
    Block, ConvStem, CrossAttention, FeedForward, Heads, Linear, Norm, SelfAttention, WeightType,
};

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

/// The convolution weight `name` (`[out, channels, 3]`, as `stored`) with `bias`, as the
/// linear layer over `(tap, channel)` a [`ConvStem`] runs ([`ConvStem::pack_weight`]): stored
/// as `wanted`, else as the file stores it, in a type the stem takes.
pub(crate) fn conv_linear(
    name: &str,
    stored: &Tensor<'_>,
    bias: &[f32],
    (out, channels): (usize, usize),
    wanted: Option<WeightType>,
) -> Result<Linear<'static>, LoadError> {
    let storage = wanted.unwrap_or(stored.weight_type()).for_conv_stem();
    let packed = match stored {
        Tensor::F32(w) => Tensor::F32(ConvStem::pack_weight(w, out, channels).into()),
        Tensor::F16(w) => Tensor::F16(ConvStem::pack_weight(w, out, channels).into()),
        Tensor::Bf16(w) => Tensor::Bf16(ConvStem::pack_weight(w, out, channels).into()),
    };
    linear_rows(name, &packed, 0..out, 3 * channels, Some(bias), storage)
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
    pub(super) fn feed_forward(&mut self, prefix: &str) -> Result<FeedForward<'static>, LoadError> {
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
    pub(super) fn self_attention(
        &mut self,
        prefix: &str,
    ) -> Result<SelfAttention<'static>, LoadError> {
        let (d, a) = (self.config.d_model, self.config.attention_width());
        let b = self.config.biases;
        let [qkv] = self.linears(
            &format!("{prefix}.in_proj_weight"),
            &format!("{prefix}.in_proj_bias"),
            [3 * a],
            d,
            b.attention_in,
        )?;
        let out = self.linear(&format!("{prefix}.out_proj"), d, a, b.attention_out)?;
        SelfAttention::new(qkv, out, self.heads())
            .map_err(|e| LoadError::Malformed(format!("{prefix}: {e}")))
    }

    /// As [`Loader::self_attention`], the input projection cut into the query projection (of
    /// the decoder state) and the fused K/V projection (of the encoder output).
    pub(super) fn cross_attention(
        &mut self,
        prefix: &str,
    ) -> Result<CrossAttention<'static>, LoadError> {
        let (d, a) = (self.config.d_model, self.config.attention_width());
        let b = self.config.biases;
        let [q, kv] = self.linears(
            &format!("{prefix}.in_proj_weight"),
            &format!("{prefix}.in_proj_bias"),
            [a, 2 * a],
            d,
            b.attention_in,
        )?;
        let out = self.linear(&format!("{prefix}.out_proj"), d, a, b.attention_out)?;
        CrossAttention::new(q, kv, out, self.heads())
            .map_err(|e| LoadError::Malformed(format!("{prefix}: {e}")))
    }
}
