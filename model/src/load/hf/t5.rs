//! T5, mT5 and Flan-T5 from a Hugging Face directory (`config.json` + `model.safetensors`).
//!
//! Pre-norm blocks with RMSNorm (no mean, no shift), no biases anywhere, no attention score
//! scaling, no absolute positions: a [`RelativeBias`] per stack (from block 0's
//! `relative_attention_bias`, bidirectional in the encoder, causal in the decoder) is added to
//! every self-attention. The feed-forward is `wo(relu(wi(x)))` or, gated (v1.1, mT5, Flan),
//! `wo(gelu_tanh(wi_0(x)) ⊙ wi_1(x))`. The output projection is `lm_head.weight`, or the
//! shared embedding (tied), with the decoder output scaled by `d_model^-0.5` when the config
//! says so (folded into the packed weights).
//!
//! | Hugging Face tensor | tessel layer |
//! |---|---|
//! | `shared.weight` | both embeddings, the tied generator |
//! | `{encoder,decoder}.block.{i}.layer.0.SelfAttention.{q,k,v,o}` | fused Q/K/V and output projection |
//! | `{encoder,decoder}.block.0.layer.0.SelfAttention.relative_attention_bias` | the stack's [`RelativeBias`] |
//! | `decoder.block.{i}.layer.1.EncDecAttention.{q,k,v,o}` | cross-attention |
//! | `*.block.{i}.layer.{last}.DenseReluDense.{wi | wi_0, wi_1, wo}` | the feed-forward |
//! | `*.block.{i}.layer.{j}.layer_norm`, `{encoder,decoder}.final_layer_norm` | RMSNorms |

use std::path::Path;

use serde::Deserialize;

use super::sublayers::{self, AttentionNames, FeedForwardNames};
use super::tables::{self, TableNames, Tables};
use super::{config_error, read_config};
use crate::config::{
    Biases, Config, FfnActivation, NormKind, NormPlacement, Positions, RelativeAttention, Sizes,
    SpecialIds, StackKind,
};
use crate::layers::{
    Block, Embedding, Linear, LocalAttention, RelativeBias,
    SelfAttention, TransientGlobal,
};
use crate::load::source::TensorSource;
use crate::load::{block, linear_error, malformed, LoadError, LoadOptions, Loader};
use crate::model::{Model, Source, Stack};

#[derive(Clone, Debug, Deserialize)]
struct HfConfig {
    #[serde(default)]
    model_type: String,
    #[serde(default = "t5_defaults::d_model")]
    d_model: usize,
    #[serde(default = "t5_defaults::d_kv")]
    d_kv: usize,
    #[serde(default = "t5_defaults::d_ff")]
    d_ff: usize,
    #[serde(default = "t5_defaults::num_heads")]
    num_heads: usize,
    #[serde(default = "t5_defaults::num_layers")]
    num_layers: usize,
    #[serde(default)]
    num_decoder_layers: Option<usize>,
    #[serde(default = "t5_defaults::vocab_size")]
    vocab_size: usize,
    #[serde(default = "t5_defaults::buckets")]
    relative_attention_num_buckets: usize,
    #[serde(default = "max_distance")]
    relative_attention_max_distance: usize,
    #[serde(default = "t5_defaults::feed_forward_proj")]
    feed_forward_proj: String,
    #[serde(default = "epsilon")]
    layer_norm_epsilon: f32,
    #[serde(default = "yes")]
    tie_word_embeddings: bool,
    #[serde(default)]
    scale_decoder_outputs: Option<bool>,
    #[serde(default)]
    decoder_start_token_id: u32,
    #[serde(default = "one")]
    eos_token_id: u32,
    #[serde(default)]
    pad_token_id: u32,
}

fn max_distance() -> usize {
    128
}

/// `transformers`' `T5Config` defaults (t5-small's values): a published `config.json` leaves
/// out what equals them (t5-small's has no `feed_forward_proj`).
mod t5_defaults {
    pub fn d_model() -> usize {
        512
    }
    pub fn d_kv() -> usize {
        64
    }
    pub fn d_ff() -> usize {
        2048
    }
    pub fn num_heads() -> usize {
        8
    }
    pub fn num_layers() -> usize {
        6
    }
    pub fn vocab_size() -> usize {
        32128
    }
    pub fn buckets() -> usize {
        32
    }
    pub fn feed_forward_proj() -> String {
        "relu".into()
    }
}

