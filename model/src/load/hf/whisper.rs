//! Whisper from a Hugging Face directory (`config.json` + `model.safetensors`, the layout of
//! `transformers`' `WhisperForConditionalGeneration`).
//!
//! The graph is tessel's ordinary pre-LN encoder-decoder with a [`ConvStem`] front end: two
//! convolutions over the log-mel frames (GELU after each) plus the encoder's stored sinusoid
//! table, exact-erf GELU feed-forwards, a key projection without bias, final LayerNorms on
//! both stacks, learned decoder positions and the output projection tied to the token
//! embedding (no embedding scale).
//!
//! | Hugging Face tensor | tessel layer |
//! |---|---|
//! | `model.encoder.conv1/conv2.{weight,bias}` (`[d, channels, 3]`) | [`ConvStem`] (taps moved into the reduction) |
//! | `model.encoder.embed_positions.weight` | the stem's position table |
//! | `model.{encoder,decoder}.layers.{i}.self_attn.{q,k,v}_proj` | one fused Q/K/V projection (K's bias zero) |
//! | `...self_attn.out_proj`, `self_attn_layer_norm` | its output projection and norm |
//! | `model.decoder.layers.{i}.encoder_attn.q_proj` / `{k,v}_proj` / `out_proj`, `encoder_attn_layer_norm` | cross-attention query, fused K/V, output, norm |
//! | `...fc1`, `fc2`, `final_layer_norm` | the feed-forward and its norm |
//! | `model.{encoder,decoder}.layer_norm` | the stacks' final norms |
//! | `model.decoder.embed_tokens`, `embed_positions` | the target embedding; the generator (tied) |

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::blocks::{self, StackSizes};
use super::{activation, config_error, read, read_config};
use crate::config::{
    Biases, Config, ConfigBuilder, FfnActivation, FrontEnd, NormPlacement, Positions, Sizes,
    SpecialIds,
};
use crate::layers::{ConvStem, Embedding, Linear};
use crate::load::source::{SafetensorsSource, TensorSource};
use crate::load::{conv_linear, linear_error, malformed, LoadError, LoadOptions, Loader};
use crate::model::{Model, Source, Stack};

/// The fields of a Hugging Face `WhisperConfig` that shape the graph, besides its
/// [`StackSizes`].
#[derive(Clone, Debug, Deserialize)]
struct HfConfig {
    num_mel_bins: usize,
    max_source_positions: usize,
    max_target_positions: usize,
    vocab_size: usize,
    #[serde(default = "gelu")]
    activation_function: String,
    #[serde(default)]
    scale_embedding: bool,
    decoder_start_token_id: u32,
    eos_token_id: u32,
    #[serde(default)]
    pad_token_id: Option<u32>,
}

fn gelu() -> String {
    "gelu".to_owned()
}

/// Widest beam a Whisper session plans for unless told otherwise (the reference's default
/// beam search uses 5).
pub const DEFAULT_MAX_BEAM: usize = 5;

/// The tessel config of a Hugging Face Whisper `config.json`, planned for beams up to
/// `max_beam`.
pub fn config_from_hf(text: &str, max_beam: usize) -> Result<Config, LoadError> {
    let stacks = StackSizes::from_config(text)?;
    let hf: HfConfig = serde_json::from_str(text).map_err(config_error)?;
    let unsupported = |what: String| Err(config_error(what));
    if stacks.encoder_attention_heads != stacks.decoder_attention_heads {
        return unsupported(format!(
            "encoder and decoder heads differ ({} vs {})",
            stacks.encoder_attention_heads, stacks.decoder_attention_heads
        ));
    }
    if stacks.encoder_ffn_dim != stacks.decoder_ffn_dim {
        return unsupported(format!(
            "encoder and decoder feed-forward widths differ ({} vs {})",
            stacks.encoder_ffn_dim, stacks.decoder_ffn_dim
        ));
    }
    let activation = activation(&hf.activation_function)?;
    let lengths = (hf.max_source_positions, hf.max_target_positions);
    // The encoder reads frames: no source vocabulary.
    let sizes = stacks.sizes((1, hf.vocab_size), lengths, max_beam);
    let ids = SpecialIds {
        bos: hf.decoder_start_token_id,
        eos: hf.eos_token_id,
        pad: hf.pad_token_id.unwrap_or(hf.eos_token_id),
    };
    let config = config(sizes, hf.num_mel_bins, activation, ids)
        .scale_embeddings(hf.scale_embedding)
        .build()?;
    Ok(config)
}

