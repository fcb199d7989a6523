//! Builds Whisper from CTranslate2's `WhisperSpec` variables (what `ct2-transformers-converter`
//! writes for Whisper checkpoints, as faster-whisper loads them).
//!
//! The spec is `TransformerSpec`'s pre-norm encoder-decoder with a convolutional front end:
//! `encoder/conv1` and `encoder/conv2` (`[d, channels, 3]`), `encoder/position_encodings`
//! (the stored sinusoid), no source embedding; the decoder's `projection` is an alias of its
//! embedding. Q/K/V are fused as in tessel (the key's bias stored as zeros). The special tokens
//! come from the vocabulary (`<|startoftranscript|>`, `<|endoftext|>`); `config.json` holds
//! the reference's suppression lists, read by the transcription layer.

use std::sync::Arc;

use super::binary::{Dtype, ModelBin};
use super::spec::{activation_of, layer_count};
use super::transformer::Builder;
use super::vars::Vars;
use super::{Ct2Error, Ct2Options, Vocabulary};
use crate::config::{Config, Sizes, SpecialIds};
use crate::layers::{Block, ConvStem, Embedding, EmbeddingTable, Linear};
use crate::load::hf::whisper;
use crate::load::{conv_linear, LoadError};
use crate::model::{Model, Source, Stack};

/// The first decoder input of every Whisper prompt.
pub const START_OF_TRANSCRIPT: &str = "<|startoftranscript|>";
/// Whisper's end of text.
pub const END_OF_TEXT: &str = "<|endoftext|>";

/// Builds the tessel model of a `WhisperSpec` file.
pub fn build(
    file: &ModelBin<'_>,
    vocabulary: &Vocabulary,
    options: Ct2Options,
) -> Result<Model<'static>, Ct2Error> {
    let mut vars = Vars::new(file);
    let config = config(&mut vars, vocabulary, options)?;
    let eps = Some(config.layer_norm_eps);
    let mut b = Builder::new(&mut vars, &config, eps, options.weights);
    let stem = conv_stem(&mut b, &config)?;
    let encoder_blocks = blocks(&mut b, &config, "encoder")?;
    let decoder_blocks = blocks(&mut b, &config, "decoder")?;
    let encoder = Stack::new(encoder_blocks, Some(b.norm("encoder/layer_norm")?));
    let decoder = Stack::new(decoder_blocks, Some(b.norm("decoder/layer_norm")?));
    let (target, generator) = target_and_generator(&mut b, &config)?;
    vars.check_all_used("Whisper")?;
    Ok(Model::from_parts(
        config,
        Source::Audio(stem),
        target,
        (encoder, decoder),
        generator,
    ))
}

/// The tessel configuration: Whisper's graph ([`whisper::config`]) at the sizes of the
/// variables, its special ids from `vocabulary`.
fn config(
    vars: &mut Vars<'_, '_>,
    vocabulary: &Vocabulary,
    options: Ct2Options,
) -> Result<Config, Ct2Error> {
    let conv1 = vars.shape("encoder/conv1/weight")?.to_vec();
    let [d_model, n_mels, 3] = conv1[..] else {
        return Err(Ct2Error::Shape {
            name: "encoder/conv1/weight".to_owned(),
            expected: vec![0, 0, 3],
            got: conv1,
        });
    };
    let rows = |vars: &Vars<'_, '_>, name: &str| -> Result<usize, Ct2Error> {
        Ok(vars.shape(name)?.first().copied().unwrap_or(0))
    };
    let tgt_vocab = rows(vars, "decoder/embeddings/weight")?;
    check_vocabulary(vocabulary, tgt_vocab)?;
    let heads = vars
        .attribute("encoder", "num_heads")?
        .ok_or_else(|| Ct2Error::Missing("encoder/num_heads".to_owned()))? as usize;
    // The spec stores the decoder's activation only (both stacks use it; Whisper's is GELU).
    let id = vars.attribute("decoder", "activation")?.unwrap_or(3.0);
    let activation = activation_of(id, "decoder/activation")?;
    let sizes = Sizes {
        d_model,
        heads,
        encoder_layers: layer_count(vars, "encoder"),
        decoder_layers: layer_count(vars, "decoder"),
        d_ff: rows(vars, "decoder/layer_0/ffn/linear_0/weight")?,
        src_vocab: 1,
        tgt_vocab,
        // Whisper reads whole 30 s windows: the stored table's positions (1500), whatever
        // `options.max_src_len` says for translation models.
        max_src_len: rows(vars, "encoder/position_encodings/encodings")?,
        max_tgt_len: rows(vars, "decoder/position_encodings/encodings")?.min(options.max_tgt_len),
        max_beam: options.max_beam,
    };
    for (scope, name) in IGNORED {
        vars.attribute(scope, name)?;
    }
    let token = |t: &str| {
        vocabulary
            .id(t)
            .ok_or_else(|| Ct2Error::MissingToken(t.to_owned()))
    };
    let ids = SpecialIds {
        bos: token(START_OF_TRANSCRIPT)?,
        eos: token(END_OF_TEXT)?,
        pad: token(END_OF_TEXT)?,
    };
    let config = whisper::config(sizes, n_mels, activation, ids)
        .build()
        .map_err(LoadError::from)?;
    Ok(config)
}