/// Whether the feed-forward is gated and its activation, for a `feed_forward_proj` of
/// `[gated-]act` as `T5Config` reads it: `act` is a `transformers` activation name (`gelu` the
/// exact one, `gelu_new` the tanh approximation), and `gated-gelu` means `gelu_new`.
fn ffn_activation(proj: &str) -> Option<(bool, FfnActivation)> {
    let (gated, act) = match proj.strip_prefix("gated-") {
        Some("gelu") => (true, "gelu_new"),
        Some(act) => (true, act),
        None => (false, proj),
    };
    let activation = match act {
        "relu" => FfnActivation::Relu,
        "gelu" => FfnActivation::Gelu,
        "gelu_new" | "gelu_pytorch_tanh" => FfnActivation::GeluTanh,
        "silu" | "swish" => FfnActivation::Silu,
        _ => return None,
    };
    Some((gated, activation))
}
fn epsilon() -> f32 {
    1e-6
}
fn yes() -> bool {
    true
}
fn one() -> u32 {
    1
}

/// Longest source and target a T5 session plans for unless told otherwise (T5 has no position
/// table; its relative buckets extend to any length).
pub const DEFAULT_MAX_LEN: usize = 512;

/// The tessel config of a Hugging Face T5 `config.json`, whether the decoder output is scaled
/// by `d_model^-0.5` before the tied projection, for sessions up to `max_len` positions and
/// `max_beam` beams.
pub fn config_from_hf(
    text: &str,
    max_len: usize,
    max_beam: usize,
) -> Result<(Config, bool), LoadError> {
    let hf: HfConfig = serde_json::from_str(text).map_err(config_error)?;
    let (gated, activation) = ffn_activation(&hf.feed_forward_proj).ok_or_else(|| {
        config_error(format_args!("feed_forward_proj `{}`", hf.feed_forward_proj))
    })?;
    let sizes = Sizes {
        d_model: hf.d_model,
        heads: hf.num_heads,
        encoder_layers: hf.num_layers,
        decoder_layers: hf.num_decoder_layers.unwrap_or(hf.num_layers),
        d_ff: hf.d_ff,
        src_vocab: hf.vocab_size,
        tgt_vocab: hf.vocab_size,
        max_src_len: max_len,
        max_tgt_len: max_len,
        max_beam,
    };
    let ids = SpecialIds {
        bos: hf.decoder_start_token_id,
        eos: hf.eos_token_id,
        pad: hf.pad_token_id,
    };
    let d_head = (hf.num_heads.checked_mul(hf.d_kv) != Some(hf.d_model)).then_some(hf.d_kv);
    let relative = RelativeAttention {
        buckets: hf.relative_attention_num_buckets,
        max_distance: hf.relative_attention_max_distance,
    };
    let config = Config::builder(sizes, ids)
        .head_width(d_head)
        .norms(NormPlacement::Pre, true)
        .norm_kind(NormKind::Rms, hf.layer_norm_epsilon)
        .feed_forward(activation, gated)
        .positions(Positions::Learned, 0)
        .share_embeddings(true)
        .scale_embeddings(false)
        .tie_output(hf.tie_word_embeddings)
        .biases(Biases::NONE)
        .attention_scale(Some(1.0))
        .relative_attention(Some(relative))
        .build()?;
    // `transformers` 5 reads a saved `tie_word_embeddings: false` (T5 v1.1, Flan-T5) as
    // `scale_decoder_outputs: false`; its mT5 never scales.
    let scale_outputs =
        hf.model_type != "mt5" && hf.scale_decoder_outputs.unwrap_or(hf.tie_word_embeddings);
    Ok((config, scale_outputs))
}

/// How a T5-family encoder's self-attention is stored and runs: the module name of its
/// layers (`SelfAttention`, LongT5's `LocalSelfAttention` and
/// `TransientGlobalSelfAttention`), for local attention the radius each query sees, and for
/// transient-global attention the positions per block.
#[derive(Clone, Copy, Debug)]
pub(super) struct EncoderAttention {
    pub module: &'static str,
    pub radius: Option<usize>,
    pub global_block: Option<usize>,
}

impl EncoderAttention {
    /// T5's full self-attention.
    const FULL: EncoderAttention = EncoderAttention {
        module: "SelfAttention",
        radius: None,
        global_block: None,
    };
}

