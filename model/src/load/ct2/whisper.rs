//! Builds Whisper from CTranslate2's `WhisperSpec` variables (what `ct2-transformers-converter`
//! writes for Whisper checkpoints, as faster-whisper loads them).
//!
//! The spec is `TransformerSpec`'s pre-norm encoder-decoder with a convolutional front end:
//! `encoder/conv1` and `encoder/conv2` (`[d, channels, 3]`), `encoder/position_encodings`
//! (the stored sinusoid), no source embedding; the decoder's `projection` is an alias of its
//! embedding. Q/K/V are fused as in tessel (the key's bias stored as zeros). The special tokens
//! come from the vocabulary (`<|startoftranscript|>`, `<|endoftext|>`); `config.json` holds
//! the reference's suppression lists, read by the transcription layer.

use crate::config::NormKind;
use std::collections::BTreeSet;
use std::sync::Arc;

use super::binary::ModelBin;
use super::spec::activation_of;
use super::transformer::Builder;
use super::vars::Vars;
use super::{Ct2Error, Ct2Options, Vocabulary};
use crate::config::{Biases, Config, FrontEnd, NormPlacement, Positions};
use crate::layers::{ConvStem, Embedding, Heads, Linear};
use crate::load::{block, linear_rows, LoadError};
use crate::model::{Model, Source, Stack};

/// The first decoder input of every Whisper prompt.
pub const START_OF_TRANSCRIPT: &str = "<|startoftranscript|>";
/// Whisper's end of text.
pub const END_OF_TEXT: &str = "<|endoftext|>";

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
    let storage = b.weights.unwrap_or(stored.weight_type()).for_conv_stem();
    let packed = match &stored {
        crate::load::source::Tensor::F32(w) => {
            crate::load::source::Tensor::F32(ConvStem::pack_weight(w, out, channels).into())
        }
        crate::load::source::Tensor::F16(w) => {
            crate::load::source::Tensor::F16(ConvStem::pack_weight(w, out, channels).into())
        }
        crate::load::source::Tensor::Bf16(w) => {
            crate::load::source::Tensor::Bf16(ConvStem::pack_weight(w, out, channels).into())
        }
    };
    Ok(linear_rows(
        &weight_name,
        &packed,
        0..out,
        3 * channels,
        Some(&bias),
        storage,
    )?)
}

