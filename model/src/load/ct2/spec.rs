//! The attributes of a `TransformerSpec` file: what CTranslate2's C++ `TransformerEncoder` and
//! `TransformerDecoder` read before building their layers, found the way they find them, from
//! the scalar attributes and from which optional variables are present.
//!
//! | read from | what it decides | CTranslate2's default |
//! |---|---|---|
//! | `{encoder,decoder}/num_heads` | heads (equal in both stacks: CTranslate2's converters write the encoder's for both) | – (required here) |
//! | `{encoder,decoder}/layer_0/ffn/linear_0/weight` rows | each stack's feed-forward width | – |
//! | `{encoder,decoder}/pre_norm` | pre- or post-norm (equal) | pre-norm |
//! | `{encoder,decoder}/activation` | activation id (equal): 0 ReLU, 1 tanh-GELU, 2 swish, 3 GELU | ReLU |
//! | `{scope}/scale_embeddings` (or `{scope}/embeddings/multiply_by_sqrt_depth`) | embedding scale: an `int8` flag (√d or 1) or the value itself | √d |
//! | `{scope}/layernorm_embedding/gamma` | a norm after embedding + position (BART, mBART) | none |
//! | `{encoder,decoder}/layer_norm/gamma` | final norms | none |
//! | `*/layer_0/*/layer_norm/beta` | LayerNorm (present) or RMSNorm (absent, T5) | – |
//! | `*/layer_0/ffn/linear_0_noact` | gated feed-forward (T5 v1.1) | plain |
//! | `*/layer_0/self_attention/relative_attention_bias` | T5's relative buckets, no absolute positions | none |
//! | `*/layer_0/self_attention/queries_scale` | attention score scale (T5: 1) | `1/√d_head` |
//! | `decoder/start_from_zero_embedding` | the first decoder input is a zero vector (Marian) | off |
//! | `decoder/scale_outputs` | the decoder output is multiplied by it before the projection (T5) | 1 |
//! | aliases of `decoder/embeddings/weight` | shared source embedding, tied projection | – |
//!
//! Features tessel does not implement (relative position keys/values, rotary embeddings,
//! ALiBi, multi-query attention, several source embeddings, AWQ, input/output projections) are
//! refused with [`Ct2Error::UnsupportedFeature`] naming the variable that reveals them.

use super::binary::Dtype;
use super::vars::Vars;
use super::Ct2Error;
use crate::config::{Biases, FfnActivation, NormKind, RelativeAttention};

/// What a `TransformerSpec` file describes, before any layer is built.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Spec {
    /// Prefix of the source embedding (`encoder/embeddings_0`, or `encoder/embeddings` in old
    /// files).
    pub source_embedding: String,
    /// Model width.
    pub d: usize,
    /// Rows of the source embedding.
    pub src_rows: usize,
    /// Rows of the target embedding (and of the projection).
    pub tgt_rows: usize,
    /// Attention heads.
    pub heads: usize,
    /// Width of the attention's inner rows, `heads × d_head` (layer 0's fused Q/K/V rows over
    /// 3; `d` in most models, not in T5 v1.1 / Flan-T5 / mT5 small).
    pub attention_width: usize,
    /// Pre-norm layers.
    pub pre_norm: bool,
    /// Feed-forward activation.
    pub activation: FfnActivation,
    /// Factor of the embeddings (both stacks).
    pub embedding_scale: f32,
    /// Encoder layers.
    pub encoder_layers: usize,
    /// Decoder layers.
    pub decoder_layers: usize,
    /// Feed-forward inner width (the encoder's, or the decoder's in a decoder-only file).
    pub d_ff: usize,
    /// The decoder's feed-forward inner width.
    pub decoder_d_ff: usize,
    /// The source embedding is the target's.
    pub share_embeddings: bool,
    /// The projection is the target embedding.
    pub tie_output: bool,
    /// Final norms after both stacks.
    pub final_norm: bool,
    /// Norms after the embeddings of both stacks.
    pub embedding_norm: bool,
    /// LayerNorm or RMSNorm (layer 0's).
    pub norm_kind: NormKind,
    /// Gated feed-forward (layer 0's; every layer is checked when built).
    pub gated_ffn: bool,
    /// Relative attention buckets (both stacks), replacing absolute positions.
    pub relative: Option<RelativeAttention>,
    /// Attention score scale, when the file sets one.
    pub queries_scale: Option<f32>,
    /// The first decoder input is a zero vector.
    pub zero_start: bool,
    /// Factor of the decoder output before the projection, when not 1.
    pub scale_outputs: Option<f32>,
    /// Which projections carry biases (layer 0's).
    pub biases: Biases,
}

