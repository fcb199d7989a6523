//! LED (Longformer Encoder-Decoder, `allenai/led-base-16384` and its fine-tunes) from a Hugging
//! Face directory: BART whose encoder self-attention is Longformer's.
//!
//! What differs from BART (`super::bart`):
//! - names under `led.` instead of `model.`;
//! - learned positions from row 0 (no offset), `max_encoder_position_embeddings` rows for the
//!   encoder (16,384 in the published checkpoints) and `max_decoder_position_embeddings` for the
//!   decoder;
//! - each encoder layer `i` attends within `attention_window[i] / 2` positions
//!   (`self_attn.longformer_self_attn.{query,key,value}`), and its global tokens through
//!   `query_global`, `key_global`, `value_global` ([`crate::layers::LocalAttention`]); the
//!   output projection is `self_attn.output`.
//!
//! Post-LN, `layernorm_embedding` on both stacks, `final_logits_bias`, no embedding scale, one
//! token table tied as `tie_word_embeddings` says.

use std::path::Path;

use serde::Deserialize;

use super::blocks::{self, StackSizes};
use super::tables::{self, TableNames, Tables};
use super::{activation, bart, config_error, read_config};
use crate::config::{Config, NormPlacement, Positions, SpecialIds, StackKind};
use crate::layers::{Block, GlobalProjections, LocalAttention, SelfAttention};
use crate::load::source::TensorSource;
use crate::load::{malformed, LoadError, LoadOptions, Loader};
use crate::model::{Model, Source, Stack};

/// The fields of LED's `config.json` besides its [`StackSizes`].
#[derive(Clone, Debug, Deserialize)]
struct HfConfig {
    vocab_size: usize,
    max_encoder_position_embeddings: usize,
    max_decoder_position_embeddings: usize,
    activation_function: String,
    attention_window: Windows,
    #[serde(default = "yes")]
    tie_word_embeddings: bool,
    decoder_start_token_id: u32,
    eos_token_id: u32,
    pad_token_id: u32,
}

/// `attention_window`: one width for every encoder layer, or one per layer.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum Windows {
    All(usize),
    PerLayer(Vec<usize>),
}

fn yes() -> bool {
    true
}

/// The tessel config of an LED `config.json` and each encoder layer's radius (half its
/// window), planned for beams up to `max_beam`.
pub fn config_from_hf(text: &str, max_beam: usize) -> Result<(Config, Vec<usize>), LoadError> {
    let stacks = StackSizes::from_config(text)?;
    let hf: HfConfig = serde_json::from_str(text).map_err(config_error)?;
    let radii = radii(&hf.attention_window, stacks.encoder_layers)?;
    let vocab = hf.vocab_size;
    let lengths = (
        hf.max_encoder_position_embeddings,
        hf.max_decoder_position_embeddings,
    );
    let ids = SpecialIds {
        bos: hf.decoder_start_token_id,
        eos: hf.eos_token_id,
        pad: hf.pad_token_id,
    };
    let (decoder_heads, decoder_d_ff) = stacks.decoder_widths();
    let config = Config::builder(stacks.sizes((vocab, vocab), lengths, max_beam), ids)
        .decoder_widths(decoder_heads, decoder_d_ff)
        .norms(NormPlacement::Post, false)
        .feed_forward(activation(&hf.activation_function)?, false)
        .positions(Positions::Learned, 0)
        .scale_embeddings(false)
        .embedding_norm(true)
        .tie_output(hf.tie_word_embeddings)
        .build()?;
    Ok((config, radii))
}

/// Each encoder layer's one-sided window: half its `attention_window`, which Longformer needs
/// even and positive.
fn radii(windows: &Windows, layers: usize) -> Result<Vec<usize>, LoadError> {
    let windows = match windows {
        Windows::All(w) => vec![*w; layers],
        Windows::PerLayer(w) => w.clone(),
    };
    if windows.len() != layers {
        return Err(config_error(format_args!(
            "attention_window has {} entries for {layers} encoder layers",
            windows.len()
        )));
    }
    windows
        .iter()
        .map(|&w| {
            if w == 0 || w % 2 != 0 {
                Err(config_error(format_args!(
                    "attention_window {w} is not even and positive"
                )))
            } else {
                Ok(w / 2)
            }
        })
        .collect()
}

