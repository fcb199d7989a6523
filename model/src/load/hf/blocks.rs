//! The block layout that Hugging Face's BART-derived models share (BART, mBART, Marian,
//! M2M100/NLLB, Whisper): `{stack}.layers.{i}.self_attn.{q,k,v,out}_proj`,
//! `self_attn_layer_norm`, the decoder's `encoder_attn.*` and `encoder_attn_layer_norm`,
//! `fc1`, `fc2`, `final_layer_norm`. Q, K and V are fused into one projection (the key's bias
//! zero where the family has none, as Whisper).

use crate::layers::{Block, CrossAttention, FeedForward, SelfAttention};
use crate::load::{block, LoadError, Loader};

/// Maps a layer's refusal to a malformed-file error naming `prefix`.
pub(crate) fn malformed(prefix: &str) -> impl Fn(tessel_kernels::KernelError) -> LoadError + '_ {
    move |e| LoadError::Malformed(format!("{prefix}: {e}"))
}

pub(crate) fn self_attention(
    l: &mut Loader<'_>,
    p: &str,
    key_bias: bool,
) -> Result<SelfAttention<'static>, LoadError> {
    let (d, a) = (l.config.d_model, l.config.attention_width());
    let (q, k, v) = (
        format!("{p}.q_proj"),
        format!("{p}.k_proj"),
        format!("{p}.v_proj"),
    );
    let qkv = l.fused(&[&q, &k, &v], &[true, key_bias, true], a, d)?;
    let out = l.linear(&format!("{p}.out_proj"), d, a, true)?;
    SelfAttention::new(qkv, out, l.heads()).map_err(malformed(p))
}

fn cross_attention(
    l: &mut Loader<'_>,
    p: &str,
    key_bias: bool,
) -> Result<CrossAttention<'static>, LoadError> {
    let (d, a) = (l.config.d_model, l.config.attention_width());
    let q = l.linear(&format!("{p}.q_proj"), a, d, true)?;
    let (k, v) = (format!("{p}.k_proj"), format!("{p}.v_proj"));
    let kv = l.fused(&[&k, &v], &[key_bias, true], a, d)?;
    let out = l.linear(&format!("{p}.out_proj"), d, a, true)?;
    CrossAttention::new(q, kv, out, l.heads()).map_err(malformed(p))
}

fn feed_forward(l: &mut Loader<'_>, p: &str) -> Result<FeedForward<'static>, LoadError> {
    let (d, f) = (l.config.d_model, l.config.d_ff);
    let up = l.linear(&format!("{p}.fc1"), f, d, true)?;
    let down = l.linear(&format!("{p}.fc2"), d, f, true)?;
    FeedForward::new(up, down, l.config.activation.kernel()).map_err(malformed(p))
}

/// The encoder blocks `{stack}.layers.{i}`.
pub(crate) fn encoder_blocks(
    l: &mut Loader<'_>,
    stack: &str,
    key_bias: bool,
) -> Result<Vec<Block<'static>>, LoadError> {
    let mut blocks = Vec::with_capacity(l.config.encoder_layers);
    for i in 0..l.config.encoder_layers {
        let p = format!("{stack}.layers.{i}");
        let attention = self_attention(l, &format!("{p}.self_attn"), key_bias)?;
        let norm1 = l.norm(&format!("{p}.self_attn_layer_norm"))?;
        let ffn = feed_forward(l, &p)?;
        let norm2 = l.norm(&format!("{p}.final_layer_norm"))?;
        blocks.push(block(
            &p,
            l.config.norm,
            (norm1, attention),
            None,
            (norm2, ffn),
        )?);
    }
    Ok(blocks)
}

/// The decoder blocks `{stack}.layers.{i}`, with cross-attention.
pub(crate) fn decoder_blocks(
    l: &mut Loader<'_>,
    stack: &str,
    key_bias: bool,
) -> Result<Vec<Block<'static>>, LoadError> {
    let mut blocks = Vec::with_capacity(l.config.decoder_layers);
    for i in 0..l.config.decoder_layers {
        let p = format!("{stack}.layers.{i}");
        let attention = self_attention(l, &format!("{p}.self_attn"), key_bias)?;
        let norm1 = l.norm(&format!("{p}.self_attn_layer_norm"))?;
        let cross = cross_attention(l, &format!("{p}.encoder_attn"), key_bias)?;
        let norm2 = l.norm(&format!("{p}.encoder_attn_layer_norm"))?;
        let ffn = feed_forward(l, &p)?;
        let norm3 = l.norm(&format!("{p}.final_layer_norm"))?;
        let cross = Some((norm2, cross));
        blocks.push(block(
            &p,
            l.config.norm,
            (norm1, attention),
            cross,
            (norm3, ffn),
        )?);
    }
    Ok(blocks)
}