/// Variable name fragments of features tessel refuses, with the feature's name.
const REFUSED: [(&str, &str); 7] = [
    ("relative_position", "relative position representations"),
    ("relative_asymmetric", "asymmetric relative positions"),
    ("rotary", "rotary position embeddings"),
    ("embeddings_1", "several source embeddings (factors)"),
    ("weight_zero", "AWQ quantisation"),
    ("project_in", "input/output projections"),
    ("project_out", "input/output projections"),
];

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

/// The encoder's and decoder's attribute `name`, which must agree (absent: `default`); a
/// disagreement is a [`Ct2Error::Attribute`] naming the decoder's.
fn both(vars: &mut Vars<'_, '_>, name: &str, default: f32) -> Result<f32, Ct2Error> {
    let enc = vars.attribute("encoder", name)?.unwrap_or(default);
    let dec = vars.attribute("decoder", name)?.unwrap_or(default);
    if enc != dec {
        return Err(Ct2Error::Attribute {
            name: format!("decoder/{name}"),
            reason: format!("differs from the encoder's ({dec} vs {enc})"),
        });
    }
    Ok(enc)
}

/// The heads of `decoder/num_heads` (absent: `encoder`'s), which must be `encoder`'s: the
/// converters write the encoder's heads for both stacks, so a model whose stacks differ
/// cannot come out of them right, and tessel runs none.
fn same_heads(vars: &mut Vars<'_, '_>, encoder: f32) -> Result<usize, Ct2Error> {
    let decoder = vars.attribute("decoder", "num_heads")?.unwrap_or(encoder);
    if decoder != encoder {
        return Err(Ct2Error::UnsupportedFeature {
            feature: format!(
                "attention heads differing between the encoder ({encoder}) and the decoder \
                 ({decoder})"
            ),
            variable: "decoder/num_heads".to_owned(),
        });
    }
    Ok(encoder as usize)
}

/// Whether `{encoder,decoder}/{part}` exist, which must agree.
fn on_both(vars: &Vars<'_, '_>, part: &str, feature: &str) -> Result<bool, Ct2Error> {
    let enc = vars.has(&format!("encoder/{part}"));
    let dec = vars.has(&format!("decoder/{part}"));
    if enc != dec {
        let side = if enc { "encoder" } else { "decoder" };
        return Err(Ct2Error::UnsupportedFeature {
            feature: format!("{feature} on one stack only"),
            variable: format!("{side}/{part}"),
        });
    }
    Ok(enc)
}

/// The embedding factor of `scope`, as CTranslate2's `build_embeddings_scale` decides it.
fn embedding_scale(vars: &mut Vars<'_, '_>, scope: &str, d: usize) -> Result<f32, Ct2Error> {
    let sqrt_d = (d as f32).sqrt();
    let names = [
        format!("{scope}/scale_embeddings"),
        format!("{scope}/embeddings/multiply_by_sqrt_depth"),
    ];
    let Some(name) = names.into_iter().find(|n| vars.has(n)) else {
        return Ok(sqrt_d);
    };
    let Some(v) = vars.get(&name) else {
        return Ok(sqrt_d);
    };
    let value = match v.to_f32()[..] {
        [value] => value,
        _ => {
            return Err(Ct2Error::Attribute {
                name,
                reason: format!("expected a scalar, got shape {:?}", v.shape),
            })
        }
    };
    match v.dtype {
        Dtype::I8 if value != 0.0 => Ok(sqrt_d),
        Dtype::I8 => Ok(1.0),
        _ if value.is_finite() => Ok(value),
        _ => Err(Ct2Error::Attribute {
            name,
            reason: format!("embedding scale {value} is not finite"),
        }),
    }
}

