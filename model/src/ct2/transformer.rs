//! Builds tessel's layers straight from CTranslate2's `TransformerSpec` variables.
//!
//! | CTranslate2 variable | tessel layer |
//! |---|---|
//! | `encoder/embeddings_0/weight` (`encoder/embeddings/weight` in old files), `decoder/embeddings/weight` | source / target [`Embedding`] tables |
//! | `{encoder,decoder}/position_encodings/encodings` (or CTranslate2's sinusoid) | their position tables |
//! | `*/layer_{i}/self_attention/linear_0` (fused Q,K,V), `linear_1`, `layer_norm` | [`SelfAttention`] and its norm |
//! | `decoder/layer_{i}/attention/linear_0` (Q), `linear_1` (fused K,V), `linear_2`, `layer_norm` | [`CrossAttention`] and its norm |
//! | `*/layer_{i}/ffn/linear_0`, `linear_1`, `layer_norm` | [`FeedForward`] and its norm |
//! | `{encoder,decoder}/layer_norm` (pre-norm) | the stacks' final norms |
//! | `decoder/projection` | the generator |
//!
//! Linear weights keep the type `model.bin` stores them in (`float32`, `float16`, `bfloat16`,
//! `int8` with its per-row `weight_scale`, see [`super::int8`]) unless [`Ct2Options::weights`]
//! asks for another; `int16` weights are dequantised with their scale to `f32`. Embeddings
//! (int8 ones dequantised), positions, norms and biases are `f32` in memory.

use crate::config::NormKind;
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use half::{bf16, f16};

use super::binary::{Dtype, ModelBin, Variable};
use super::{Ct2Error, Ct2Options, Ct2Tokens, Vocabulary};
use crate::aligned::AlignedBuf;
use crate::config::{Biases, Config, FfnActivation, NormPlacement, Positions};
use crate::layers::{
    CrossAttention, Embedding, FeedForward, Heads, Linear, Norm, SelfAttention, WeightType,
};
use crate::model::{Model, Source, Stack};
use crate::weights::source::{cast_le, Tensor};
use crate::weights::{block, linear_rows, out_of_memory, LoadError};

/// The file's variables, recording which ones the mapping used.
pub(super) struct Vars<'f, 'a> {
    pub(super) file: &'f ModelBin<'a>,
    pub(super) used: BTreeSet<String>,
}

impl<'f, 'a> Vars<'f, 'a> {
    pub(super) fn get(&mut self, name: &str) -> Option<&'f Variable<'a>> {
        let v = self.file.variables.get(name)?;
        self.used.insert(name.to_owned());
        Some(v)
    }

    pub(super) fn has(&self, name: &str) -> bool {
        self.file.variables.contains_key(name)
    }