/// Loads a Hugging Face T5 / mT5 / Flan-T5 directory.
pub fn load_hf_dir(
    dir: &Path,
    max_len: usize,
    max_beam: usize,
    options: &LoadOptions,
) -> Result<Model<'static>, LoadError> {
    let (config, scale_outputs) = config_from_hf(&read_config(dir)?, max_len, max_beam)?;
    load_with(dir, config, scale_outputs, EncoderAttention::FULL, options)
}

/// Loads the weights of a T5-family directory whose config is `config` (its decoder output
/// scaled by `d_model^-0.5` when `scale_outputs`), its encoder attending as `encoder` says.
pub(super) fn load_with(
    dir: &Path,
    mut config: Config,
    scale_outputs: bool,
    encoder: EncoderAttention,
    options: &LoadOptions,
) -> Result<Model<'static>, LoadError> {
    let names = TableNames {
        shared: Some("shared.weight"),
        encoder: "encoder.embed_tokens.weight",
        decoder: "decoder.embed_tokens.weight",
        lm_head: "lm_head.weight",
    };
    // `transformers` 5 always ties T5's projection to `shared` where the file has no
    // `lm_head` (its config forces `tie_word_embeddings`).
    tables::load_file(dir, (names, true), &mut config, |config, tables, source| {
        // Checkpoints saved by early versions hold a relative bias for the first
        // cross-attention, which T5 never uses (`transformers` ignores it on load).
        let ignored = "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight";
        if source.file.tensor(ignored).is_ok() {
            source.used.insert(ignored.to_owned());
        }
        build(config, tables, (scale_outputs, encoder), source, options)
    })
}

/// The self-attention `p` of a block of `stack`, local as `encoder` says.
fn self_attention(
    l: &mut Loader<'_>,
    p: &str,
    (stack, encoder): (StackKind, EncoderAttention),
) -> Result<SelfAttention<'static>, LoadError> {
    let (qkv, out) = sublayers::self_projections(l, p, stack, AttentionNames::T5)?;
    let attention = SelfAttention::new(qkv, out, l.heads(stack));
    let local = match (encoder.radius, encoder.global_block) {
        (Some(r), Some(size)) => {
            let norm = l.norm(&format!("{p}.global_input_layer_norm"))?;
            let transient = TransientGlobal::new(size, norm).map_err(malformed(p))?;
            Some(LocalAttention::new(r, None).with_transient(transient))
        }
        (Some(r), None) => Some(LocalAttention::new(r, None)),
        (None, _) => None,
    };
    match local {
        Some(local) => attention.and_then(|a| a.with_local(local)),
        None => attention,
    }
    .map_err(malformed(p))
}

/// The stack `side` of `layers` blocks (a decoder's with cross-attention), its self-attention
/// as `attention` says.
fn stack(
    l: &mut Loader<'_>,
    side: &str,
    layers: usize,
    (decoder, attention): (bool, EncoderAttention),
) -> Result<Stack<'static>, LoadError> {
    let (module, encoder) = (attention.module, attention);
    let kind = StackKind::decoder_if(decoder);
    let mut blocks: Vec<Block<'static>> = Vec::with_capacity(layers);
    for i in 0..layers {
        let p = format!("{side}.block.{i}.layer");
        let attention = self_attention(l, &format!("{p}.0.{module}"), (kind, encoder))?;
        let norm1 = l.norm(&format!("{p}.0.layer_norm"))?;
        let (cross, ffn_index) = if decoder {
            let name = format!("{p}.1.EncDecAttention");
            let cross = sublayers::cross_attention(l, &name, AttentionNames::T5)?;
            (Some((l.norm(&format!("{p}.1.layer_norm"))?, cross)), 2)
        } else {
            (None, 1)
        };
        let ffn_p = format!("{p}.{ffn_index}.DenseReluDense");
        let ffn = sublayers::feed_forward(l, &ffn_p, kind, FeedForwardNames::T5)?;
        let norm = l.norm(&format!("{p}.{ffn_index}.layer_norm"))?;
        blocks.push(block(
            &p,
            l.config.norm,
            (norm1, attention),
            cross,
            (norm, ffn),
        )?);
    }
    let final_norm = l.norm(&format!("{side}.final_layer_norm"))?;
    let prefix = format!("{side}.block.0.layer.0.{module}");
    let bias = bias_table(
        l,
        &format!("{prefix}.relative_attention_bias.weight"),
        !decoder,
    )?;
    let stack = Stack::new(blocks, Some(final_norm)).with_position_bias(bias);
    if encoder.global_block.is_none() || decoder {
        return Ok(stack);
    }
    // LongT5's side bias: the first layer's, which `transformers` passes along to the others.
    let name = format!("{prefix}.global_relative_attention_bias.weight");
    Ok(stack.with_side_bias(bias_table(l, &name, true)?))
}