/// Attributes of a `WhisperSpec` that do not change the computation.
const IGNORED: [(&str, &str); 9] = [
    ("decoder", "alibi"),
    ("decoder", "alibi_use_positive_positions"),
    ("decoder", "scale_alibi"),
    ("decoder", "alignment_layer"),
    ("decoder", "alignment_heads"),
    ("decoder", "start_from_zero_embedding"),
    ("decoder", "pre_norm"),
    ("decoder", "scale_embeddings"),
    ("decoder", "num_heads"),
];

/// Refuses a vocabulary whose size is not the embedding's `rows`.
fn check_vocabulary(vocabulary: &Vocabulary, rows: usize) -> Result<(), Ct2Error> {
    if vocabulary.len() == rows {
        return Ok(());
    }
    Err(Ct2Error::Vocabulary {
        path: "vocabulary".into(),
        reason: format!(
            "{} tokens, but the embeddings have {rows} rows",
            vocabulary.len()
        ),
    })
}

/// A convolution `{name}/weight` (`[out, channels, 3]`) as a linear layer over `(tap, channel)`.
fn convolution(
    b: &mut Builder<'_, '_, '_>,
    name: &str,
    out: usize,
    channels: usize,
) -> Result<Linear<'static>, Ct2Error> {
    let weight_name = format!("{name}/weight");
    let stored = b.vars.stored(&weight_name, &[out, channels, 3])?;
    let bias = b.vars.tensor(&format!("{name}/bias"), &[out])?;
    Ok(conv_linear(
        &weight_name,
        &stored,
        &bias,
        (out, channels),
        b.weights,
    )?)
}

/// The two convolutions and the encoder's stored positions.
fn conv_stem(b: &mut Builder<'_, '_, '_>, config: &Config) -> Result<ConvStem<'static>, Ct2Error> {
    let (d, n_mels) = (config.d_model, config.front_end.n_mels().unwrap_or(0));
    let conv1 = convolution(b, "encoder/conv1", d, n_mels)?;
    let conv2 = convolution(b, "encoder/conv2", d, d)?;
    let positions = b.positions("encoder", config.max_src_len)?;
    ConvStem::new(conv1, conv2, positions, n_mels)
        .map_err(|e| Builder::malformed("encoder/conv", e))
}

/// The blocks of `stack`, with cross-attention in the decoder.
fn blocks(
    b: &mut Builder<'_, '_, '_>,
    config: &Config,
    stack: &str,
) -> Result<Vec<Block<'static>>, Ct2Error> {
    let decoder = stack == "decoder";
    let layers = if decoder {
        config.decoder_layers
    } else {
        config.encoder_layers
    };
    b.each_layer(layers, |b, i| {
        let f = format!("{stack}/layer_{i}");
        b.block(&f, decoder, (config.d_ff, config.activation), config.norm)
    })
}

/// The target embedding with its stored positions, and the output projection: the same
/// table (`decoder/projection` is an alias of it), packed as stored (int8 kept). A `float16`
/// table stays `float16` in the embedding (its rows widened as they are read): read from the
/// projection's packed panels when the projection is `float16` too (the same values, so the
/// table takes no memory of its own), else copied as stored.
fn target_and_generator(
    b: &mut Builder<'_, '_, '_>,
    config: &Config,
) -> Result<(Embedding<'static>, Linear<'static>), Ct2Error> {
    let (d, vocab) = (config.d_model, config.tgt_vocab);
    let name = "decoder/embeddings/weight";
    b.vars.get("decoder/projection/weight");
    let mut generator = b.weight(name, vocab, d, None)?;
    let table = if b.vars.dtype(name) == Some(Dtype::F16) {
        let panels = generator
            .share_f16_panels()
            .map_err(|e| Builder::malformed(name, e))?;
        match panels {
            Some(panels) => EmbeddingTable::F16Panels(panels),
            None => EmbeddingTable::F16(b.vars.table_f16(name, &[vocab, d])?.into()),
        }
    } else {
        EmbeddingTable::F32(Arc::new(b.table(name, &[vocab, d])?).into())
    };
    let target = Embedding::with_table(table, d, 1.0)
        .with_positions(b.positions("decoder", config.max_tgt_len)?, 0);
    Ok((target, generator))
}
