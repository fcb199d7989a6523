//! Assembles the tessel [`Model`] of a `TransformerSpec` file: the [`Spec`] read from its
//! attributes, the layers from [`Builder`], the special tokens from `config.json`.
//!
//! | CTranslate2 variable | tessel part |
//! |---|---|
//! | `encoder/embeddings_0/weight` (`encoder/embeddings/weight` in old files), `decoder/embeddings/weight` | source / target [`Embedding`] tables (one when aliased) |
//! | `{encoder,decoder}/position_encodings/encodings` (or CTranslate2's sinusoid; none with relative attention) | their position tables, from row 0 |
//! | `{encoder,decoder}/layernorm_embedding` | the embeddings' norms |
//! | `{encoder,decoder}/layer_{i}/…` | the stacks' [`crate::layers::Block`]s |
//! | `{encoder,decoder}/layer_norm` | the stacks' final norms (the decoder's times `decoder/scale_outputs`) |
//! | `decoder/projection` (or an alias of the target embedding) | the generator |
//!
//! Conventions mapped, as CTranslate2's `TransformerDecoder::decode` runs them:
//! - `start_from_zero_embedding` (Marian): the first decoder input is a zero vector, not
//!   scaled, plus position 0. tessel feeds token ids, so the target table (and the projection)
//!   get one extra row after the file's: zeros in the table, zeros in the projection with the
//!   bias [`START_LOGIT`], so that the row is never produced (its probability is exactly 0 in
//!   `f32`); an int8 projection stays int8, its extra row int8 zeros with scale 1, which
//!   computes exactly the bias. Its id, `tgt_rows`, is the model's `bos_id`; the vocabulary
//!   has no token for it. The logits therefore have one more column than the target
//!   vocabulary.
//! - `scale_outputs` (T5): folded into the decoder's final norm (`γ` and `β` times the scale),
//!   which is exactly "multiply the decoder output" in real arithmetic. CTranslate2 4.8.5's
//!   converter writes `d^-0.5` for every T5 whose `tie_word_embeddings` is true, and
//!   transformers 5 forces that flag for all T5 configs (its own scale is
//!   `scale_decoder_outputs`): a CTranslate2 directory of an "untied" T5 gives logits
//!   `d^-0.5` times those of transformers. tessel follows the file, so it matches CTranslate2.
//! - Positions start at row 0 of the stored tables: the converters store them already shifted
//!   (BART's learned positions from row 2, M2M100's sinusoids from row 2, Marian's from 0).

use std::borrow::Cow;
use std::sync::Arc;

use half::{bf16, f16};

use super::binary::ModelBin;
use super::spec::Spec;
use super::transformer::{Builder, LAYER_NORM_EPS, RMS_NORM_EPS};
use super::vars::Vars;
use super::{Ct2Error, Ct2Options, Ct2Tokens, Vocabulary};
use crate::aligned::AlignedBuf;
use crate::config::{Config, NormKind, NormPlacement, Positions, Sizes, SpecialIds};
use crate::layers::{Block, Embedding, Linear};
use crate::load::source::Tensor;
use crate::load::{linear_rows, LoadError};
use crate::model::{Model, Source, Stack};

/// The generator's bias for the zero start row of `start_from_zero_embedding` models: far
/// below any real logit, finite so that no penalty or softmax meets an infinity.
pub const START_LOGIT: f32 = -1e30;

/// The `f32` table `name` (`rows × d`) followed by `extra` rows of zeros, in aligned memory.
fn table_with_zero_rows(
    b: &mut Builder<'_, '_, '_>,
    name: &str,
    rows: usize,
    extra: usize,
) -> Result<AlignedBuf, Ct2Error> {
    let d = b.d;
    b.vars.table(name, &[rows, d], extra * d)
}