/// The bucketed bias table `name` (`[buckets × heads]`) with the config's buckets, causal
/// (the decoder's, with its heads) unless `bidirectional` (the encoder's).
fn bias_table(
    l: &mut Loader<'_>,
    name: &str,
    bidirectional: bool,
) -> Result<RelativeBias<'static>, LoadError> {
    let relative = l.config.relative_attention.unwrap_or(RelativeAttention {
        buckets: 32,
        max_distance: 128,
    });
    let heads = l.config.heads_in(StackKind::decoder_if(!bidirectional));
    let table = l
        .stored(name, &[relative.buckets, heads])?
        .into_f32()
        .into_owned();
    let table =
        crate::aligned::AlignedBuf::from_slice(&table).map_err(crate::load::out_of_memory(name))?;
    RelativeBias::new(
        table,
        heads,
        relative.buckets,
        relative.max_distance,
        bidirectional,
    )
    .map_err(malformed(name))
}

fn build(
    config: &Config,
    tables: &Tables,
    (scale_outputs, attention): (bool, EncoderAttention),
    source: &mut dyn TensorSource,
    options: &LoadOptions,
) -> Result<Model<'static>, LoadError> {
    let (d, vocab) = (config.d_model, config.tgt_vocab);
    let mut l = Loader::new(source, config, options);
    let token_tables = l.token_tables(tables.target, tables.source, tables.shared)?;
    let encoder = stack(&mut l, "encoder", config.encoder_layers, (false, attention))?;
    let full = EncoderAttention::FULL;
    let decoder = stack(&mut l, "decoder", config.decoder_layers, (true, full))?;
    // `transformers` scales the decoder output by d^-0.5 before the projection; folded into
    // its weights here.
    let scale = if scale_outputs {
        (d as f32).powf(-0.5)
    } else {
        1.0
    };
    let generator = if tables.tied {
        let table = token_tables.target.as_slice();
        let weight: Vec<f32> = table.iter().map(|&w| w * scale).collect();
        let storage = options.weights.unwrap_or(token_tables.target_type);
        Linear::packed(storage, vocab, d, &weight, None).map_err(linear_error(tables.target))?
    } else {
        let stored = l.stored(tables.output, &[vocab, d])?;
        let storage = options.weights.unwrap_or(stored.weight_type());
        let weight: Vec<f32> = stored.into_f32().iter().map(|&w| w * scale).collect();
        Linear::packed(storage, vocab, d, &weight, None).map_err(linear_error(tables.output))?
    };
    Ok(Model::from_parts(
        config.clone(),
        Source::Tokens(Embedding::new(token_tables.source, d, 1.0)),
        Embedding::new(token_tables.target, d, 1.0),
        (encoder, decoder),
        generator,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feed_forward_names_read_as_t5_config_reads_them() {
        use FfnActivation::*;
        let cases = [
            ("relu", Some((false, Relu))),
            ("gelu", Some((false, Gelu))),
            ("gelu_new", Some((false, GeluTanh))),
            ("silu", Some((false, Silu))),
            ("gated-gelu", Some((true, GeluTanh))),
            ("gated-gelu_new", Some((true, GeluTanh))),
            ("gated-relu", Some((true, Relu))),
            ("gated-silu", Some((true, Silu))),
            ("gelu_fast", None),
            ("gated-", None),
        ];
        for (name, want) in cases {
            assert_eq!(ffn_activation(name), want, "{name}");
        }
    }

    #[test]
    fn a_config_without_the_default_fields_reads_as_t5_small() {
        // t5-small's published config.json names neither `feed_forward_proj` nor the fields
        // below; T5Config's defaults fill them.
        let (config, scaled) = config_from_hf(r#"{"model_type": "t5"}"#, 64, 1).unwrap();
        assert_eq!(
            (
                config.d_model,
                config.heads,
                config.d_ff,
                config.encoder_layers
            ),
            (512, 8, 2048, 6)
        );
        assert_eq!((config.decoder_layers, config.tgt_vocab), (6, 32128));
        assert_eq!(config.activation, FfnActivation::Relu);
        assert!(scaled);
    }
}
