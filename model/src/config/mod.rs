//! The model configuration (`config.json`); its validation is in `validate`.

#[cfg(feature = "std")]
use serde::{Deserialize, Serialize};
use tessel_kernels::activation::Activation;
use thiserror::Error;

mod builder;
mod validate;

pub use builder::ConfigBuilder;

/// Where the LayerNorms sit in each layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "std", serde(rename_all = "lowercase"))]
pub enum NormPlacement {
    /// `x = LN(x + sublayer(x))`: the 2017 paper and `nn.Transformer(norm_first=False)`.
    Post,
    /// `x = x + sublayer(LN(x))`: Whisper and most modern models (`norm_first=True`).
    Pre,
}

/// The feed-forward activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "std", serde(rename_all = "lowercase"))]
pub enum FfnActivation {
    /// `max(x, 0)`.
    Relu,
    /// Exact (erf) GELU, PyTorch `F.gelu`.
    Gelu,
    /// tanh-approximated GELU.
    GeluTanh,
    /// SiLU, `x · σ(x)` (called swish by Marian, OPUS-MT and CTranslate2).
    #[cfg_attr(feature = "std", serde(alias = "swish"))]
    Silu,
}

impl FfnActivation {
    /// The kernel activation.
    pub fn kernel(self) -> Activation {
        match self {
            FfnActivation::Relu => Activation::Relu,
            FfnActivation::Gelu => Activation::GeluErf,
            FfnActivation::GeluTanh => Activation::GeluTanh,
            FfnActivation::Silu => Activation::Silu,
        }
    }
}

/// How positions are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "std", serde(rename_all = "lowercase"))]
pub enum Positions {
    /// Fixed table: `pe[p, 2i] = sin(p / 10000^(2i/d))`, `pe[p, 2i+1] = cos(p / 10000^(2i/d))`.
    Sinusoidal,
    /// Learned tables `src_pos.weight` `[max_src_len × d]` and `tgt_pos.weight`
    /// `[max_tgt_len × d]`.
    Learned,
}

impl NormPlacement {
    /// [`NormPlacement::Pre`] when `pre`, else [`NormPlacement::Post`].
    pub fn pre_if(pre: bool) -> NormPlacement {
        if pre {
            NormPlacement::Pre
        } else {
            NormPlacement::Post
        }
    }
}

/// Which normalisation every norm of the model is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "std", serde(rename_all = "lowercase"))]
pub enum NormKind {
    /// LayerNorm with scale and shift.
    #[default]
    Layer,
    /// RMSNorm: no mean, no shift (T5).
    Rms,
}

/// T5's relative position buckets: an additive attention bias per head, learned per bucket of
/// key-minus-query distance (bidirectional in the encoder, causal in the decoder), shared by
/// every layer of a stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Serialize, Deserialize))]
pub struct RelativeAttention {
    /// Buckets (T5: 32).
    pub buckets: usize,
    /// Distance from which buckets are all the last one (T5: 128).
    pub max_distance: usize,
}

/// What the encoder reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Serialize, Deserialize))]
#[cfg_attr(feature = "std", serde(rename_all = "snake_case", tag = "kind"))]
pub enum FrontEnd {
    /// Source token ids, through the source embedding.
    #[default]
    Tokens,
    /// Log-mel frames through two 1-D convolutions of width 3 (stride 1, then 2), each
    /// followed by GELU (Whisper): `2 · max_src_len` frames of `n_mels` bins become
    /// `max_src_len` encoder positions.
    Conv {
        /// Mel bins per frame (80, or 128 for large-v3).
        n_mels: usize,
    },
}

impl FrontEnd {
    /// Mel bins per frame of a convolutional front end, `None` for tokens.
    pub fn n_mels(self) -> Option<usize> {
        match self {
            FrontEnd::Tokens => None,
            FrontEnd::Conv { n_mels } => Some(n_mels),
        }
    }
}

/// Which projections carry a bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(Serialize, Deserialize))]
pub struct Biases {
    /// Q/K/V input projections (`in_proj_bias`).
    pub attention_in: bool,
    /// With `attention_in`: whether the key projection has one too (Whisper's has none; its
    /// part of the fused bias is then zero).
    #[cfg_attr(feature = "std", serde(default = "default_true"))]
    pub attention_key: bool,
    /// Attention output projections (`out_proj.bias`).
    pub attention_out: bool,
    /// Both feed-forward linears (`linear1.bias`, `linear2.bias`).
    pub ffn: bool,
    /// Output projection (`generator.bias`).
    pub generator: bool,
}