/// Layers `{stack}/layer_{i}` present, counted by their feed-forward.
pub(super) fn layer_count(vars: &Vars<'_, '_>, stack: &str) -> usize {
    (0..)
        .take_while(|i| vars.has(&format!("{stack}/layer_{i}/ffn/linear_0/weight")))
        .count()
}

/// Layer 0's relative attention (buckets, maximum distance) in `stack`, if it has one.
fn relative(vars: &mut Vars<'_, '_>, stack: &str) -> Result<Option<RelativeAttention>, Ct2Error> {
    let scope = format!("{stack}/layer_0/self_attention");
    let Some(buckets) = vars.rows(&format!("{scope}/relative_attention_bias")) else {
        return Ok(None);
    };
    let distance = vars
        .attribute(&scope, "relative_attention_max_distance")?
        .ok_or_else(|| Ct2Error::Missing(format!("{scope}/relative_attention_max_distance")))?;
    if !(1.0..=crate::config::MAX_POSITIONS as f32).contains(&distance) {
        return Err(Ct2Error::Attribute {
            name: format!("{scope}/relative_attention_max_distance"),
            reason: format!("{distance} is not a positive distance"),
        });
    }
    Ok(Some(RelativeAttention {
        buckets,
        max_distance: distance as usize,
    }))
}

impl Spec {
    /// Reads the attributes of a `TransformerSpec` file (recording them as used), part by
    /// part; the first part found wrong is the error.
    pub(super) fn read(vars: &mut Vars<'_, '_>) -> Result<Spec, Ct2Error> {
        refuse_unsupported(vars)?;
        let (source_embedding, src_rows, d) = source_embedding(vars)?;
        let tgt_rows = vars.rows("decoder/embeddings/weight").unwrap_or(0);
        let (heads, pre_norm, activation, embedding_scale) = stack_attributes(vars, d)?;
        let (zero_start, scale_outputs) = decoder_output(vars)?;
        let encoder_layers = layer_count(vars, "encoder");
        let decoder_layers = layer_count(vars, "decoder");
        let side = if encoder_layers > 0 {
            "encoder"
        } else {
            "decoder"
        };
        let layer0 = |part: &str| format!("{side}/layer_0/{part}");
        let d_ff = vars.rows(&layer0("ffn/linear_0/weight")).unwrap_or(0);
        let decoder_d_ff = vars
            .rows("decoder/layer_0/ffn/linear_0/weight")
            .unwrap_or(d_ff);
        let attention_width = attention_width(vars, &layer0("self_attention"), d, heads)?;
        let src_weight = format!("{source_embedding}/weight");
        let target = vars.canonical("decoder/embeddings/weight");
        let share_embeddings = target == vars.canonical(&src_weight);
        let tie_output = vars.canonical("decoder/projection/weight") == target;
        let (final_norm, embedding_norm) = optional_norms(vars, scale_outputs.is_some())?;
        let norm_kind = if vars.has(&layer0("self_attention/layer_norm/beta")) {
            NormKind::Layer
        } else {
            NormKind::Rms
        };
        let relative = relative_attention(vars, encoder_layers > 0)?;
        let queries_scale = queries_scale(vars, &layer0("self_attention"))?;
        let biases = biases(vars, side, zero_start);
        Ok(Spec {
            source_embedding,
            d,
            src_rows,
            tgt_rows,
            heads,
            attention_width,
            pre_norm,
            activation,
            embedding_scale,
            encoder_layers,
            decoder_layers,
            d_ff,
            decoder_d_ff,
            share_embeddings,
            tie_output,
            final_norm,
            embedding_norm,
            norm_kind,
            gated_ffn: vars.has(&layer0("ffn/linear_0_noact/weight")),
            relative,
            queries_scale,
            zero_start,
            scale_outputs,
            biases,
        })
    }
}