/// Whisper's graph at `sizes` (the encoder reads frames: `src_vocab` 1; `max_src_len` is the
/// encoder's positions, whole 30 s windows), whichever format holds the checkpoint: pre-LN
/// blocks with final norms, a convolutional front end over `n_mels` bins, learned positions,
/// no bias on the key projection nor on the output projection, which is the token embedding,
/// and no embedding scale.
pub(crate) fn config(
    sizes: Sizes,
    n_mels: usize,
    activation: FfnActivation,
    ids: SpecialIds,
) -> ConfigBuilder {
    Config::builder(sizes, ids)
        .norms(NormPlacement::Pre, true)
        .feed_forward(activation, false)
        .positions(Positions::Learned, 0)
        .front_end(FrontEnd::Conv { n_mels })
        .scale_embeddings(false)
        .tie_output(true)
        .biases(Biases {
            attention_key: false,
            generator: false,
            ..Biases::default()
        })
}

/// Loads `config.json` and `model.safetensors` of a Hugging Face Whisper directory.
pub fn load_hf_dir(
    dir: &Path,
    max_beam: usize,
    options: &LoadOptions,
) -> Result<Model<'static>, LoadError> {
    let config = config_from_hf(&read_config(dir)?, max_beam)?;
    let bytes = read(dir, "model.safetensors")?;
    from_hf_safetensors(config, &bytes, options)
}

/// Builds a Whisper model for `config` from the bytes of a Hugging Face `model.safetensors`.
pub fn from_hf_safetensors(
    config: Config,
    bytes: &[u8],
    options: &LoadOptions,
) -> Result<Model<'static>, LoadError> {
    let mut source = SafetensorsSource::parse(bytes)?;
    let model = build(&config, &mut source, options)?;
    // The projection is the token embedding (tied); a file may keep it as `proj_out.weight`,
    // which is then a byte copy of the table or an error naming it.
    const PROJECTION: &str = "proj_out.weight";
    if super::tables::same_bytes(
        &source.file,
        PROJECTION,
        "model.decoder.embed_tokens.weight",
    ) {
        source.used.insert(PROJECTION.to_string());
    }
    source.check_all_used()?;
    Ok(model)
}

fn build(
    config: &Config,
    source: &mut dyn TensorSource,
    options: &LoadOptions,
) -> Result<Model<'static>, LoadError> {
    let d = config.d_model;
    let n_mels = config.front_end.n_mels().unwrap_or(0);
    let mut l = Loader::new(source, config, options);
    let stem = conv_stem(&mut l, n_mels)?;
    let encoder = blocks::blocks(&mut l, "model.encoder", false, false)?;
    let encoder_norm = l.norm("model.encoder.layer_norm")?;
    let (table, table_type) = l.table("model.decoder.embed_tokens.weight", config.tgt_vocab)?;
    let (positions, _) = l.table("model.decoder.embed_positions.weight", config.max_tgt_len)?;
    let table = Arc::new(table);
    let scale = if config.scale_embeddings {
        (d as f32).sqrt()
    } else {
        1.0
    };
    let target = Embedding::new(Arc::clone(&table), d, scale).with_positions(positions, 0);
    let decoder = blocks::blocks(&mut l, "model.decoder", false, true)?;
    let decoder_norm = l.norm("model.decoder.layer_norm")?;
    let storage = options.weights.unwrap_or(table_type);
    let generator = Linear::packed(storage, config.tgt_vocab, d, table.as_slice(), None)
        .map_err(linear_error("model.decoder.embed_tokens.weight"))?;
    Ok(Model::from_parts(
        config.clone(),
        Source::Audio(stem),
        target,
        (
            Stack::new(encoder, Some(encoder_norm)),
            Stack::new(decoder, Some(decoder_norm)),
        ),
        generator,
    ))
}

/// A convolution `[out, channels, 3]` as a linear layer over `(tap, channel)`.
fn convolution(
    l: &mut Loader<'_>,
    name: &str,
    out: usize,
    channels: usize,
) -> Result<Linear<'static>, LoadError> {
    let bias = l.vector(&format!("{name}.bias"), out)?;
    let wanted = l.options.weights;
    let weight_name = format!("{name}.weight");
    let stored = l.stored(&weight_name, &[out, channels, 3])?;
    conv_linear(&weight_name, &stored, &bias, (out, channels), wanted)
}

fn conv_stem(l: &mut Loader<'_>, n_mels: usize) -> Result<ConvStem<'static>, LoadError> {
    let d = l.config.d_model;
    let conv1 = convolution(l, "model.encoder.conv1", d, n_mels)?;
    let conv2 = convolution(l, "model.encoder.conv2", d, d)?;
    let (positions, _) = l.table("model.encoder.embed_positions.weight", l.config.max_src_len)?;
    ConvStem::new(conv1, conv2, positions, n_mels).map_err(malformed("model.encoder"))
}
