//! The BART-derived translation models from a Hugging Face directory (`config.json` +
//! `model.safetensors`): Marian (OPUS-MT), BART, mBART and M2M100/NLLB. They share the block
//! layout of `blocks` and one token table (`model.shared.weight`, tied to the output
//! projection) and differ in the parts this module maps:
//!
//! | `model_type` | norms | positions | embedding norm | output bias |
//! |---|---|---|---|---|
//! | `marian` | post-LN | sinusoids, `[sin | cos]` halves from position 0, computed | – | `final_logits_bias` |
//! | `bart` | post-LN | learned, rows from 2 | `layernorm_embedding` | `final_logits_bias` |
//! | `mbart` | pre-LN, final `layer_norm` | learned, rows from 2 | `layernorm_embedding` | `final_logits_bias` |
//! | `m2m_100` | pre-LN, final `layer_norm` | fairseq sinusoids (halves), rows from 2, computed | – | – |
//! | `pegasus` | pre-LN, final `layer_norm` | sinusoids as Marian's, stored (computed where absent) | – | `final_logits_bias` |
//!
//! Embeddings are multiplied by `√d_model` when `scale_embedding` is set.
//!
//! The token tables and the output projection are read as `transformers` 5 reads them (see
//! [`super::tables`]): `model.shared.weight`, the stacks' own `embed_tokens` (Marian with
//! `share_encoder_decoder_embeddings: false` has tables of `vocab_size` and
//! `decoder_vocab_size` rows) and `lm_head.weight`, tied as `tie_word_embeddings` says.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::blocks::{self, StackSizes};
use super::tables::{self, TableNames, Tables};
use super::{activation, config_error, read_config};
use crate::aligned::AlignedBuf;
use crate::config::{Biases, Config, NormPlacement, Positions, SpecialIds};
use crate::layers::{Embedding, Linear};
use crate::load::loader::linear_rows;
use crate::load::source::TensorSource;
use crate::load::{linear_error, out_of_memory, LoadError, LoadOptions, Loader, TokenTables};
use crate::model::{Model, Source, Stack};

/// Which of the BART-derived families a directory holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Marian / OPUS-MT.
    Marian,
    /// BART.
    Bart,
    /// mBART (mBART-25, mBART-50).
    MBart,
    /// M2M100 and NLLB.
    M2m100,
    /// Pegasus.
    Pegasus,
}

/// The fields of a BART-family `config.json` that shape the graph, besides its
/// [`StackSizes`].
#[derive(Clone, Debug, Deserialize)]
struct HfConfig {
    model_type: String,
    vocab_size: usize,
    /// Marian with separate vocabularies: the target side's size.
    #[serde(default)]
    decoder_vocab_size: Option<usize>,
    #[serde(default = "yes")]
    share_encoder_decoder_embeddings: bool,
    #[serde(default = "yes")]
    tie_word_embeddings: bool,
    max_position_embeddings: usize,
    activation_function: String,
    #[serde(default)]
    scale_embedding: bool,
    decoder_start_token_id: u32,
    eos_token_id: u32,
    pad_token_id: u32,
}

fn yes() -> bool {
    true
}