    fn canonical(&self, name: &str) -> Option<&'f str> {
        self.file.variables.get(name).map(|v| v.canonical.as_str())
    }

    /// A scalar attribute, looked up as `{scope}/{name}` then `{name}` (older files kept
    /// attributes at the root).
    pub(super) fn attribute(&mut self, scope: &str, name: &str) -> Result<Option<f32>, Ct2Error> {
        let scoped = format!("{scope}/{name}");
        let key = if self.has(&scoped) {
            scoped
        } else {
            name.to_owned()
        };
        let Some(v) = self.get(&key) else {
            return Ok(None);
        };
        if v.len() != 1 {
            return Err(Ct2Error::Attribute {
                name: key,
                reason: format!("expected a scalar, got shape {:?}", v.shape),
            });
        }
        Ok(v.to_f32().first().copied())
    }

    /// An attribute that must be absent or zero (a feature tessel does not implement).
    pub(super) fn require_off(
        &mut self,
        scope: &str,
        name: &str,
        feature: &str,
    ) -> Result<(), Ct2Error> {
        match self.attribute(scope, name)? {
            Some(v) if v != 0.0 => Err(Ct2Error::UnsupportedFeature {
                feature: feature.to_owned(),
                variable: format!("{scope}/{name}"),
            }),
            _ => Ok(()),
        }
    }

    /// A float tensor of `shape` in the type it is stored in; quantised weights are dequantised
    /// to `f32` with their `{prefix}/weight_scale`. Non-finite values are an error.
    pub(super) fn stored(&mut self, name: &str, shape: &[usize]) -> Result<Tensor<'a>, Ct2Error> {
        let v = self
            .get(name)
            .ok_or_else(|| Ct2Error::Missing(name.to_owned()))?;
        let tensor = match v.dtype {
            Dtype::F32 if v.shape == shape => Tensor::F32(cast_le(v.data, f32::from_le_bytes)),
            Dtype::F16 if v.shape == shape => {
                Tensor::F16(cast_le(v.data, |b| f16::from_bits(u16::from_le_bytes(b))))
            }
            Dtype::Bf16 if v.shape == shape => {
                Tensor::Bf16(cast_le(v.data, |b| bf16::from_bits(u16::from_le_bytes(b))))
            }
            _ => Tensor::F32(Cow::Owned(self.tensor(name, shape)?)),
        };
        if !tensor.all_finite() {
            return Err(LoadError::NonFinite {
                name: name.to_owned(),
            }
            .into());
        }
        Ok(tensor)
    }

    /// A float tensor of `shape`, converted to `f32` (quantised weights dequantised with their
    /// `{prefix}/weight_scale`).
    pub(super) fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, Ct2Error> {
        let v = self
            .get(name)
            .ok_or_else(|| Ct2Error::Missing(name.to_owned()))?;
        if v.shape != shape {
            return Err(Ct2Error::Shape {
                name: name.to_owned(),
                expected: shape.to_vec(),
                got: v.shape.clone(),
            });
        }
        let mut values = v.to_f32();
        match v.dtype {
            Dtype::F32 | Dtype::F16 | Dtype::Bf16 => {}
            Dtype::I8 | Dtype::I16 => {
                let scale_name = match name.strip_suffix("weight") {
                    Some(prefix) => format!("{prefix}weight_scale"),
                    None => {
                        return Err(Ct2Error::UnsupportedDtype {
                            name: name.to_owned(),
                            dtype: v.dtype,
                        })
                    }
                };
                let scales = self
                    .get(&scale_name)
                    .ok_or_else(|| Ct2Error::Missing(scale_name.clone()))?
                    .to_f32();
                let rows = shape.first().copied().unwrap_or(1);
                let cols = values.len() / rows.max(1);
                let per_row = match scales.len() {
                    1 => false,
                    n if n == rows => true,
                    _ => {
                        return Err(Ct2Error::Shape {
                            name: scale_name,
                            expected: vec![rows],
                            got: vec![scales.len()],
                        })
                    }
                };
                for (r, row) in values.chunks_mut(cols.max(1)).enumerate() {
                    let s = if per_row { scales[r] } else { scales[0] };
                    if !(s.is_finite() && s != 0.0) {
                        return Err(Ct2Error::Attribute {
                            name: scale_name,
                            reason: format!("scale {s} is not finite and non-zero"),
                        });
                    }
                    row.iter_mut().for_each(|x| *x /= s);
                }
            }
            Dtype::I32 => {
                return Err(Ct2Error::UnsupportedDtype {
                    name: name.to_owned(),
                    dtype: v.dtype,
                })
            }
        }
        Ok(values)
    }

    pub(super) fn shape(&self, name: &str) -> Result<&'f [usize], Ct2Error> {
        self.file
            .variables
            .get(name)
            .map(|v| v.shape.as_slice())
            .ok_or_else(|| Ct2Error::Missing(name.to_owned()))
    }
}

