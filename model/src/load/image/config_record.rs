//! The [`Config`] as a fixed record of little-endian `u32` words (no serde in the core).
//!
//! | word | field |
//! |---|---|
//! | 0–6 | d_model, heads, encoder_layers, decoder_layers, d_ff, src_vocab, tgt_vocab |
//! | 7–9 | max_src_len, max_tgt_len, max_beam |
//! | 10 | flags: share_embeddings 1, tie_output 2, final_norm 4, gated_ffn 8, embedding_norm 16, scale_embeddings 32, pre-LN 64, RMSNorm 128, learned positions 256 |
//! | 11 | biases: attention_in 1, attention_key 2, attention_out 4, ffn 8, generator 16 |
//! | 12 | activation: 0 ReLU, 1 GELU, 2 tanh-GELU, 3 SiLU |
//! | 13, 14 | front end: 0 tokens, 1 conv; n_mels |
//! | 15, 16 | attention scale: 0 default, 1 given; its `f32` bits |
//! | 17–19 | relative attention: 0 none, 1 given; buckets; max_distance |
//! | 20 | position_offset |
//! | 21 | layer_norm_eps (`f32` bits) |
//! | 22–24 | bos_id, eos_id, pad_id |
//! | 25 | d_head when given (0: `d_model / heads`) |
//! | 26 | decoder_heads when given (0: `heads`) |
//! | 27 | decoder_d_ff when given (0: `d_ff`) |
//! | 28–31 | zero |
//!
//! Words 26 and 27 were reserved (zero) before they held the decoder's widths: a record
//! written before reads as it did, and a reader that predates them refuses a record with
//! differing stacks as a reserved word not zero.

use crate::config::{
    Biases, Config, FfnActivation, FrontEnd, NormKind, NormPlacement, Positions, RelativeAttention,
    Sizes, SpecialIds,
};

use super::ImageError;

/// Words of the config record.
pub const CONFIG_WORDS: usize = 32;

const SHARE: u32 = 1;
const TIE: u32 = 2;
const FINAL_NORM: u32 = 4;
const GATED: u32 = 8;
const EMBEDDING_NORM: u32 = 16;
const SCALE_EMBEDDINGS: u32 = 32;
const PRE_LN: u32 = 64;
const RMS: u32 = 128;
const LEARNED: u32 = 256;
const ALL_FLAGS: u32 = 511;

/// The record of `config`. Sizes above `u32::MAX` cannot occur in a validated config
/// ([`crate::config::MAX_DIM`]); they saturate.
pub fn config_to_words(config: &Config) -> [u32; CONFIG_WORDS] {
    let size = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    let bit = |on: bool, b: u32| if on { b } else { 0 };
    let mut w = [0u32; CONFIG_WORDS];
    let sizes = [
        config.d_model,
        config.heads,
        config.encoder_layers,
        config.decoder_layers,
        config.d_ff,
        config.src_vocab,
        config.tgt_vocab,
        config.max_src_len,
        config.max_tgt_len,
        config.max_beam,
    ];
    for (word, value) in w.iter_mut().zip(sizes) {
        *word = size(value);
    }
    w[10] = bit(config.share_embeddings, SHARE)
        | bit(config.tie_output, TIE)
        | bit(config.final_norm, FINAL_NORM)
        | bit(config.gated_ffn, GATED)
        | bit(config.embedding_norm, EMBEDDING_NORM)
        | bit(config.scale_embeddings, SCALE_EMBEDDINGS)
        | bit(config.norm == NormPlacement::Pre, PRE_LN)
        | bit(config.norm_kind == NormKind::Rms, RMS)
        | bit(config.positions == Positions::Learned, LEARNED);
    let b = config.biases;
    w[11] = bit(b.attention_in, 1)
        | bit(b.attention_key, 2)
        | bit(b.attention_out, 4)
        | bit(b.ffn, 8)
        | bit(b.generator, 16);
    w[12] = match config.activation {
        FfnActivation::Relu => 0,
        FfnActivation::Gelu => 1,
        FfnActivation::GeluTanh => 2,
        FfnActivation::Silu => 3,
    };
    if let FrontEnd::Conv { n_mels } = config.front_end {
        w[13] = 1;
        w[14] = size(n_mels);
    }
    if let Some(scale) = config.attention_scale {
        w[15] = 1;
        w[16] = scale.to_bits();
    }
    if let Some(r) = config.relative_attention {
        w[17] = 1;
        w[18] = size(r.buckets);
        w[19] = size(r.max_distance);
    }
    w[20] = size(config.position_offset);
    w[21] = config.layer_norm_eps.to_bits();
    w[22] = config.bos_id;
    w[23] = config.eos_id;
    w[24] = config.pad_id;
    w[25] = config.d_head.map_or(0, size);
    w[26] = config.decoder_heads.map_or(0, size);
    w[27] = config.decoder_d_ff.map_or(0, size);
    w
}

