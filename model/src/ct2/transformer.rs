//! Maps CTranslate2's `TransformerSpec` variables onto tessel's tensor names and config.
//!
//! | CTranslate2 variable | tessel tensor |
//! |---|---|
//! | `encoder/embeddings_0/weight` (`encoder/embeddings/weight` in old files) | `src_embed.weight` |
//! | `decoder/embeddings/weight` | `tgt_embed.weight` |
//! | `{encoder,decoder}/position_encodings/encodings` (or CTranslate2's sinusoid) | `src_pos.weight`, `tgt_pos.weight` |
//! | `*/layer_{i}/self_attention/linear_0` (fused Q,K,V), `linear_1`, `layer_norm` | `self_attn.in_proj_*`, `out_proj`, `norm1` |
//! | `decoder/layer_{i}/attention/linear_0` (Q) + `linear_1` (K,V), `linear_2`, `layer_norm` | `multihead_attn.in_proj_*`, `out_proj`, `norm2` |
//! | `*/layer_{i}/ffn/linear_0`, `linear_1`, `layer_norm` | `linear1`, `linear2`, `norm2` (encoder) / `norm3` (decoder) |
//! | `{encoder,decoder}/layer_norm` (pre-norm) | `encoder.norm`, `decoder.norm` |
//! | `decoder/projection` | `generator` |
//!
//! LayerNorm `gamma`/`beta` become `weight`/`bias`.

use std::collections::{BTreeSet, HashMap};

use super::binary::{Dtype, ModelBin, Variable};
use super::{Ct2Error, Ct2Options, Ct2Tokens, Vocabulary};
use crate::config::{Biases, Config, FfnActivation, NormPlacement, Positions};
use crate::model::Model;

type Tensors = HashMap<String, (Vec<usize>, Vec<f32>)>;

/// The file's variables, recording which ones the mapping used.
struct Vars<'f, 'a> {
    file: &'f ModelBin<'a>,
    used: BTreeSet<String>,
}

impl<'f, 'a> Vars<'f, 'a> {
    fn get(&mut self, name: &str) -> Option<&'f Variable<'a>> {
        let v = self.file.variables.get(name)?;
        self.used.insert(name.to_owned());
        Some(v)
    }

    fn has(&self, name: &str) -> bool {
        self.file.variables.contains_key(name)
    }