/// Loads a Hugging Face LED directory.
pub fn load_hf_dir(
    dir: &Path,
    max_beam: usize,
    options: &LoadOptions,
) -> Result<Model<'static>, LoadError> {
    let (mut config, radii) = config_from_hf(&read_config(dir)?, max_beam)?;
    let names = TableNames {
        shared: Some("led.shared.weight"),
        encoder: "led.encoder.embed_tokens.weight",
        decoder: "led.decoder.embed_tokens.weight",
        lm_head: "lm_head.weight",
    };
    let tie = config.tie_output;
    tables::load_file(dir, (names, tie), &mut config, |config, tables, source| {
        build(config, tables, &radii, source, options)
    })
}

/// The LED model of `config` from `source`, encoder layer `i` attending within `radii[i]`.
fn build(
    config: &Config,
    tables: &Tables,
    radii: &[usize],
    source: &mut dyn TensorSource,
    options: &LoadOptions,
) -> Result<Model<'static>, LoadError> {
    let mut l = Loader::new(source, config, options);
    let token_tables = l.token_tables(tables.target, tables.source, tables.shared)?;
    let (src_rows, tgt_rows) = (config.max_src_len, config.max_tgt_len);
    let positions = l.table("led.encoder.embed_positions.weight", src_rows)?.0;
    let source_embedding = bart::embedding(&mut l, "led.encoder", &token_tables.source, positions)?;
    let encoder = encoder_blocks(&mut l, radii)?;
    let positions = l.table("led.decoder.embed_positions.weight", tgt_rows)?.0;
    let target = bart::embedding(&mut l, "led.decoder", &token_tables.target, positions)?;
    let decoder = blocks::blocks(&mut l, "led.decoder", true, true)?;
    let generator = bart::generator(&mut l, tables, &token_tables)?;
    Ok(Model::from_parts(
        config.clone(),
        Source::Tokens(source_embedding),
        target,
        (Stack::new(encoder, None), Stack::new(decoder, None)),
        generator,
    ))
}

/// The encoder's blocks, layer `i` attending within `radii[i]`.
fn encoder_blocks(l: &mut Loader<'_>, radii: &[usize]) -> Result<Vec<Block<'static>>, LoadError> {
    radii
        .iter()
        .enumerate()
        .map(|(i, &radius)| {
            let p = format!("led.encoder.layers.{i}");
            let attention = longformer_attention(l, &format!("{p}.self_attn"), radius)?;
            blocks::layer_with(l, &p, attention, (false, true))
        })
        .collect()
}

/// Longformer's self-attention `p`: Q/K/V fused, the output projection, and the global
/// projections.
fn longformer_attention(
    l: &mut Loader<'_>,
    p: &str,
    radius: usize,
) -> Result<SelfAttention<'static>, LoadError> {
    let encoder = StackKind::Encoder;
    let (d, a) = (l.config.d_model, l.config.attention_width(encoder));
    let name = |part: &str| format!("{p}.longformer_self_attn.{part}");
    let qkv = l.fused(
        &[&name("query"), &name("key"), &name("value")],
        &[true; 3],
        a,
        d,
    )?;
    let query = l.linear(&name("query_global"), a, d, true)?;
    let kv = l.fused(
        &[&name("key_global"), &name("value_global")],
        &[true; 2],
        a,
        d,
    )?;
    let out = l.linear(&format!("{p}.output"), d, a, true)?;
    let global = GlobalProjections::new(query, kv);
    SelfAttention::new(qkv, out, l.heads(encoder))
        .and_then(|attention| attention.with_local(LocalAttention::new(radius, Some(global))))
        .map_err(malformed(p))
}
