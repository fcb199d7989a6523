//! tessel's own tensor names (`config.json` + `model.safetensors`, or seeded weights): the
//! embeddings, the encoder and decoder blocks and the output projection, read through the
//! [`Loader`] into a [`Model`].

use std::sync::Arc;

use crate::aligned::AlignedBuf;
use crate::config::{Config, Positions, StackKind};
use crate::layers::{Block, Embedding, Linear};
use crate::load::source::TensorSource;
use crate::load::{
    block, linear_error, out_of_memory, LoadError, LoadOptions, Loader, TokenTables,
};
use crate::model::{Model, Source, Stack};

/// The model `config` describes, its tensors read from `source` by tessel's names.
pub(super) fn model(
    config: Config,
    source: &mut dyn TensorSource,
    options: &LoadOptions,
) -> Result<Model<'static>, LoadError> {
    let mut loader = Loader::new(source, &config, options);
    let (source, target, tables) = embeddings(&mut loader)?;
    let encoder = (0..config.encoder_layers)
        .map(|i| encoder_block(&mut loader, i))
        .collect::<Result<Vec<_>, _>>()?;
    let decoder = (0..config.decoder_layers)
        .map(|i| decoder_block(&mut loader, i))
        .collect::<Result<Vec<_>, _>>()?;
    let (encoder_norm, decoder_norm) = loader.final_norms("encoder.norm", "decoder.norm")?;
    let generator = generator(&mut loader, tables)?;
    Ok(Model::from_parts(
        config,
        Source::Tokens(source),
        target,
        (
            Stack::new(encoder, encoder_norm),
            Stack::new(decoder, decoder_norm),
        ),
        generator,
    ))
}

/// The source and target embeddings with their positions (the source table is the target's
/// when the config shares them), and the token tables.
fn embeddings(
    loader: &mut Loader<'_>,
) -> Result<(Embedding<'static>, Embedding<'static>, TokenTables), LoadError> {
    let config = loader.config;
    let d = config.d_model;
    let tables = loader.token_tables(
        "tgt_embed.weight",
        "src_embed.weight",
        config.share_embeddings,
    )?;
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
    let source = Embedding::new(Arc::clone(&tables.source), d, scale).with_positions(src_pos, 0);
    let target = Embedding::new(Arc::clone(&tables.target), d, scale).with_positions(tgt_pos, 0);
    Ok((source, target, tables))
}

/// Encoder block `i`: self-attention and feed-forward.
fn encoder_block(loader: &mut Loader<'_>, i: usize) -> Result<Block<'static>, LoadError> {
    let p = format!("encoder.layers.{i}");
    let attention = loader.self_attention(&format!("{p}.self_attn"), StackKind::Encoder)?;
    let norm1 = loader.norm(&format!("{p}.norm1"))?;
    let ffn = loader.feed_forward(&p, StackKind::Encoder)?;
    let norm2 = loader.norm(&format!("{p}.norm2"))?;
    let placement = loader.config.norm;
    block(&p, placement, (norm1, attention), None, (norm2, ffn))
}

/// Decoder block `i`: self-attention, cross-attention and feed-forward.
fn decoder_block(loader: &mut Loader<'_>, i: usize) -> Result<Block<'static>, LoadError> {
    let p = format!("decoder.layers.{i}");
    let attention = loader.self_attention(&format!("{p}.self_attn"), StackKind::Decoder)?;
    let cross = loader.cross_attention(&format!("{p}.multihead_attn"))?;
    let norm1 = loader.norm(&format!("{p}.norm1"))?;
    let norm2 = loader.norm(&format!("{p}.norm2"))?;
    let ffn = loader.feed_forward(&p, StackKind::Decoder)?;
    let norm3 = loader.norm(&format!("{p}.norm3"))?;
    let placement = loader.config.norm;
    block(
        &p,
        placement,
        (norm1, attention),
        Some((norm2, cross)),
        (norm3, ffn),
    )
}

/// The output projection: the target table packed (tied, in the load options' type or the
/// table's own), or its own `generator.weight`.
fn generator(loader: &mut Loader<'_>, tables: TokenTables) -> Result<Linear<'static>, LoadError> {
    let config = loader.config;
    let (d, vocab) = (config.d_model, config.tgt_vocab);
    if !config.tie_output {
        let [generator] = loader.linears(
            "generator.weight",
            "generator.bias",
            [vocab],
            d,
            config.biases.generator,
        )?;
        return Ok(generator);
    }
    let bias = if config.biases.generator {
        Some(loader.vector("generator.bias", vocab)?)
    } else {
        None
    };
    let storage = loader.options.weights.unwrap_or(tables.target_type);
    Linear::packed(storage, vocab, d, tables.target.as_slice(), bias.as_deref())
        .map_err(linear_error("tgt_embed.weight"))
}

/// The sinusoidal position table of "Attention Is All You Need", computed in `f64` and
/// allocated fallibly: its size comes from config.json alone.
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