/// Builds the tessel model of a `WhisperSpec` file.
pub fn build(
    file: &ModelBin<'_>,
    vocabulary: &Vocabulary,
    options: Ct2Options,
) -> Result<Model<'static>, Ct2Error> {
    let mut vars = Vars {
        file,
        used: BTreeSet::new(),
    };
    let vars = &mut vars;
    let conv1 = vars.shape("encoder/conv1/weight")?.to_vec();
    let [d, n_mels, 3] = conv1[..] else {
        return Err(Ct2Error::Shape {
            name: "encoder/conv1/weight".to_owned(),
            expected: vec![0, 0, 3],
            got: conv1,
        });
    };
    let tgt_vocab = vars
        .shape("decoder/embeddings/weight")?
        .first()
        .copied()
        .unwrap_or(0);
    if vocabulary.len() != tgt_vocab {
        return Err(Ct2Error::Vocabulary {
            path: "vocabulary".into(),
            reason: format!(
                "{} tokens, but the embeddings have {tgt_vocab} rows",
                vocabulary.len()
            ),
        });
    }
    let heads = vars
        .attribute("encoder", "num_heads")?
        .ok_or_else(|| Ct2Error::Missing("encoder/num_heads".to_owned()))? as usize;
    // The spec stores the decoder's activation only (both stacks use it; Whisper's is GELU).
    let id = vars.attribute("decoder", "activation")?.unwrap_or(3.0);
    let activation = activation_of(id, "decoder/activation")?;
    let count = |vars: &Vars<'_, '_>, side: &str| {
        (0..)
            .take_while(|i| vars.has(&format!("{side}/layer_{i}/ffn/linear_0/weight")))
            .count()
    };
    let (encoder_layers, decoder_layers) = (count(vars, "encoder"), count(vars, "decoder"));
    let d_ff = vars
        .shape("decoder/layer_0/ffn/linear_0/weight")?
        .first()
        .copied()
        .unwrap_or(0);
    let rows = |vars: &Vars<'_, '_>, name: &str| -> Result<usize, Ct2Error> {
        Ok(vars.shape(name)?.first().copied().unwrap_or(0))
    };
    let max_src_len = rows(vars, "encoder/position_encodings/encodings")?;
    let max_tgt_len = rows(vars, "decoder/position_encodings/encodings")?.min(options.max_tgt_len);
    let token = |t: &str| {
        vocabulary
            .id(t)
            .ok_or_else(|| Ct2Error::MissingToken(t.to_owned()))
    };
    // Attributes that do not change the computation.
    for (scope, name) in [
        ("decoder", "alibi"),
        ("decoder", "alibi_use_positive_positions"),
        ("decoder", "scale_alibi"),
        ("decoder", "alignment_layer"),
        ("decoder", "alignment_heads"),
        ("decoder", "start_from_zero_embedding"),
        ("decoder", "pre_norm"),
        ("decoder", "scale_embeddings"),
        ("decoder", "num_heads"),
    ] {
        vars.attribute(scope, name)?;
    }
    let config = Config {
        d_model: d,
        heads,
        d_head: None,
        encoder_layers,
        decoder_layers,
        d_ff,
        src_vocab: 1,
        tgt_vocab,
        share_embeddings: false,
        tie_output: true,
        // Whisper reads whole 30 s windows: the stored table's positions (1500), whatever
        // `options.max_src_len` says for translation models.
        max_src_len,
        max_tgt_len,
        max_beam: options.max_beam,
        norm: NormPlacement::Pre,
        final_norm: true,
        activation,
        positions: Positions::Learned,
        biases: Biases {
            attention_in: true,
            attention_key: false,
            attention_out: true,
            ffn: true,
            generator: false,
        },
        front_end: FrontEnd::Conv { n_mels },
        norm_kind: NormKind::Layer,
        gated_ffn: false,
        attention_scale: None,
        relative_attention: None,
        embedding_norm: false,
        position_offset: 0,
        scale_embeddings: false,
        layer_norm_eps: 1e-5,
        bos_id: token(START_OF_TRANSCRIPT)?,
        eos_id: token(END_OF_TEXT)?,
        pad_id: token(END_OF_TEXT)?,
    };
    config.validate().map_err(LoadError::from)?;
    let d_head = config.d_head();
    let mut b = Builder {
        vars,
        d,
        heads: Heads {
            heads,
            d_head,
            scale: tessel_kernels::attention::default_scale(d_head),
        },
        eps: Some(config.layer_norm_eps),
        weights: options.weights,
    };
    let conv1 = convolution(&mut b, "encoder/conv1", d, n_mels)?;
    let conv2 = convolution(&mut b, "encoder/conv2", d, d)?;
    let positions = b.positions("encoder", config.max_src_len)?;
    let stem = ConvStem::new(conv1, conv2, positions, n_mels)
        .map_err(|e| Builder::malformed("encoder/conv", e))?;
    let norm = config.norm;
    let encoder = b.each_layer(encoder_layers, |b, i| {
        let f = format!("encoder/layer_{i}");
        let attention = b.self_attention(&f)?;
        let ffn = b.feed_forward(&f, d_ff, activation)?;
        Ok(block(&f, norm, attention, None, ffn)?)
    })?;
    let decoder = b.each_layer(decoder_layers, |b, i| {
        let f = format!("decoder/layer_{i}");
        let attention = b.self_attention(&f)?;
        let cross = b.cross_attention(&f)?;
        let ffn = b.feed_forward(&f, d_ff, activation)?;
        Ok(block(&f, norm, attention, Some(cross), ffn)?)
    })?;
    let encoder_norm = b.norm("encoder/layer_norm")?;
    let decoder_norm = b.norm("decoder/layer_norm")?;
    let table = Arc::new(b.table("decoder/embeddings/weight", &[tgt_vocab, d])?);
    let target = Embedding::new(Arc::clone(&table), d, 1.0)
        .with_positions(b.positions("decoder", config.max_tgt_len)?, 0);
    b.vars.get("decoder/projection/weight");
    let name = "decoder/embeddings/weight";
    let generator = match b.stored_int8(name, tgt_vocab, d, None)? {
        Some(layer) => layer,
        None => {
            let stored = b.vars.stored(name, &[tgt_vocab, d])?;
            let storage = options.weights.unwrap_or(stored.weight_type());
            linear_rows(name, &stored, 0..tgt_vocab, d, None, storage)?
        }
    };
    let used = &b.vars.used;
    if let Some(unused) = file.variables.keys().find(|n| !used.contains(*n)) {
        return Err(Ct2Error::UnsupportedFeature {
            feature: "a variable tessel's Whisper does not use".to_owned(),
            variable: unused.clone(),
        });
    }
    Ok(Model::from_parts(
        config,
        Source::Audio(stem),
        target,
        (
            Stack::new(encoder, Some(encoder_norm)),
            Stack::new(decoder, Some(decoder_norm)),
        ),
        generator,
    ))
}