/// The config a record describes, validated ([`Config::validate`]).
pub fn config_from_words(w: &[u32; CONFIG_WORDS]) -> Result<Config, ImageError> {
    check_unused_bits(w)?;
    let on = |b: u32| w[10] & b != 0;
    let ids = SpecialIds {
        bos: w[22],
        eos: w[23],
        pad: w[24],
    };
    let norm_kind = either(on(RMS), NormKind::Rms, NormKind::Layer);
    let positions = either(on(LEARNED), Positions::Learned, Positions::Sinusoidal);
    let sizes = sizes_from_words(w);
    let or = |word: u32, encoder: usize| if word == 0 { encoder } else { word as usize };
    let config = Config::builder(sizes, ids)
        .head_width((w[25] != 0).then_some(w[25] as usize))
        .decoder_widths(or(w[26], sizes.heads), or(w[27], sizes.d_ff))
        .norms(NormPlacement::pre_if(on(PRE_LN)), on(FINAL_NORM))
        .norm_kind(norm_kind, f32::from_bits(w[21]))
        .feed_forward(activation_from_word(w[12])?, on(GATED))
        .positions(positions, w[20] as usize)
        .front_end(front_end_from_words([w[13], w[14]])?)
        .share_embeddings(on(SHARE))
        .scale_embeddings(on(SCALE_EMBEDDINGS))
        .embedding_norm(on(EMBEDDING_NORM))
        .tie_output(on(TIE))
        .biases(biases_from_word(w[11]))
        .attention_scale(scale_from_words([w[15], w[16]])?)
        .relative_attention(relative_from_words([w[17], w[18], w[19]])?)
        .build()?;
    Ok(config)
}

/// Refuses unknown flags (word 10) and biases (word 11), and reserved words (28–31) not zero.
fn check_unused_bits(w: &[u32; CONFIG_WORDS]) -> Result<(), ImageError> {
    if w[10] & !ALL_FLAGS != 0 {
        return Err(ImageError::ConfigField("flags"));
    }
    if w[11] & !31 != 0 {
        return Err(ImageError::ConfigField("biases"));
    }
    if w[28..].iter().any(|&x| x != 0) {
        return Err(ImageError::ConfigField("reserved"));
    }
    Ok(())
}

/// Words 0–9.
fn sizes_from_words(w: &[u32; CONFIG_WORDS]) -> Sizes {
    let size = |i: usize| w[i] as usize;
    Sizes {
        d_model: size(0),
        heads: size(1),
        encoder_layers: size(2),
        decoder_layers: size(3),
        d_ff: size(4),
        src_vocab: size(5),
        tgt_vocab: size(6),
        max_src_len: size(7),
        max_tgt_len: size(8),
        max_beam: size(9),
    }
}

/// Word 12.
fn activation_from_word(word: u32) -> Result<FfnActivation, ImageError> {
    match word {
        0 => Ok(FfnActivation::Relu),
        1 => Ok(FfnActivation::Gelu),
        2 => Ok(FfnActivation::GeluTanh),
        3 => Ok(FfnActivation::Silu),
        _ => Err(ImageError::ConfigField("activation")),
    }
}

/// Word 11, its unused bits already refused.
fn biases_from_word(word: u32) -> Biases {
    let bias = |b: u32| word & b != 0;
    Biases {
        attention_in: bias(1),
        attention_key: bias(2),
        attention_out: bias(4),
        ffn: bias(8),
        generator: bias(16),
    }
}

/// Words 13 and 14.
fn front_end_from_words(words: [u32; 2]) -> Result<FrontEnd, ImageError> {
    match words {
        [0, 0] => Ok(FrontEnd::Tokens),
        [1, n_mels] => Ok(FrontEnd::Conv {
            n_mels: n_mels as usize,
        }),
        _ => Err(ImageError::ConfigField("front_end")),
    }
}

/// Words 15 and 16.
fn scale_from_words(words: [u32; 2]) -> Result<Option<f32>, ImageError> {
    match words {
        [0, 0] => Ok(None),
        [1, bits] => Ok(Some(f32::from_bits(bits))),
        _ => Err(ImageError::ConfigField("attention_scale")),
    }
}

/// Words 17–19.
fn relative_from_words(words: [u32; 3]) -> Result<Option<RelativeAttention>, ImageError> {
    match words {
        [0, 0, 0] => Ok(None),
        [1, buckets, max_distance] => Ok(Some(RelativeAttention {
            buckets: buckets as usize,
            max_distance: max_distance as usize,
        })),
        _ => Err(ImageError::ConfigField("relative_attention")),
    }
}

/// `yes` when `flag` is set, else `no`.
fn either<T>(flag: bool, yes: T, no: T) -> T {
    if flag {
        yes
    } else {
        no
    }
}