impl Biases {
    /// No projection carries a bias (T5).
    pub const NONE: Biases = Biases {
        attention_in: false,
        attention_key: false,
        attention_out: false,
        ffn: false,
        generator: false,
    };
}

impl Default for Biases {
    fn default() -> Biases {
        Biases {
            attention_in: true,
            attention_key: true,
            attention_out: true,
            ffn: true,
            generator: true,
        }
    }
}

#[cfg(feature = "std")]
fn default_eps() -> f32 {
    1e-5
}
#[cfg(feature = "std")]
fn default_true() -> bool {
    true
}

/// One of the model's two stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackKind {
    /// The encoder: self-attention and feed-forward.
    Encoder,
    /// The decoder: masked self-attention, cross-attention over the encoder's output (with
    /// the decoder's heads) and feed-forward.
    Decoder,
}

impl StackKind {
    /// [`StackKind::Decoder`] when `decoder`, else [`StackKind::Encoder`].
    pub fn decoder_if(decoder: bool) -> StackKind {
        if decoder {
            StackKind::Decoder
        } else {
            StackKind::Encoder
        }
    }
}

/// Everything that shapes a model, serialised as `config.json`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "std", derive(Serialize, Deserialize))]
pub struct Config {
    /// Width of the residual stream.
    pub d_model: usize,
    /// Attention heads (the encoder's, and the decoder's unless `decoder_heads` is given);
    /// `d_model` must be a multiple unless `d_head` is given.
    pub heads: usize,
    /// The decoder's attention heads (self- and cross-attention) when they differ from the
    /// encoder's `heads` (BART-family models may state them apart); `d_model` must be a
    /// multiple unless `d_head` is given.
    #[cfg_attr(
        feature = "std",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub decoder_heads: Option<usize>,
    /// Width of one head when it is not `d_model / heads` (T5 v1.1, Flan-T5 and mT5 small:
    /// 6 heads of 64 over a 512-wide stream). Attention then projects `d_model` to
    /// `heads × d_head` and back.
    #[cfg_attr(
        feature = "std",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub d_head: Option<usize>,
    /// Encoder layers.
    pub encoder_layers: usize,
    /// Decoder layers.
    pub decoder_layers: usize,
    /// Inner width of the feed-forward block (the encoder's, and the decoder's unless
    /// `decoder_d_ff` is given).
    pub d_ff: usize,
    /// Inner width of the decoder's feed-forward blocks when it differs from the encoder's
    /// `d_ff`.
    #[cfg_attr(
        feature = "std",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub decoder_d_ff: Option<usize>,
    /// Source vocabulary size.
    pub src_vocab: usize,
    /// Target vocabulary size.
    pub tgt_vocab: usize,
    /// One embedding table (`tgt_embed.weight`) for source and target; needs equal vocabularies.
    #[cfg_attr(feature = "std", serde(default))]
    pub share_embeddings: bool,
    /// The output projection is the target embedding (transposed); no `generator.weight`.
    #[cfg_attr(feature = "std", serde(default))]
    pub tie_output: bool,
    /// Longest source a session accepts.
    pub max_src_len: usize,
    /// Longest target (positions decoded, BOS included) a session accepts.
    pub max_tgt_len: usize,
    /// Widest beam a session plans for.
    pub max_beam: usize,
    /// LayerNorm placement.
    pub norm: NormPlacement,
    /// Final LayerNorms after the encoder and decoder stacks (`encoder.norm`, `decoder.norm`);
    /// `nn.Transformer` always has them.
    #[cfg_attr(feature = "std", serde(default = "default_true"))]
    pub final_norm: bool,
    /// Feed-forward activation.
    pub activation: FfnActivation,
    /// Position encoding.
    pub positions: Positions,
    /// Which projections carry biases.
    #[cfg_attr(feature = "std", serde(default))]
    pub biases: Biases,
    /// What the encoder reads: tokens (the default) or audio frames.
    #[cfg_attr(feature = "std", serde(default))]
    pub front_end: FrontEnd,
    /// LayerNorm (the default) or RMSNorm.
    #[cfg_attr(feature = "std", serde(default))]
    pub norm_kind: NormKind,
    /// Gated feed-forward (T5 v1.1, Flan-T5): `down(act(x·W_gate) ⊙ (x·W_up))`.
    #[cfg_attr(feature = "std", serde(default))]
    pub gated_ffn: bool,
    /// Attention score scale; `None` is `1/√d_head` (T5 uses 1).
    #[cfg_attr(feature = "std", serde(default))]
    pub attention_scale: Option<f32>,
    /// Relative position buckets as an attention bias (T5); `None`: no bias.
    #[cfg_attr(feature = "std", serde(default))]
    pub relative_attention: Option<RelativeAttention>,
    /// LongT5's transient-global encoder attention: positions per block, each block adding
    /// one side key (sessions plan room for them); `None` for every other encoder.
    #[cfg_attr(
        feature = "std",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub global_block_size: Option<usize>,
    /// A norm after the embeddings (BART, mBART: `layernorm_embedding`).
    #[cfg_attr(feature = "std", serde(default))]
    pub embedding_norm: bool,
    /// Rows of the position tables skipped before position 0 (BART's learned positions and
    /// fairseq's sinusoids start at 2).
    #[cfg_attr(feature = "std", serde(default))]
    pub position_offset: usize,
    /// Multiply embeddings by `√d_model` before adding positions.
    #[cfg_attr(feature = "std", serde(default = "default_true"))]
    pub scale_embeddings: bool,
    /// LayerNorm epsilon.
    #[cfg_attr(feature = "std", serde(default = "default_eps"))]
    pub layer_norm_eps: f32,
    /// Beginning-of-sequence id: the first decoder input.
    pub bos_id: u32,
    /// End-of-sequence id.
    pub eos_id: u32,
    /// Padding id (never produced by search; kept for hosts).
    pub pad_id: u32,
}

