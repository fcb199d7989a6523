//! The `Loader` every family maps its tensor names through: tensors read by name and shape,
//! built into layers as the config and the load options say.

use std::borrow::Cow;
use std::sync::Arc;

use super::error::{linear_error, malformed, out_of_memory, LoadError};
use super::options::LoadOptions;
use super::source::{Tensor, TensorSource};
use crate::aligned::AlignedBuf;
use crate::config::{Config, NormKind, StackKind};
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
    Block::new(placement, attention, cross, feed_forward).map_err(malformed(prefix))
}

/// A model's token tables: the target's, with the type it is stored in (the tied output
/// projection's default), and the source's, the same table when the stacks share one.
pub(crate) struct TokenTables {
    /// The target embedding's table.
    pub target: Arc<AlignedBuf>,
    /// The type the target table is stored in.
    pub target_type: WeightType,
    /// The source embedding's table.
    pub source: Arc<AlignedBuf>,
}

/// Reads tensors by name from a source and builds layers from them, as the config and the
/// load options say. Each family maps its own names through it.
pub(crate) struct Loader<'a> {
    pub source: &'a mut dyn TensorSource,
    pub config: &'a Config,
    pub options: &'a LoadOptions,
}

impl<'a> Loader<'a> {
    /// A loader reading `source` for a model of `config`, as `options` say.
    pub(crate) fn new(
        source: &'a mut dyn TensorSource,
        config: &'a Config,
        options: &'a LoadOptions,
    ) -> Loader<'a> {
        Loader {
            source,
            config,
            options,
        }
    }

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

    /// The target table `target` (`tgt_vocab` rows) and the source table `source`
    /// (`src_vocab` rows), or the target's again when `shared`.
    pub(crate) fn token_tables(
        &mut self,
        target: &str,
        source: &str,
        shared: bool,
    ) -> Result<TokenTables, LoadError> {
        let (table, target_type) = self.table(target, self.config.tgt_vocab)?;
        let target = Arc::new(table);
        let source = if shared {
            Arc::clone(&target)
        } else {
            Arc::new(self.table(source, self.config.src_vocab)?.0)
        };
        Ok(TokenTables {
            target,
            target_type,
            source,
        })
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

    /// The final norms `encoder` and `decoder` of the stacks, where the config has them.
    pub(crate) fn final_norms(
        &mut self,
        encoder: &str,
        decoder: &str,
    ) -> Result<(Option<Norm<'static>>, Option<Norm<'static>>), LoadError> {
        if !self.config.final_norm {
            return Ok((None, None));
        }
        Ok((Some(self.norm(encoder)?), Some(self.norm(decoder)?)))
    }

    /// The head layout of `stack`'s attention.
    pub(crate) fn heads(&self, stack: StackKind) -> Heads {
        Heads::of(self.config, stack)
    }

    /// `linear1` (with the activation) and `linear2` of `prefix`, a block of `stack`.
    pub(super) fn feed_forward(
        &mut self,
        prefix: &str,
        stack: StackKind,
    ) -> Result<FeedForward<'static>, LoadError> {
        let (d, f, bias) = (
            self.config.d_model,
            self.config.d_ff_in(stack),
            self.config.biases.ffn,
        );
        let up = self.linear(&format!("{prefix}.linear1"), f, d, bias)?;
        let down = self.linear(&format!("{prefix}.linear2"), d, f, bias)?;
        FeedForward::new(up, down, self.config.activation.kernel()).map_err(malformed(prefix))
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
    /// the output projection, of a block of `stack`.
    pub(super) fn self_attention(
        &mut self,
        prefix: &str,
        stack: StackKind,
    ) -> Result<SelfAttention<'static>, LoadError> {
        let a = self.config.attention_width(stack);
        let ([qkv], out) = self.in_out_projections(prefix, [3 * a], stack)?;
        SelfAttention::new(qkv, out, self.heads(stack)).map_err(malformed(prefix))
    }

    /// As [`Loader::self_attention`], the input projection cut into the query projection (of
    /// the decoder state) and the fused K/V projection (of the encoder output).
    pub(super) fn cross_attention(
        &mut self,
        prefix: &str,
    ) -> Result<CrossAttention<'static>, LoadError> {
        let decoder = StackKind::Decoder;
        let a = self.config.attention_width(decoder);
        let ([q, kv], out) = self.in_out_projections(prefix, [a, 2 * a], decoder)?;
        CrossAttention::new(q, kv, out, self.heads(decoder)).map_err(malformed(prefix))
    }

    /// An attention's `in_proj_weight` (and `in_proj_bias`) cut into layers of `parts` rows,
    /// and its `out_proj`, in a block of `stack`.
    fn in_out_projections<const N: usize>(
        &mut self,
        prefix: &str,
        parts: [usize; N],
        stack: StackKind,
    ) -> Result<([Linear<'static>; N], Linear<'static>), LoadError> {
        let (d, a) = (self.config.d_model, self.config.attention_width(stack));
        let b = self.config.biases;
        let inputs = self.linears(
            &format!("{prefix}.in_proj_weight"),
            &format!("{prefix}.in_proj_bias"),
            parts,
            d,
            b.attention_in,
        )?;
        let out = self.linear(&format!("{prefix}.out_proj"), d, a, b.attention_out)?;
        Ok((inputs, out))
    }
}