/// The stored tensor followed by one row of `width` zeros of its own type.
fn with_zero_row(tensor: Tensor<'_>, width: usize) -> Tensor<'static> {
    let zeros = match tensor {
        Tensor::F32(_) => Tensor::F32(Cow::Owned(vec![0.0; width])),
        Tensor::F16(_) => Tensor::F16(Cow::Owned(vec![f16::ZERO; width])),
        Tensor::Bf16(_) => Tensor::Bf16(Cow::Owned(vec![bf16::ZERO; width])),
    };
    Tensor::concat(vec![tensor, zeros])
}

/// The output projection: `decoder/projection` (or the target embedding it aliases), with the
/// never-produced start row when the model starts from a zero embedding.
fn generator(b: &mut Builder<'_, '_, '_>, spec: &Spec) -> Result<Linear<'static>, Ct2Error> {
    let (d, rows) = (spec.d, spec.tgt_rows);
    if !spec.tie_output && !spec.zero_start {
        return b.linear("decoder/projection", rows, d);
    }
    let weight_name = if spec.tie_output {
        b.vars.get("decoder/projection/weight");
        "decoder/embeddings/weight"
    } else {
        "decoder/projection/weight"
    };
    let bias_name = "decoder/projection/bias";
    let mut bias = if b.vars.has(bias_name) {
        Some(b.vars.tensor(bias_name, &[rows])?)
    } else {
        None
    };
    let start = usize::from(spec.zero_start);
    if spec.zero_start {
        let mut values = bias.take().unwrap_or_else(|| vec![0.0; rows]);
        values.push(START_LOGIT);
        bias = Some(values);
    }
    // An int8 projection stays int8; the start row is one of int8 zeros.
    if let Some(layer) = b.stored_int8_padded(weight_name, rows, d, start, bias.as_deref())? {
        return Ok(layer);
    }
    let mut weight = b.vars.stored(weight_name, &[rows, d])?;
    if spec.zero_start {
        weight = with_zero_row(weight, d);
    }
    let out = rows + start;
    let storage = b.weights.unwrap_or(weight.weight_type());
    Ok(linear_rows(
        weight_name,
        &weight,
        0..out,
        d,
        bias.as_deref(),
        storage,
    )?)
}

/// The blocks of `stack` (`layers` of them), with cross-attention in the decoder.
fn blocks(
    b: &mut Builder<'_, '_, '_>,
    spec: &Spec,
    config: &Config,
    stack: &str,
    layers: usize,
) -> Result<Vec<Block<'static>>, Ct2Error> {
    b.each_layer(layers, |b, i| {
        let f = format!("{stack}/layer_{i}");
        let noact = format!("{f}/ffn/linear_0_noact/weight");
        if b.vars.has(&noact) != spec.gated_ffn {
            return Err(Ct2Error::UnsupportedFeature {
                feature: "gated and plain feed-forward layers in one model".to_owned(),
                variable: noact,
            });
        }
        let decoder = stack == "decoder";
        let d_ff = if decoder {
            spec.decoder_d_ff
        } else {
            spec.d_ff
        };
        b.block(&f, decoder, (d_ff, spec.activation), config.norm)
    })
}

/// The embedding of `stack` over `table`: scaled, plus positions (none with relative
/// attention), then the embedding norm when the file has one.
fn embedding(
    b: &mut Builder<'_, '_, '_>,
    spec: &Spec,
    stack: &str,
    table: Arc<AlignedBuf>,
    max_len: usize,
) -> Result<Embedding<'static>, Ct2Error> {
    let mut embedding = Embedding::new(table, spec.d, spec.embedding_scale);
    if spec.relative.is_none() {
        embedding = embedding.with_positions(b.positions(stack, max_len)?, 0);
    }
    if spec.embedding_norm {
        embedding = embedding.with_norm(b.norm(&format!("{stack}/layernorm_embedding"))?);
    }
    Ok(embedding)
}

/// The tessel configuration of `spec` with the tokens of `config.json`.
fn config(
    vars: &Vars<'_, '_>,
    spec: &Spec,
    tokens: &Ct2Tokens,
    target_vocabulary: &Vocabulary,
    options: Ct2Options,
) -> Result<Config, Ct2Error> {
    let ids = special_ids(spec, tokens, target_vocabulary)?;
    let default_eps = match spec.norm_kind {
        NormKind::Layer => LAYER_NORM_EPS,
        NormKind::Rms => RMS_NORM_EPS,
    };
    let d_head = (spec.attention_width != spec.d).then(|| spec.attention_width / spec.heads.max(1));
    let eps = tokens.layer_norm_epsilon.unwrap_or(default_eps);
    let config = Config::builder(sizes(vars, spec, options), ids)
        .head_width(d_head)
        .decoder_widths(spec.heads, spec.decoder_d_ff)
        .norms(NormPlacement::pre_if(spec.pre_norm), spec.final_norm)
        .norm_kind(spec.norm_kind, eps)
        .feed_forward(spec.activation, spec.gated_ffn)
        .positions(Positions::Learned, 0)
        .share_embeddings(spec.share_embeddings)
        .scale_embeddings(spec.embedding_scale != 1.0)
        .embedding_norm(spec.embedding_norm)
        .tie_output(spec.tie_output)
        .biases(spec.biases)
        .attention_scale(spec.queries_scale)
        .relative_attention(spec.relative)
        .build()
        .map_err(LoadError::from)?;
    Ok(config)
}

/// The sizes of `spec`, its lengths the options' capped by stored position tables.
fn sizes(vars: &Vars<'_, '_>, spec: &Spec, options: Ct2Options) -> Sizes {
    let cap = |stack: &str, limit: usize| {
        let stored = vars.rows(&format!("{stack}/position_encodings/encodings"));
        match (spec.relative, stored) {
            (None, Some(rows)) => rows.min(limit),
            _ => limit,
        }
    };
    let tgt_vocab = spec.tgt_rows + usize::from(spec.zero_start);
    Sizes {
        d_model: spec.d,
        heads: spec.heads,
        encoder_layers: spec.encoder_layers,
        decoder_layers: spec.decoder_layers,
        d_ff: spec.d_ff,
        src_vocab: if spec.share_embeddings {
            tgt_vocab
        } else {
            spec.src_rows
        },
        tgt_vocab,
        max_src_len: cap("encoder", options.max_src_len),
        max_tgt_len: cap("decoder", options.max_tgt_len),
        max_beam: options.max_beam,
    }
}