/// The sizes every model states, and the longest inputs and widest beam its sessions are
/// planned for: what [`Config::new`] needs besides the special ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Width of the residual stream.
    pub d_model: usize,
    /// Attention heads (both stacks'; [`ConfigBuilder::decoder_widths`] sets the decoder's
    /// apart).
    pub heads: usize,
    /// Encoder layers.
    pub encoder_layers: usize,
    /// Decoder layers.
    pub decoder_layers: usize,
    /// Inner width of the feed-forward block (both stacks'; [`ConfigBuilder::decoder_widths`]
    /// sets the decoder's apart).
    pub d_ff: usize,
    /// Source vocabulary size (1 for a model that reads audio).
    pub src_vocab: usize,
    /// Target vocabulary size.
    pub tgt_vocab: usize,
    /// Longest source a session accepts.
    pub max_src_len: usize,
    /// Longest target (positions decoded, BOS included) a session accepts.
    pub max_tgt_len: usize,
    /// Widest beam a session plans for.
    pub max_beam: usize,
}

/// A model's special token ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecialIds {
    /// Beginning of sequence: the first decoder input.
    pub bos: u32,
    /// End of sequence.
    pub eos: u32,
    /// Padding.
    pub pad: u32,
}

/// Why a configuration is rejected.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum ConfigError {
    /// A size that must be positive is zero.
    #[error("config field `{0}` must be positive")]
    Zero(&'static str),
    /// `d_model` is not a multiple of `heads` and no `d_head` is given.
    #[error("d_model {d_model} is not a multiple of heads {heads} (and no d_head is given)")]
    HeadsDoNotDivide {
        /// Model width.
        d_model: usize,
        /// Heads.
        heads: usize,
    },
    /// A special token id is not in the target vocabulary.
    #[error("{which} id {id} is outside the target vocabulary of {vocab}")]
    SpecialIdOutOfRange {
        /// `bos_id`, `eos_id` or `pad_id`.
        which: &'static str,
        /// The id.
        id: u32,
        /// Target vocabulary size.
        vocab: usize,
    },
    /// Shared embeddings with different vocabulary sizes.
    #[error("share_embeddings needs src_vocab ({src}) == tgt_vocab ({tgt})")]
    SharedVocabMismatch {
        /// Source vocabulary.
        src: usize,
        /// Target vocabulary.
        tgt: usize,
    },
    /// Epsilon not finite and positive.
    #[error("layer_norm_eps {0} must be finite and positive")]
    BadEps(f32),
    /// Attention scale not finite and positive.
    #[error("attention_scale {0} must be finite and positive")]
    BadScale(f32),
    /// Sizes whose products overflow the address space.
    #[error("config sizes overflow: {0}")]
    TooLarge(&'static str),
    /// A session limit above the config's maximum.
    #[error("session limit {what} = {value} exceeds the config's {max}")]
    LimitAboveConfig {
        /// Which limit.
        what: &'static str,
        /// Requested.
        value: usize,
        /// The config's maximum.
        max: usize,
    },
    /// `config.json` could not be parsed.
    #[cfg(feature = "std")]
    #[error("config.json: {0}")]
    Parse(String),
}

/// Largest value any single dimension may take: keeps every product of a few of them far from
/// `usize` overflow and ids within `u32`.
pub const MAX_DIM: usize = 1 << 24;

/// Largest `max_src_len` / `max_tgt_len`: position tables (computed at load time for sinusoidal
/// positions, whatever the file holds) stay proportionate to a model.
pub const MAX_POSITIONS: usize = 1 << 16;

/// Largest model, in bytes of `f32` parameters and tables, a config may describe (256 GiB):
/// every size the loader computes from a config then fits `usize` with room to spare.
pub const MAX_MODEL_BYTES: usize = 1 << 38;

impl Config {
    /// A model of `sizes` and `ids` with PyTorch `nn.Transformer`'s architecture for
    /// everything else: post-norm LayerNorm blocks (epsilon 1e-5) and final norms, ReLU,
    /// sinusoidal positions, every bias, separate source and target embeddings scaled by
    /// `√d_model`, an output projection of its own. [`Config::builder`] starts from this one
    /// and changes what a family does otherwise.
    pub fn new(sizes: Sizes, ids: SpecialIds) -> Config {
        Config {
            d_model: sizes.d_model,
            heads: sizes.heads,
            decoder_heads: None,
            d_head: None,
            encoder_layers: sizes.encoder_layers,
            decoder_layers: sizes.decoder_layers,
            d_ff: sizes.d_ff,
            decoder_d_ff: None,
            src_vocab: sizes.src_vocab,
            tgt_vocab: sizes.tgt_vocab,
            share_embeddings: false,
            tie_output: false,
            max_src_len: sizes.max_src_len,
            max_tgt_len: sizes.max_tgt_len,
            max_beam: sizes.max_beam,
            norm: NormPlacement::Post,
            final_norm: true,
            activation: FfnActivation::Relu,
            positions: Positions::Sinusoidal,
            biases: Biases::default(),
            front_end: FrontEnd::Tokens,
            norm_kind: NormKind::Layer,
            gated_ffn: false,
            attention_scale: None,
            relative_attention: None,
            global_block_size: None,
            embedding_norm: false,
            position_offset: 0,
            scale_embeddings: true,
            layer_norm_eps: 1e-5,
            bos_id: ids.bos,
            eos_id: ids.eos,
            pad_id: ids.pad,
        }
    }

    /// A [`ConfigBuilder`] from [`Config::new`]`(sizes, ids)`: every loader builds its config
    /// so, changing what its family does otherwise, for instance
    /// `Config::builder(sizes, ids).norms(NormPlacement::Pre, true).build()?`.
    pub fn builder(sizes: Sizes, ids: SpecialIds) -> ConfigBuilder {
        ConfigBuilder::new(Config::new(sizes, ids))
    }

    /// Transformer-base ("Attention Is All You Need", table 3): 6+6 layers, d_model 512,
    /// 8 heads, d_ff 2048, shared 32000 vocabulary with separate tables, post-LN, ReLU,
    /// sinusoidal positions; limits 256 source and target positions, beam 4.
    pub fn transformer_base() -> Config {
        let sizes = Self::transformer_base_sizes();
        Config::new(
            sizes,
            SpecialIds {
                bos: 1,
                eos: 2,
                pad: 0,
            },
        )
    }

    /// The sizes of [`Config::transformer_base`].
    fn transformer_base_sizes() -> Sizes {
        Sizes {
            d_model: 512,
            heads: 8,
            encoder_layers: 6,
            decoder_layers: 6,
            d_ff: 2048,
            src_vocab: 32000,
            tgt_vocab: 32000,
            max_src_len: 256,
            max_tgt_len: 256,
            max_beam: 4,
        }
    }

    /// Parses and validates `config.json` text.
    #[cfg(feature = "std")]
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let config: Config =
            serde_json::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// The JSON text of this config.
    #[cfg(feature = "std")]
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Attention heads of `stack`'s layers (the decoder's serve its cross-attention too).
    pub fn heads_in(&self, stack: StackKind) -> usize {
        match stack {
            StackKind::Encoder => self.heads,
            StackKind::Decoder => self.decoder_heads.unwrap_or(self.heads),
        }
    }

    /// Inner width of `stack`'s feed-forward blocks.
    pub fn d_ff_in(&self, stack: StackKind) -> usize {
        match stack {
            StackKind::Encoder => self.d_ff,
            StackKind::Decoder => self.decoder_d_ff.unwrap_or(self.d_ff),
        }
    }

    /// The most attention heads of either stack (what buffers shared by both hold).
    pub fn most_heads(&self) -> usize {
        self.heads.max(self.heads_in(StackKind::Decoder))
    }

    /// Width of one head of `stack`: `d_head` when given, else `d_model` over its heads.
    pub fn d_head(&self, stack: StackKind) -> usize {
        self.d_head
            .unwrap_or(self.d_model / self.heads_in(stack).max(1))
    }

    /// Width of `stack`'s attention's inner rows, `heads × d_head` (queries, keys, values, the
    /// decoder's caches); `d_model` unless `d_head` is given.
    pub fn attention_width(&self, stack: StackKind) -> usize {
        self.heads_in(stack).saturating_mul(self.d_head(stack))
    }

    /// Number of `f32` parameters and tables of the model this config describes (embeddings,
    /// position tables, every layer's projections, norms and biases, the generator), or `None`
    /// when the count overflows `usize`. Only meaningful for positive sizes; `validate` bounds it
    /// by [`MAX_MODEL_BYTES`].
    pub fn model_f32s(&self) -> Option<usize> {
        let d = self.d_model;
        let mul = |a: usize, b: usize| a.checked_mul(b);
        // Per layer: Q, K, V, output projections (+ biases), FFN, norms.
        let attention = |stack| {
            let a = self.attention_width(stack);
            mul(mul(4, d)?, a)?.checked_add(3 * a + d)
        };
        let ffn = |stack| {
            let ff = self.d_ff_in(stack);
            mul(2 * d, ff)?.checked_add(d + ff)
        };
        let norm = 2 * d;
        let encoder_layer = attention(StackKind::Encoder)?
            .checked_add(ffn(StackKind::Encoder)?)?
            .checked_add(2 * norm)?;
        let decoder_layer = mul(attention(StackKind::Decoder)?, 2)?
            .checked_add(ffn(StackKind::Decoder)?)?
            .checked_add(3 * norm)?;
        let source = match self.front_end {
            FrontEnd::Tokens => mul(self.src_vocab, d)?,
            // conv1 (3·n_mels → d) and conv2 (3d → d) with their biases.
            FrontEnd::Conv { n_mels } => mul(3 * n_mels.checked_add(d)?, d)?.checked_add(2 * d)?,
        };
        let embeddings = source.checked_add(mul(self.tgt_vocab, d)?)?;
        let positions = mul(self.max_src_len.checked_add(self.max_tgt_len)?, d)?;
        let generator = mul(self.tgt_vocab, d)?.checked_add(self.tgt_vocab)?;
        mul(encoder_layer, self.encoder_layers)?
            .checked_add(mul(decoder_layer, self.decoder_layers)?)?
            .checked_add(embeddings)?
            .checked_add(positions)?
            .checked_add(generator)?
            .checked_add(2 * norm)
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn a_config_without_decoder_widths_reads_and_writes_as_before() {
        let base = Config::transformer_base();
        let json = base.to_json();
        assert!(!json.contains("decoder_heads") && !json.contains("decoder_d_ff"));
        let read = Config::from_json(&json).unwrap();
        assert_eq!(read, base);
        for stack in [StackKind::Encoder, StackKind::Decoder] {
            assert_eq!((read.heads_in(stack), read.d_ff_in(stack)), (8, 2048));
            assert_eq!(read.attention_width(stack), 512);
        }
    }

    #[test]
    fn the_decoder_widths_are_its_own_and_checked() {
        let base = Config::transformer_base();
        let ids = SpecialIds {
            bos: base.bos_id,
            eos: base.eos_id,
            pad: base.pad_id,
        };
        let sizes = Config::transformer_base_sizes();
        let same = Config::builder(sizes, ids).decoder_widths(8, 2048).build();
        assert_eq!(same, Ok(base.clone()));
        let config = Config::builder(sizes, ids)
            .decoder_widths(4, 1024)
            .build()
            .unwrap();
        assert_eq!(config.heads_in(StackKind::Decoder), 4);
        assert_eq!(config.d_head(StackKind::Decoder), 128);
        assert_eq!(config.d_ff_in(StackKind::Decoder), 1024);
        assert_eq!(config.heads_in(StackKind::Encoder), 8);
        assert_eq!(Config::from_json(&config.to_json()), Ok(config));
        let bad = Config::builder(sizes, ids).decoder_widths(5, 2048).build();
        assert_eq!(
            bad,
            Err(ConfigError::HeadsDoNotDivide {
                d_model: 512,
                heads: 5
            })
        );
        let zero = Config::builder(sizes, ids).decoder_widths(8, 0).build();
        assert_eq!(zero, Err(ConfigError::Zero("decoder_d_ff")));
    }
}