/// Refuses a spec other than `TransformerSpec`, and a variable that reveals a feature of
/// [`REFUSED`].
fn refuse_unsupported(vars: &Vars<'_, '_>) -> Result<(), Ct2Error> {
    let file = vars.file;
    if !(file.spec.is_empty() || file.spec == "TransformerSpec") {
        return Err(Ct2Error::UnsupportedSpec(file.spec.clone()));
    }
    for name in file.variables.keys() {
        if let Some((_, feature)) = REFUSED.iter().find(|(p, _)| name.contains(p)) {
            return Err(Ct2Error::UnsupportedFeature {
                feature: (*feature).to_owned(),
                variable: name.clone(),
            });
        }
    }
    Ok(())
}

/// The source embedding's prefix (`encoder/embeddings_0`, or `encoder/embeddings` in old
/// files), rows and width.
fn source_embedding(vars: &Vars<'_, '_>) -> Result<(String, usize, usize), Ct2Error> {
    let prefix = if vars.has("encoder/embeddings_0/weight") {
        "encoder/embeddings_0"
    } else {
        "encoder/embeddings"
    };
    let name = format!("{prefix}/weight");
    let shape = vars.shape(&name)?.to_vec();
    let [rows, d] = shape[..] else {
        return Err(Ct2Error::Shape {
            name,
            expected: vec![0, 0],
            got: shape,
        });
    };
    Ok((prefix.to_owned(), rows, d))
}

/// The attributes both stacks must agree on: heads, pre-norm, activation and embedding
/// scale; the features they may only have off; the attributes that change nothing here.
fn stack_attributes(
    vars: &mut Vars<'_, '_>,
    d: usize,
) -> Result<(usize, bool, FfnActivation, f32), Ct2Error> {
    let heads = vars
        .attribute("encoder", "num_heads")?
        .ok_or_else(|| Ct2Error::Missing("encoder/num_heads".to_owned()))?;
    let heads = same_heads(vars, heads)?;
    let pre_norm = both(vars, "pre_norm", 1.0)? != 0.0;
    let activation = activation_of(both(vars, "activation", 0.0)?, "encoder/activation")?;
    let encoder_scale = embedding_scale(vars, "encoder", d)?;
    let decoder_scale = embedding_scale(vars, "decoder", d)?;
    if encoder_scale != decoder_scale {
        return Err(Ct2Error::UnsupportedFeature {
            feature: format!(
                "embedding scales differing between the stacks ({encoder_scale} vs {decoder_scale})"
            ),
            variable: "decoder/scale_embeddings".to_owned(),
        });
    }
    for (scope, name, feature) in [
        ("decoder", "alibi", "ALiBi"),
        ("encoder", "multi_query_attention", "multi-query attention"),
        ("decoder", "multi_query_attention", "multi-query attention"),
    ] {
        vars.require_off(scope, name, feature)?;
    }
    // Attributes that do not change what tessel computes for this spec.
    for (scope, name) in [
        ("decoder", "alibi_use_positive_positions"),
        ("decoder", "scale_alibi"),
        ("decoder", "alignment_layer"),
        ("decoder", "alignment_heads"),
        ("encoder", "embeddings_merge"),
    ] {
        vars.attribute(scope, name)?;
    }
    Ok((heads, pre_norm, activation, encoder_scale))
}