/// The start (the zero start row, or `config.json`'s start token), end and padding ids.
fn special_ids(
    spec: &Spec,
    tokens: &Ct2Tokens,
    target_vocabulary: &Vocabulary,
) -> Result<SpecialIds, Ct2Error> {
    let token_id = |t: &str| {
        target_vocabulary
            .id(t)
            .ok_or_else(|| Ct2Error::MissingToken(t.to_owned()))
    };
    let bos = if spec.zero_start {
        spec.tgt_rows as u32
    } else {
        token_id(&tokens.decoder_start_token)?
    };
    Ok(SpecialIds {
        bos,
        eos: token_id(&tokens.eos_token)?,
        pad: target_vocabulary.id("<blank>").unwrap_or(0),
    })
}

/// Refuses vocabularies whose sizes are not the embeddings' rows.
fn check_vocabularies(
    spec: &Spec,
    source_vocabulary: &Vocabulary,
    target_vocabulary: &Vocabulary,
) -> Result<(), Ct2Error> {
    for (vocab, rows, which) in [
        (source_vocabulary, spec.src_rows, "source"),
        (target_vocabulary, spec.tgt_rows, "target"),
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
    Ok(())
}

/// The source and target embeddings over their tables (one when shared; the target's with
/// the zero start row when the model starts from one).
fn embeddings(
    b: &mut Builder<'_, '_, '_>,
    spec: &Spec,
    config: &Config,
) -> Result<(Embedding<'static>, Embedding<'static>), Ct2Error> {
    let extra = usize::from(spec.zero_start);
    let target_table = Arc::new(table_with_zero_rows(
        b,
        "decoder/embeddings/weight",
        spec.tgt_rows,
        extra,
    )?);
    let src_weight = format!("{}/weight", spec.source_embedding);
    let source_table = if spec.share_embeddings {
        b.vars.get(&src_weight);
        Arc::clone(&target_table)
    } else {
        Arc::new(table_with_zero_rows(b, &src_weight, spec.src_rows, 0)?)
    };
    let source = embedding(b, spec, "encoder", source_table, config.max_src_len)?;
    let target = embedding(b, spec, "decoder", target_table, config.max_tgt_len)?;
    Ok((source, target))
}

/// The encoder and decoder stacks: blocks, final norms (the decoder's times its output
/// scale) and relative position biases.
fn stacks(
    b: &mut Builder<'_, '_, '_>,
    spec: &Spec,
    config: &Config,
) -> Result<(Stack<'static>, Stack<'static>), Ct2Error> {
    let encoder_blocks = blocks(b, spec, config, "encoder", spec.encoder_layers)?;
    let decoder_blocks = blocks(b, spec, config, "decoder", spec.decoder_layers)?;
    let (encoder_norm, decoder_norm) = if spec.final_norm {
        let scale = spec.scale_outputs.unwrap_or(1.0);
        (
            Some(b.norm("encoder/layer_norm")?),
            Some(b.norm_scaled("decoder/layer_norm", scale)?),
        )
    } else {
        (None, None)
    };
    let mut encoder = Stack::new(encoder_blocks, encoder_norm);
    let mut decoder = Stack::new(decoder_blocks, decoder_norm);
    if let Some(bias) = b.relative_bias("encoder", spec.encoder_layers, true)? {
        encoder = encoder.with_position_bias(bias);
    }
    if let Some(bias) = b.relative_bias("decoder", spec.decoder_layers, false)? {
        decoder = decoder.with_position_bias(bias);
    }
    Ok((encoder, decoder))
}

/// Builds the tessel model of a `TransformerSpec` file.
pub fn build(
    file: &ModelBin<'_>,
    tokens: &Ct2Tokens,
    source_vocabulary: &Vocabulary,
    target_vocabulary: &Vocabulary,
    options: Ct2Options,
) -> Result<Model<'static>, Ct2Error> {
    let mut vars = Vars::new(file);
    let spec = Spec::read(&mut vars)?;
    check_vocabularies(&spec, source_vocabulary, target_vocabulary)?;
    let config = config(&vars, &spec, tokens, target_vocabulary, options)?;
    let mut b = Builder::new(
        &mut vars,
        &config,
        tokens.layer_norm_epsilon,
        options.weights,
    );
    let (source, target) = embeddings(&mut b, &spec, &config)?;
    let (encoder, decoder) = stacks(&mut b, &spec, &config)?;
    let generator = generator(&mut b, &spec)?;
    vars.check_all_used("Transformer")?;
    Ok(Model::from_parts(
        config,
        Source::Tokens(source),
        target,
        (encoder, decoder),
        generator,
    ))
}