/// CTranslate2's sinusoidal position table: `[sin(p·ω_i) | cos(p·ω_i)]`,
/// `ω_i = exp(-i·ln(10000)/(d/2 - 1))`, position `p` (from 0) encoded as `p + 1`.
pub fn sinusoidal(rows: usize, d: usize) -> Vec<f32> {
    let half = d / 2;
    let increment = 10000f64.ln() / (half.saturating_sub(1).max(1)) as f64;
    let mut table = vec![0.0f32; rows * d];
    for (p, row) in table.chunks_exact_mut(d.max(1)).enumerate() {
        for i in 0..half {
            let angle = (p + 1) as f64 * (-(i as f64) * increment).exp();
            row[i] = angle.sin() as f32;
            row[half + i] = angle.cos() as f32;
        }
    }
    table
}

/// Builds layers from the file's variables.
pub(super) struct Builder<'v, 'f, 'a> {
    pub(super) vars: &'v mut Vars<'f, 'a>,
    pub(super) d: usize,
    pub(super) heads: Heads,
    pub(super) eps: f32,
    pub(super) weights: Option<WeightType>,
}

impl Builder<'_, '_, '_> {
    /// An `f32` table of `shape` in aligned memory.
    pub(super) fn table(&mut self, name: &str, shape: &[usize]) -> Result<AlignedBuf, Ct2Error> {
        let values = self.vars.tensor(name, shape)?;
        if values.iter().any(|v| !v.is_finite()) {
            return Err(LoadError::NonFinite {
                name: name.to_owned(),
            }
            .into());
        }
        Ok(AlignedBuf::from_slice(&values).map_err(out_of_memory(name))?)
    }

    /// The `out × inp` linear `{from}/weight` with its bias when the file has one.
    pub(super) fn linear(
        &mut self,
        from: &str,
        out: usize,
        inp: usize,
    ) -> Result<Linear<'static>, Ct2Error> {
        let name = format!("{from}/weight");
        let bias_name = format!("{from}/bias");
        let bias = if self.vars.has(&bias_name) {
            Some(self.vars.tensor(&bias_name, &[out])?)
        } else {
            None
        };
        if let Some(layer) = self.stored_int8(&name, out, inp, bias.as_deref())? {
            return Ok(layer);
        }
        let weight = self.vars.stored(&name, &[out, inp])?;
        let storage = self.weights.unwrap_or(weight.weight_type());
        Ok(linear_rows(
            &name,
            &weight,
            0..out,
            inp,
            bias.as_deref(),
            storage,
        )?)
    }

    pub(super) fn norm(&mut self, from: &str) -> Result<Norm<'static>, Ct2Error> {
        let d = self.d;
        let gamma = self.table(&format!("{from}/gamma"), &[d])?;
        let beta = self.table(&format!("{from}/beta"), &[d])?;
        Ok(Norm::layer(gamma, beta, self.eps))
    }

    pub(super) fn malformed(scope: &str, e: tessel_kernels::KernelError) -> Ct2Error {
        LoadError::Malformed(format!("{scope}: {e}")).into()
    }

    pub(super) fn self_attention(
        &mut self,
        layer: &str,
    ) -> Result<(Norm<'static>, SelfAttention<'static>), Ct2Error> {
        let (d, scope) = (self.d, format!("{layer}/self_attention"));
        let qkv = self.linear(&format!("{scope}/linear_0"), 3 * d, d)?;
        let out = self.linear(&format!("{scope}/linear_1"), d, d)?;
        let norm = self.norm(&format!("{scope}/layer_norm"))?;
        let attention =
            SelfAttention::new(qkv, out, self.heads).map_err(|e| Self::malformed(&scope, e))?;
        Ok((norm, attention))
    }

    /// CTranslate2 keeps the query projection (`linear_0`) apart from the fused K/V one
    /// (`linear_1`), as tessel's cross-attention does.
    pub(super) fn cross_attention(
        &mut self,
        layer: &str,
    ) -> Result<(Norm<'static>, CrossAttention<'static>), Ct2Error> {
        let (d, scope) = (self.d, format!("{layer}/attention"));
        let q = self.linear(&format!("{scope}/linear_0"), d, d)?;
        let kv = self.linear(&format!("{scope}/linear_1"), 2 * d, d)?;
        let out = self.linear(&format!("{scope}/linear_2"), d, d)?;
        let norm = self.norm(&format!("{scope}/layer_norm"))?;
        let attention =
            CrossAttention::new(q, kv, out, self.heads).map_err(|e| Self::malformed(&scope, e))?;
        Ok((norm, attention))
    }

    pub(super) fn feed_forward(
        &mut self,
        layer: &str,
        d_ff: usize,
        activation: FfnActivation,
    ) -> Result<(Norm<'static>, FeedForward<'static>), Ct2Error> {
        let (d, scope) = (self.d, format!("{layer}/ffn"));
        let up = self.linear(&format!("{scope}/linear_0"), d_ff, d)?;
        let down = self.linear(&format!("{scope}/linear_1"), d, d_ff)?;
        let norm = self.norm(&format!("{scope}/layer_norm"))?;
        let ffn = FeedForward::new(up, down, activation.kernel())
            .map_err(|e| Self::malformed(&scope, e))?;
        Ok((norm, ffn))
    }

    /// The first `rows` rows of `{scope}`'s stored position table, or CTranslate2's sinusoid.
    pub(super) fn positions(&mut self, scope: &str, rows: usize) -> Result<AlignedBuf, Ct2Error> {
        let d = self.d;
        let name = format!("{scope}/position_encodings/encodings");
        let table = if self.vars.has(&name) {
            let stored = self.vars.shape(&name)?.to_vec();
            let all = self.vars.tensor(&name, &stored)?;
            if stored.len() != 2 || stored[1] != d || stored[0] < rows {
                return Err(Ct2Error::Shape {
                    name,
                    expected: vec![rows, d],
                    got: stored,
                });
            }
            all[..rows * d].to_vec()
        } else {
            sinusoidal(rows, d)
        };
        if table.iter().any(|v| !v.is_finite()) {
            return Err(LoadError::NonFinite { name }.into());
        }
        Ok(AlignedBuf::from_slice(&table).map_err(out_of_memory(&name))?)
    }
}