/// Whether the decoder starts from a zero embedding, and the factor of its output when not 1.
fn decoder_output(vars: &mut Vars<'_, '_>) -> Result<(bool, Option<f32>), Ct2Error> {
    let zero_start = vars
        .attribute("decoder", "start_from_zero_embedding")?
        .is_some_and(|v| v != 0.0);
    let scale_outputs = match vars.get("decoder/scale_outputs") {
        None => None,
        Some(v) => match v.to_f32()[..] {
            [1.0] => None,
            [s] if s.is_finite() && s != 0.0 => Some(s),
            _ => {
                return Err(Ct2Error::Attribute {
                    name: "decoder/scale_outputs".to_owned(),
                    reason: format!("not a finite non-zero scalar: shape {:?}", v.shape),
                })
            }
        },
    };
    Ok((zero_start, scale_outputs))
}

/// `heads × d_head`, from the fused Q/K/V rows of the self-attention `scope` (`d` without
/// them).
fn attention_width(
    vars: &Vars<'_, '_>,
    scope: &str,
    d: usize,
    heads: usize,
) -> Result<usize, Ct2Error> {
    let name = format!("{scope}/linear_0/weight");
    match vars.rows(&name) {
        None => Ok(d),
        Some(rows) if rows % 3 == 0 && (rows / 3).is_multiple_of(heads.max(1)) => Ok(rows / 3),
        Some(rows) => Err(Ct2Error::Attribute {
            name,
            reason: format!("{rows} rows are not 3 × {heads} heads × d_head"),
        }),
    }
}

/// Whether both stacks have a final norm and a norm after their embeddings; a scaled decoder
/// output needs the final norm it is folded into.
fn optional_norms(vars: &Vars<'_, '_>, scaled_outputs: bool) -> Result<(bool, bool), Ct2Error> {
    let final_norm = on_both(vars, "layer_norm/gamma", "a final norm")?;
    let embedding_norm = on_both(
        vars,
        "layernorm_embedding/gamma",
        "a norm after the embeddings",
    )?;
    if scaled_outputs && !final_norm {
        return Err(Ct2Error::UnsupportedFeature {
            feature: "scaled decoder outputs without a final decoder norm".to_owned(),
            variable: "decoder/scale_outputs".to_owned(),
        });
    }
    Ok((final_norm, embedding_norm))
}

/// The decoder's relative attention, which an encoder (when there is one) must share.
fn relative_attention(
    vars: &mut Vars<'_, '_>,
    has_encoder: bool,
) -> Result<Option<RelativeAttention>, Ct2Error> {
    let encoder = relative(vars, "encoder")?;
    let decoder = relative(vars, "decoder")?;
    if has_encoder && encoder != decoder {
        return Err(Ct2Error::UnsupportedFeature {
            feature: "relative attention differing between the stacks".to_owned(),
            variable: "decoder/layer_0/self_attention/relative_attention_bias".to_owned(),
        });
    }
    Ok(decoder)
}

/// The score scale of the self-attention `scope`, when the file sets one (positive).
fn queries_scale(vars: &mut Vars<'_, '_>, scope: &str) -> Result<Option<f32>, Ct2Error> {
    let scale = vars.attribute(scope, "queries_scale")?;
    match scale {
        Some(s) if !(s.is_finite() && s > 0.0) => Err(Ct2Error::Attribute {
            name: format!("{scope}/queries_scale"),
            reason: format!("{s} is not a positive scale"),
        }),
        _ => Ok(scale),
    }
}

/// Which projections carry biases: layer 0's of `side`, and the projection's (a zero-start
/// model's always has one, for its start row).
fn biases(vars: &Vars<'_, '_>, side: &str, zero_start: bool) -> Biases {
    let has_bias = |part: &str| vars.has(&format!("{side}/layer_0/{part}/bias"));
    Biases {
        attention_in: has_bias("self_attention/linear_0"),
        attention_key: true,
        attention_out: has_bias("self_attention/linear_1"),
        ffn: has_bias("ffn/linear_0"),
        generator: vars.has("decoder/projection/bias") || zero_start,
    }
}
