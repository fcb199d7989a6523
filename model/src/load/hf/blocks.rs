//! The block layout that Hugging Face's BART-derived models share (BART, mBART, Marian,
//! M2M100/NLLB, Whisper): `{stack}.layers.{i}.self_attn.{q,k,v,out}_proj`,
//! `self_attn_layer_norm`, the decoder's `encoder_attn.*` and `encoder_attn_layer_norm`,
//! `fc1`, `fc2`, `final_layer_norm`. Q, K and V are fused into one projection (the key's bias
//! zero where the family has none, as Whisper).

use serde::Deserialize;

use super::config_error;
use super::sublayers::{self, AttentionNames, FeedForwardNames};
#[cfg(doc)]
use crate::config::ConfigBuilder;
use crate::config::{Sizes, StackKind};
use crate::layers::{Block, SelfAttention};
use crate::load::{block, LoadError, Loader};

/// The sizes of the stacks in these families' `config.json`: the width, the layers, and
/// the heads and feed-forward widths that each stack states.
#[derive(Clone, Copy, Debug, Deserialize)]
pub(super) struct StackSizes {
    pub d_model: usize,
    pub encoder_layers: usize,
    pub decoder_layers: usize,
    pub encoder_attention_heads: usize,
    pub decoder_attention_heads: usize,
    pub encoder_ffn_dim: usize,
    pub decoder_ffn_dim: usize,
}

impl StackSizes {
    /// The [`Sizes`] of these stacks over `(source, target)` vocabularies, planned for
    /// `(source, target)` lengths and `max_beam` beams: the encoder's heads and feed-forward
    /// width (the decoder's are [`StackSizes::decoder_widths`]).
    pub(super) fn sizes(
        self,
        (src_vocab, tgt_vocab): (usize, usize),
        (max_src_len, max_tgt_len): (usize, usize),
        max_beam: usize,
    ) -> Sizes {
        Sizes {
            d_model: self.d_model,
            heads: self.encoder_attention_heads,
            encoder_layers: self.encoder_layers,
            decoder_layers: self.decoder_layers,
            d_ff: self.encoder_ffn_dim,
            src_vocab,
            tgt_vocab,
            max_src_len,
            max_tgt_len,
            max_beam,
        }
    }

    /// The decoder's heads and feed-forward width, for [`ConfigBuilder::decoder_widths`].
    pub(super) fn decoder_widths(self) -> (usize, usize) {
        (self.decoder_attention_heads, self.decoder_ffn_dim)
    }

    /// The stack sizes of a `config.json` (its other keys are the family's).
    pub(super) fn from_config(text: &str) -> Result<StackSizes, LoadError> {
        serde_json::from_str(text).map_err(config_error)
    }
}

/// The blocks `{stack}.layers.{i}` of the encoder, or of the decoder (with cross-attention):
/// `key_bias` says whether the key projections have biases.
pub(crate) fn blocks(
    l: &mut Loader<'_>,
    stack: &str,
    key_bias: bool,
    decoder: bool,
) -> Result<Vec<Block<'static>>, LoadError> {
    let layers = if decoder {
        l.config.decoder_layers
    } else {
        l.config.encoder_layers
    };
    (0..layers)
        .map(|i| layer(l, &format!("{stack}.layers.{i}"), key_bias, decoder))
        .collect()
}

/// The block `p`: self-attention, cross-attention when `cross`, feed-forward, each with its
/// norm.
fn layer(
    l: &mut Loader<'_>,
    p: &str,
    key_bias: bool,
    cross: bool,
) -> Result<Block<'static>, LoadError> {
    let stack = StackKind::decoder_if(cross);
    let names = AttentionNames::bart(key_bias);
    let attention = sublayers::self_attention(l, &format!("{p}.self_attn"), stack, names)?;
    layer_with(l, p, attention, (cross, key_bias))
}

/// The block `p` around its loaded self-attention `attention`: its norm, cross-attention when
/// `cross` (a decoder block; `key_bias` saying whether its key projection has a bias),
/// feed-forward and its norm.
pub(super) fn layer_with(
    l: &mut Loader<'_>,
    p: &str,
    attention: SelfAttention<'static>,
    (cross, key_bias): (bool, bool),
) -> Result<Block<'static>, LoadError> {
    let norm1 = l.norm(&format!("{p}.self_attn_layer_norm"))?;
    let cross = if cross {
        let names = AttentionNames::bart(key_bias);
        let layer = sublayers::cross_attention(l, &format!("{p}.encoder_attn"), names)?;
        Some((l.norm(&format!("{p}.encoder_attn_layer_norm"))?, layer))
    } else {
        None
    };
    let stack = StackKind::decoder_if(cross.is_some());
    let ffn = sublayers::feed_forward(l, p, stack, FeedForwardNames::BART)?;
    let norm = l.norm(&format!("{p}.final_layer_norm"))?;
    block(p, l.config.norm, (norm1, attention), cross, (norm, ffn))
}