/// Rows of a stored position table, if any.
fn stored_positions(vars: &Vars<'_, '_>, scope: &str) -> Option<usize> {
    let shape = vars
        .file
        .variables
        .get(&format!("{scope}/position_encodings/encodings"))?
        .shape
        .clone();
    shape.first().copied()
}

pub(super) fn activation(vars: &mut Vars<'_, '_>) -> Result<FfnActivation, Ct2Error> {
    let enc = vars.attribute("encoder", "activation")?.unwrap_or(0.0);
    let dec = vars.attribute("decoder", "activation")?.unwrap_or(0.0);
    if enc != dec {
        return Err(Ct2Error::Attribute {
            name: "decoder/activation".to_owned(),
            reason: format!("differs from the encoder's ({dec} vs {enc})"),
        });
    }
    activation_of(enc, "encoder/activation")
}

/// CTranslate2's activation id `id` (read from `variable`).
pub(super) fn activation_of(id: f32, variable: &str) -> Result<FfnActivation, Ct2Error> {
    match id as i32 {
        0 => Ok(FfnActivation::Relu),
        1 => Ok(FfnActivation::GeluTanh),
        2 => Ok(FfnActivation::Silu),
        3 => Ok(FfnActivation::Gelu),
        other => Err(Ct2Error::UnsupportedFeature {
            feature: format!("activation id {other} (tessel has ReLU, GELU, tanh-GELU, swish)"),
            variable: variable.to_owned(),
        }),
    }
}