/// The family and tessel config of a Hugging Face `config.json`, planned for beams up to
/// `max_beam`.
pub fn config_from_hf(text: &str, max_beam: usize) -> Result<(Family, Config), LoadError> {
    let stacks = StackSizes::from_config(text)?;
    let hf: HfConfig = serde_json::from_str(text).map_err(config_error)?;
    let family = family(&hf.model_type)?;
    // Separate vocabularies are Marian's option; the other families always share one table.
    let shared = hf.share_encoder_decoder_embeddings || family != Family::Marian;
    let tgt_vocab = match hf.decoder_vocab_size {
        Some(v) if !shared => v,
        _ => hf.vocab_size,
    };
    let activation = activation(&hf.activation_function)?;
    let positions = hf.max_position_embeddings;
    let sizes = stacks.sizes((hf.vocab_size, tgt_vocab), (positions, positions), max_beam);
    let ids = SpecialIds {
        bos: hf.decoder_start_token_id,
        eos: hf.eos_token_id,
        pad: hf.pad_token_id,
    };
    let pre = matches!(family, Family::MBart | Family::M2m100 | Family::Pegasus);
    let (decoder_heads, decoder_d_ff) = stacks.decoder_widths();
    let config = Config::builder(sizes, ids)
        .decoder_widths(decoder_heads, decoder_d_ff)
        .norms(NormPlacement::pre_if(pre), pre)
        .feed_forward(activation, false)
        .positions(
            Positions::Learned,
            if matches!(family, Family::Marian | Family::Pegasus) {
                0
            } else {
                2
            },
        )
        // Whether one table serves both stacks is known once the file is read.
        .share_embeddings(shared)
        .scale_embeddings(hf.scale_embedding)
        .embedding_norm(matches!(family, Family::Bart | Family::MBart))
        .tie_output(hf.tie_word_embeddings)
        .biases(Biases {
            generator: family != Family::M2m100,
            ..Biases::default()
        })
        .build()?;
    Ok((family, config))
}

/// The family of a `model_type`.
fn family(model_type: &str) -> Result<Family, LoadError> {
    match model_type {
        "marian" => Ok(Family::Marian),
        "bart" => Ok(Family::Bart),
        "mbart" => Ok(Family::MBart),
        "m2m_100" => Ok(Family::M2m100),
        "pegasus" => Ok(Family::Pegasus),
        other => Err(config_error(format_args!(
            "model_type `{other}` is not a BART-family model"
        ))),
    }
}

/// Loads a Hugging Face Marian, BART, mBART, M2M100/NLLB or Pegasus directory.
pub fn load_hf_dir(
    dir: &Path,
    max_beam: usize,
    options: &LoadOptions,
) -> Result<(Family, Model<'static>), LoadError> {
    let (family, mut config) = config_from_hf(&read_config(dir)?, max_beam)?;
    let names = TableNames {
        shared: config.share_embeddings.then_some("model.shared.weight"),
        encoder: "model.encoder.embed_tokens.weight",
        decoder: "model.decoder.embed_tokens.weight",
        lm_head: "lm_head.weight",
    };
    let tie = config.tie_output;
    let model = tables::load_file(dir, (names, tie), &mut config, |config, tables, source| {
        build(family, config, tables, source, options)
    })?;
    Ok((family, model))
}

/// Marian's sinusoids: column `i < d/2` is `sin(p / 10000^(2i/d))`, column `d/2 + i` the
/// cosine, for positions `0..rows` (computed in `f64`, as numpy does for Hugging Face).
pub fn marian_positions(rows: usize, d: usize) -> Vec<f32> {
    let half = d.div_ceil(2);
    let mut table = vec![0.0f32; rows * d];
    for (p, row) in table.chunks_exact_mut(d).enumerate() {
        for j in 0..d {
            let angle = p as f64 / 10000f64.powf((2 * (j / 2)) as f64 / d as f64);
            if j % 2 == 0 {
                row[j / 2] = angle.sin() as f32;
            } else {
                row[half + j / 2] = angle.cos() as f32;
            }
        }
    }
    table
}

/// fairseq's sinusoids (M2M100, NLLB): `[sin | cos]` halves with frequencies
/// `exp(-i · ln(10000) / (d/2 - 1))`, row `r` for position `r` (rows 0 and 1 are never used:
/// positions start at 2), a zero column when `d` is odd.
fn fairseq_positions(rows: usize, d: usize) -> Vec<f32> {
    let half = d / 2;
    let step = 10000f64.ln() / (half.saturating_sub(1).max(1)) as f64;
    let mut table = vec![0.0f32; rows * d];
    for (p, row) in table.chunks_exact_mut(d).enumerate() {
        for i in 0..half {
            let angle = p as f64 * (-(i as f64) * step).exp();
            row[i] = angle.sin() as f32;
            row[half + i] = angle.cos() as f32;
        }
    }
    table
}