    fn canonical(&self, name: &str) -> Option<&'f str> {
        self.file.variables.get(name).map(|v| v.canonical.as_str())
    }

    /// A scalar attribute, looked up as `{scope}/{name}` then `{name}` (older files kept
    /// attributes at the root).
    fn attribute(&mut self, scope: &str, name: &str) -> Result<Option<f32>, Ct2Error> {
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
    fn require_off(&mut self, scope: &str, name: &str, feature: &str) -> Result<(), Ct2Error> {
        match self.attribute(scope, name)? {
            Some(v) if v != 0.0 => Err(Ct2Error::UnsupportedFeature {
                feature: feature.to_owned(),
                variable: format!("{scope}/{name}"),
            }),
            _ => Ok(()),
        }
    }

    /// A float tensor of `shape`, converted to `f32` (quantised weights dequantised with their
    /// `{prefix}/weight_scale`).
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, Ct2Error> {
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

    fn shape(&self, name: &str) -> Result<&'f [usize], Ct2Error> {
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

struct Mapper<'v, 'f, 'a> {
    vars: &'v mut Vars<'f, 'a>,
    out: Tensors,
}

impl Mapper<'_, '_, '_> {
    fn put(&mut self, name: &str, shape: Vec<usize>, values: Vec<f32>) {
        self.out.insert(name.to_owned(), (shape, values));
    }

    fn copy(&mut self, from: &str, to: &str, shape: &[usize]) -> Result<(), Ct2Error> {
        let values = self.vars.tensor(from, shape)?;
        self.put(to, shape.to_vec(), values);
        Ok(())
    }

    /// A linear's weight and (when present) bias; returns whether it had a bias.
    fn linear(
        &mut self,
        from: &str,
        to_w: &str,
        to_b: &str,
        out: usize,
        inp: usize,
    ) -> Result<bool, Ct2Error> {
        self.copy(&format!("{from}/weight"), to_w, &[out, inp])?;
        let bias = format!("{from}/bias");
        if self.vars.has(&bias) {
            self.copy(&bias, to_b, &[out])?;
            return Ok(true);
        }
        Ok(false)
    }

    fn norm(&mut self, from: &str, to: &str, d: usize) -> Result<(), Ct2Error> {
        self.copy(&format!("{from}/gamma"), &format!("{to}.weight"), &[d])?;
        self.copy(&format!("{from}/beta"), &format!("{to}.bias"), &[d])
    }

    fn positions(&mut self, scope: &str, to: &str, rows: usize, d: usize) -> Result<(), Ct2Error> {
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
        self.put(to, vec![rows, d], table);
        Ok(())
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

fn activation(vars: &mut Vars<'_, '_>) -> Result<FfnActivation, Ct2Error> {
    let enc = vars.attribute("encoder", "activation")?.unwrap_or(0.0);
    let dec = vars.attribute("decoder", "activation")?.unwrap_or(0.0);
    if enc != dec {
        return Err(Ct2Error::Attribute {
            name: "decoder/activation".to_owned(),
            reason: format!("differs from the encoder's ({dec} vs {enc})"),
        });
    }
    match enc as i32 {
        0 => Ok(FfnActivation::Relu),
        1 => Ok(FfnActivation::GeluTanh),
        2 => Ok(FfnActivation::Silu),
        3 => Ok(FfnActivation::Gelu),
        other => Err(Ct2Error::UnsupportedFeature {
            feature: format!("activation id {other} (tessel has ReLU, GELU, tanh-GELU, swish)"),
            variable: "encoder/activation".to_owned(),
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
) -> Result<Model, Ct2Error> {
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
        scale_embeddings: scale_src,
        layer_norm_eps: tokens.layer_norm_epsilon.unwrap_or(1e-6),
        bos_id: token_id(&tokens.decoder_start_token)?,
        eos_id: token_id(&tokens.eos_token)?,
        pad_id: target_vocabulary.id("<blank>").unwrap_or(0),
    };
    config.validate().map_err(crate::weights::LoadError::from)?;
    let mut m = Mapper {
        vars,
        out: Tensors::new(),
    };
    m.copy(
        "decoder/embeddings/weight",
        "tgt_embed.weight",
        &[tgt_vocab, d],
    )?;
    if share_embeddings {
        m.vars.get(&src_emb_w);
    } else {
        m.copy(&src_emb_w, "src_embed.weight", &[src_vocab, d])?;
    }
    m.positions("encoder", "src_pos.weight", max_src_len, d)?;
    m.positions("decoder", "tgt_pos.weight", max_tgt_len, d)?;
    for i in 0..encoder_layers {
        let (f, t) = (format!("encoder/layer_{i}"), format!("encoder.layers.{i}"));
        self_attention(&mut m, &f, &t, d)?;
        m.norm(
            &format!("{f}/self_attention/layer_norm"),
            &format!("{t}.norm1"),
            d,
        )?;
        ffn(&mut m, &f, &t, d, d_ff)?;
        m.norm(&format!("{f}/ffn/layer_norm"), &format!("{t}.norm2"), d)?;
    }
    for i in 0..decoder_layers {
        let (f, t) = (format!("decoder/layer_{i}"), format!("decoder.layers.{i}"));
        self_attention(&mut m, &f, &t, d)?;
        m.norm(
            &format!("{f}/self_attention/layer_norm"),
            &format!("{t}.norm1"),
            d,
        )?;
        cross_attention(&mut m, &f, &t, d)?;
        m.norm(
            &format!("{f}/attention/layer_norm"),
            &format!("{t}.norm2"),
            d,
        )?;
        ffn(&mut m, &f, &t, d, d_ff)?;
        m.norm(&format!("{f}/ffn/layer_norm"), &format!("{t}.norm3"), d)?;
    }
    if final_enc {
        m.norm("encoder/layer_norm", "encoder.norm", d)?;
        m.norm("decoder/layer_norm", "decoder.norm", d)?;
    }
    if tie_output {
        m.vars.get("decoder/projection/weight");
        if biases.generator {
            m.copy("decoder/projection/bias", "generator.bias", &[tgt_vocab])?;
        }
    } else {
        m.linear(
            "decoder/projection",
            "generator.weight",
            "generator.bias",
            tgt_vocab,
            d,
        )?;
    }
    let Mapper { vars, out } = m;
    if let Some(unused) = file.variables.keys().find(|n| !vars.used.contains(*n)) {
        return Err(Ct2Error::UnsupportedFeature {
            feature: "a variable tessel's Transformer does not use".to_owned(),
            variable: unused.clone(),
        });
    }
    let load = crate::LoadOptions::weights(options.weights);
    Ok(Model::from_named_tensors(config, out, &load)?)
}

fn self_attention(m: &mut Mapper<'_, '_, '_>, f: &str, t: &str, d: usize) -> Result<(), Ct2Error> {
    let a = format!("{t}.self_attn");
    m.linear(
        &format!("{f}/self_attention/linear_0"),
        &format!("{a}.in_proj_weight"),
        &format!("{a}.in_proj_bias"),
        3 * d,
        d,
    )?;
    m.linear(
        &format!("{f}/self_attention/linear_1"),
        &format!("{a}.out_proj.weight"),
        &format!("{a}.out_proj.bias"),
        d,
        d,
    )?;
    Ok(())
}

/// CTranslate2 keeps the query projection (`linear_0`) apart from the fused K/V one
/// (`linear_1`); tessel's `in_proj` is `[Q; K; V]`.
fn cross_attention(m: &mut Mapper<'_, '_, '_>, f: &str, t: &str, d: usize) -> Result<(), Ct2Error> {
    let a = format!("{t}.multihead_attn");
    let mut w = m
        .vars
        .tensor(&format!("{f}/attention/linear_0/weight"), &[d, d])?;
    w.extend(
        m.vars
            .tensor(&format!("{f}/attention/linear_1/weight"), &[2 * d, d])?,
    );
    m.put(&format!("{a}.in_proj_weight"), vec![3 * d, d], w);
    let (qb, kvb) = (
        format!("{f}/attention/linear_0/bias"),
        format!("{f}/attention/linear_1/bias"),
    );
    if m.vars.has(&qb) || m.vars.has(&kvb) {
        let mut b = m.vars.tensor(&qb, &[d])?;
        b.extend(m.vars.tensor(&kvb, &[2 * d])?);
        m.put(&format!("{a}.in_proj_bias"), vec![3 * d], b);
    }
    m.linear(
        &format!("{f}/attention/linear_2"),
        &format!("{a}.out_proj.weight"),
        &format!("{a}.out_proj.bias"),
        d,
        d,
    )?;
    Ok(())
}

fn ffn(
    m: &mut Mapper<'_, '_, '_>,
    f: &str,
    t: &str,
    d: usize,
    d_ff: usize,
) -> Result<(), Ct2Error> {
    m.linear(
        &format!("{f}/ffn/linear_0"),
        &format!("{t}.linear1.weight"),
        &format!("{t}.linear1.bias"),
        d_ff,
        d,
    )?;
    m.linear(
        &format!("{f}/ffn/linear_1"),
        &format!("{t}.linear2.weight"),
        &format!("{t}.linear2.bias"),
        d,
        d_ff,
    )?;
    Ok(())
}