/// Whether the embeddings of `scope` are multiplied by `√d`.
fn embedding_scale(
    vars: &mut Vars<'_, '_>,
    scope: &str,
    emb: &str,
    d: usize,
) -> Result<bool, Ct2Error> {
    let attribute = vars.attribute(scope, "scale_embeddings")?;
    let explicit = format!("{emb}/multiply_by_sqrt_depth");
    if let Some(v) = vars.get(&explicit) {
        let value = v.to_f32().first().copied().unwrap_or(0.0);
        return match v.dtype {
            Dtype::I8 | Dtype::I16 | Dtype::I32 => Ok(value != 0.0),
            _ if value == 1.0 => Ok(false),
            _ if (value - (d as f32).sqrt()).abs() <= 1e-4 * value.abs() => Ok(true),
            _ => Err(Ct2Error::UnsupportedFeature {
                feature: format!("embedding scale {value} (tessel has 1 and √d)"),
                variable: explicit,
            }),
        };
    }
    Ok(attribute.is_none_or(|v| v != 0.0))
}

/// Builds the tessel model of a `TransformerSpec` file.
pub fn build(
    file: &ModelBin<'_>,
    tokens: &Ct2Tokens,
    source_vocabulary: &Vocabulary,
    target_vocabulary: &Vocabulary,
    options: Ct2Options,
) -> Result<Model<'static>, Ct2Error> {
    if !(file.spec.is_empty() || file.spec == "TransformerSpec") {
        return Err(Ct2Error::UnsupportedSpec(file.spec.clone()));
    }
    for name in file.variables.keys() {
        for (pattern, feature) in [
            ("relative_position", "relative position representations"),
            ("relative_attention", "relative attention bias"),
            ("layernorm_embedding", "LayerNorm after the embeddings"),
            ("rotary", "rotary position embeddings"),
            ("embeddings_1", "several source embeddings (factors)"),
            ("linear_0_noact", "gated (GLU) feed-forward"),
            ("weight_zero", "AWQ quantisation"),
            ("project_in", "input/output projections"),
        ] {
            if name.contains(pattern) {
                return Err(Ct2Error::UnsupportedFeature {
                    feature: feature.to_owned(),
                    variable: name.clone(),
                });
            }
        }
    }
    let mut vars = Vars {
        file,
        used: BTreeSet::new(),
    };
    let vars = &mut vars;
    let src_emb = if vars.has("encoder/embeddings_0/weight") {
        "encoder/embeddings_0"
    } else {
        "encoder/embeddings"
    };
    let src_emb_w = format!("{src_emb}/weight");
    let emb_shape = vars.shape(&src_emb_w)?.to_vec();
    let [src_vocab, d] = emb_shape[..] else {
        return Err(Ct2Error::Shape {
            name: src_emb_w,
            expected: vec![source_vocabulary.len(), 0],
            got: emb_shape,
        });
    };
    let tgt_shape = vars.shape("decoder/embeddings/weight")?.to_vec();
    let tgt_vocab = tgt_shape.first().copied().unwrap_or(0);
    for (vocab, rows, which) in [
        (source_vocabulary, src_vocab, "source"),
        (target_vocabulary, tgt_vocab, "target"),
    ] {
        if vocab.len() != rows {
            return Err(Ct2Error::Vocabulary {
                path: format!("{which}_vocabulary").into(),
                reason: format!(
                    "{} tokens, but the embeddings have {rows} rows",
                    vocab.len()
                ),
            });
        }
    }
    let heads = vars.attribute("encoder", "num_heads")?;
    let heads = heads.ok_or_else(|| Ct2Error::Missing("encoder/num_heads".to_owned()))? as usize;
    if let Some(dec) = vars.attribute("decoder", "num_heads")? {
        if dec as usize != heads {
            return Err(Ct2Error::Attribute {
                name: "decoder/num_heads".to_owned(),
                reason: format!("{dec} differs from the encoder's {heads}"),
            });
        }
    }
    let pre_enc = vars.attribute("encoder", "pre_norm")?.unwrap_or(1.0) != 0.0;
    let pre_dec = vars.attribute("decoder", "pre_norm")?.unwrap_or(1.0) != 0.0;
    if pre_enc != pre_dec {
        return Err(Ct2Error::UnsupportedFeature {
            feature: "pre-norm encoder with post-norm decoder (or the reverse)".to_owned(),
            variable: "decoder/pre_norm".to_owned(),
        });
    }
    let activation = activation(vars)?;
    let scale_src = embedding_scale(vars, "encoder", src_emb, d)?;
    let scale_tgt = embedding_scale(vars, "decoder", "decoder/embeddings", d)?;
    if scale_src != scale_tgt {
        return Err(Ct2Error::UnsupportedFeature {
            feature: "embedding scaling on one side only".to_owned(),
            variable: "decoder/scale_embeddings".to_owned(),
        });
    }
    for (scope, name, feature) in [
        ("decoder", "alibi", "ALiBi"),
        (
            "decoder",
            "start_from_zero_embedding",
            "zero start embedding",
        ),
        ("encoder", "multi_query_attention", "multi-query attention"),
        ("decoder", "multi_query_attention", "multi-query attention"),
    ] {
        vars.require_off(scope, name, feature)?;
    }
    // Attributes that do not change the computation tessel performs.
    for (scope, name) in [
        ("decoder", "alibi_use_positive_positions"),
        ("decoder", "scale_alibi"),
        ("decoder", "alignment_layer"),
        ("decoder", "alignment_heads"),
        ("encoder", "embeddings_merge"),
    ] {
        vars.attribute(scope, name)?;
    }
    let encoder_layers = (0..)
        .take_while(|i| vars.has(&format!("encoder/layer_{i}/ffn/linear_0/weight")))
        .count();
    let decoder_layers = (0..)
        .take_while(|i| vars.has(&format!("decoder/layer_{i}/ffn/linear_0/weight")))
        .count();
    let ff_name = if encoder_layers > 0 {
        "encoder/layer_0/ffn/linear_0/weight"
    } else {
        "decoder/layer_0/ffn/linear_0/weight"
    };
    let d_ff = vars.shape(ff_name)?.first().copied().unwrap_or(0);
    let share_embeddings =
        vars.canonical("decoder/embeddings/weight") == vars.canonical(&src_emb_w);
    let tie_output =
        vars.canonical("decoder/projection/weight") == vars.canonical("decoder/embeddings/weight");
    let final_enc = vars.has("encoder/layer_norm/gamma");
    let final_dec = vars.has("decoder/layer_norm/gamma");
    if final_enc != final_dec {
        return Err(Ct2Error::UnsupportedFeature {
            feature: "a final LayerNorm on one stack only".to_owned(),
            variable: if final_enc {
                "encoder/layer_norm"
            } else {
                "decoder/layer_norm"
            }
            .to_owned(),
        });
    }
    let cap = |scope: &str, limit: usize| {
        stored_positions(vars, scope).map_or(limit, |rows| rows.min(limit))
    };
    let max_src_len = cap("encoder", options.max_src_len);
    let max_tgt_len = cap("decoder", options.max_tgt_len);
    let token_id = |t: &str| {
        target_vocabulary
            .id(t)
            .ok_or_else(|| Ct2Error::MissingToken(t.to_owned()))
    };
    let has_bias = |name: &str| vars.has(&format!("{name}/bias"));
    let probe = |side: &str, part: &str| format!("{side}/layer_0/{part}");
    let side = if encoder_layers > 0 {
        "encoder"
    } else {
        "decoder"
    };
    let biases = Biases {
        attention_in: has_bias(&probe(side, "self_attention/linear_0")),
        attention_key: true,
        attention_out: has_bias(&probe(side, "self_attention/linear_1")),
        ffn: has_bias(&probe(side, "ffn/linear_0")),
        generator: has_bias("decoder/projection"),
    };
    let config = Config {
        d_model: d,
        heads,
        encoder_layers,
        decoder_layers,
        d_ff,
        src_vocab,
        tgt_vocab,
        share_embeddings,
        tie_output,
        max_src_len,
        max_tgt_len,
        max_beam: options.max_beam,
        norm: if pre_enc {
            NormPlacement::Pre
        } else {
            NormPlacement::Post
        },
        final_norm: final_enc,
        activation,
        positions: Positions::Learned,
        biases,
        front_end: crate::config::FrontEnd::Tokens,
        norm_kind: NormKind::Layer,
        gated_ffn: false,
        attention_scale: None,
        relative_attention: None,
        embedding_norm: false,
        position_offset: 0,
        scale_embeddings: scale_src,
        layer_norm_eps: tokens.layer_norm_epsilon.unwrap_or(1e-6),
        bos_id: token_id(&tokens.decoder_start_token)?,
        eos_id: token_id(&tokens.eos_token)?,
        pad_id: target_vocabulary.id("<blank>").unwrap_or(0),
    };
    config.validate().map_err(crate::weights::LoadError::from)?;
    let d_head = config.d_head();
    let mut m = Builder {
        vars,
        d,
        heads: Heads {
            heads,
            d_head,
            scale: tessel_kernels::attention::default_scale(d_head),
        },
        eps: config.layer_norm_eps,
        weights: options.weights,
    };
    let target_table = Arc::new(m.table("decoder/embeddings/weight", &[tgt_vocab, d])?);
    let source_table = if share_embeddings {
        m.vars.get(&src_emb_w);
        Arc::clone(&target_table)
    } else {
        Arc::new(m.table(&src_emb_w, &[src_vocab, d])?)
    };
    let scale = if scale_src { (d as f32).sqrt() } else { 1.0 };
    let source = Embedding::new(source_table, d, scale)
        .with_positions(m.positions("encoder", max_src_len)?, 0);
    let target = Embedding::new(Arc::clone(&target_table), d, scale)
        .with_positions(m.positions("decoder", max_tgt_len)?, 0);
    let placement = config.norm;
    let mut encoder = Vec::with_capacity(encoder_layers);
    for i in 0..encoder_layers {
        let f = format!("encoder/layer_{i}");
        let attention = m.self_attention(&f)?;
        let ffn = m.feed_forward(&f, d_ff, activation)?;
        encoder.push(block(&f, placement, attention, None, ffn)?);
    }
    let mut decoder = Vec::with_capacity(decoder_layers);
    for i in 0..decoder_layers {
        let f = format!("decoder/layer_{i}");
        let attention = m.self_attention(&f)?;
        let cross = m.cross_attention(&f)?;
        let ffn = m.feed_forward(&f, d_ff, activation)?;
        decoder.push(block(&f, placement, attention, Some(cross), ffn)?);
    }
    let (encoder_norm, decoder_norm) = if final_enc {
        (
            Some(m.norm("encoder/layer_norm")?),
            Some(m.norm("decoder/layer_norm")?),
        )
    } else {
        (None, None)
    };
    let generator = if tie_output {
        m.vars.get("decoder/projection/weight");
        let bias = if biases.generator {
            Some(m.vars.tensor("decoder/projection/bias", &[tgt_vocab])?)
        } else {
            None
        };
        let table = "decoder/embeddings/weight";
        match m.stored_int8(table, tgt_vocab, d, bias.as_deref())? {
            Some(layer) => layer,
            None => {
                let stored = m.vars.stored(table, &[tgt_vocab, d])?;
                let storage = options.weights.unwrap_or(stored.weight_type());
                linear_rows(table, &stored, 0..tgt_vocab, d, bias.as_deref(), storage)?
            }
        }
    } else {
        m.linear("decoder/projection", tgt_vocab, d)?
    };
    let used = &m.vars.used;
    if let Some(unused) = file.variables.keys().find(|n| !used.contains(*n)) {
        return Err(Ct2Error::UnsupportedFeature {
            feature: "a variable tessel's Transformer does not use".to_owned(),
            variable: unused.clone(),
        });
    }
    Ok(Model {
        config,
        source: Source::Tokens(source),
        target,
        encoder: Stack::new(encoder, encoder_norm),
        decoder: Stack::new(decoder, decoder_norm),
        generator,
    })
}