/// The position table of one stack, `offset + max_len` rows.
fn positions(l: &mut Loader<'_>, family: Family, stack: &str) -> Result<AlignedBuf, LoadError> {
    let (d, rows) = (
        l.config.d_model,
        l.config.position_offset + l.config.max_src_len,
    );
    let name = format!("{stack}.embed_positions.weight");
    let values = match family {
        Family::Marian => marian_positions(rows, d),
        Family::M2m100 => fairseq_positions(rows, d),
        Family::Bart | Family::MBart => return Ok(l.table(&name, rows)?.0),
        // Pegasus files written by `transformers` 5 store the sinusoids; older ones leave
        // them out, and `transformers` computes them as Marian's.
        Family::Pegasus => match l.table(&name, rows) {
            Err(LoadError::Missing { .. }) => marian_positions(rows, d),
            stored => return Ok(stored?.0),
        },
    };
    AlignedBuf::from_slice(&values).map_err(out_of_memory(stack))
}

/// The embedding of `stack`: the token `table` (scaled by `√d_model` when the config says so),
/// the `positions` table (from the config's offset on) and `{stack}.layernorm_embedding` where
/// the config has one.
pub(super) fn embedding(
    l: &mut Loader<'_>,
    stack: &str,
    table: &Arc<AlignedBuf>,
    positions: AlignedBuf,
) -> Result<Embedding<'static>, LoadError> {
    let c = l.config;
    let scale = if c.scale_embeddings {
        (c.d_model as f32).sqrt()
    } else {
        1.0
    };
    let offset = c.position_offset;
    let mut embedding =
        Embedding::new(Arc::clone(table), c.d_model, scale).with_positions(positions, offset);
    if c.embedding_norm {
        embedding = embedding.with_norm(l.norm(&format!("{stack}.layernorm_embedding"))?);
    }
    Ok(embedding)
}

fn build(
    family: Family,
    config: &Config,
    tables: &Tables,
    source: &mut dyn TensorSource,
    options: &LoadOptions,
) -> Result<Model<'static>, LoadError> {
    let mut l = Loader::new(source, config, options);
    let token_tables = l.token_tables(tables.target, tables.source, tables.shared)?;
    let table = positions(&mut l, family, "model.encoder")?;
    let source_embedding = embedding(&mut l, "model.encoder", &token_tables.source, table)?;
    let encoder = blocks::blocks(&mut l, "model.encoder", true, false)?;
    let table = positions(&mut l, family, "model.decoder")?;
    let target = embedding(&mut l, "model.decoder", &token_tables.target, table)?;
    let decoder = blocks::blocks(&mut l, "model.decoder", true, true)?;
    let (encoder_norm, decoder_norm) =
        l.final_norms("model.encoder.layer_norm", "model.decoder.layer_norm")?;
    let generator = generator(&mut l, tables, &token_tables)?;
    Ok(Model::from_parts(
        config.clone(),
        Source::Tokens(source_embedding),
        target,
        (
            Stack::new(encoder, encoder_norm),
            Stack::new(decoder, decoder_norm),
        ),
        generator,
    ))
}

/// The output projection: the target table (tied) or `lm_head`, with `final_logits_bias`
/// where the family has one.
pub(super) fn generator(
    l: &mut Loader<'_>,
    tables: &Tables,
    token_tables: &TokenTables,
) -> Result<Linear<'static>, LoadError> {
    let (d, vocab) = (l.config.d_model, l.config.tgt_vocab);
    let bias = if l.config.biases.generator {
        Some(l.tensor("final_logits_bias", &[1, vocab])?.into_owned())
    } else {
        None
    };
    let wanted = l.options.weights;
    if tables.tied {
        let storage = wanted.unwrap_or(token_tables.target_type);
        let table = token_tables.target.as_slice();
        return Linear::packed(storage, vocab, d, table, bias.as_deref())
            .map_err(linear_error(tables.target));
    }
    let tensor = l.stored(tables.output, &[vocab, d])?;
    let storage = wanted.unwrap_or(tensor.weight_type());
    linear_rows(
        tables.output,
        &tensor,
        0..vocab,
        d,
        bias.as_deref(),
        storage,
    )
}
