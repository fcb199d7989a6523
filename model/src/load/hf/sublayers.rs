//! The attention and feed-forward layers of the Hugging Face families, built from a small
//! table of their tensor names: the BART-derived families and T5 store the same layers under
//! other names, with or without biases.

use crate::config::StackKind;
use crate::layers::{CrossAttention, FeedForward, Linear, SelfAttention};
use crate::load::{malformed, LoadError, Loader};

/// The names of an attention layer's query, key, value and output projections below its
/// prefix, and whether each has a bias.
#[derive(Clone, Copy, Debug)]
pub(super) struct AttentionNames {
    /// The projections' names, in the order query, key, value, output.
    pub names: [&'static str; 4],
    /// Whether each projection has a bias, in the same order.
    pub biases: [bool; 4],
}

impl AttentionNames {
    /// BART's `{q,k,v,out}_proj`, all with biases but the key's where `key_bias` is false.
    pub(super) const fn bart(key_bias: bool) -> AttentionNames {
        AttentionNames {
            names: ["q_proj", "k_proj", "v_proj", "out_proj"],
            biases: [true, key_bias, true, true],
        }
    }

    /// T5's `{q,k,v,o}`, no biases.
    pub(super) const T5: AttentionNames = AttentionNames {
        names: ["q", "k", "v", "o"],
        biases: [false; 4],
    };

    /// The four projections' full names below `p`.
    fn below(&self, p: &str) -> [String; 4] {
        self.names.map(|name| format!("{p}.{name}"))
    }
}

/// The names of a feed-forward's projections below its prefix, and whether they have biases.
#[derive(Clone, Copy, Debug)]
pub(super) struct FeedForwardNames {
    /// The input projection of the plain feed-forward.
    pub up: &'static str,
    /// The gate and input projections of the gated feed-forward, where the family has one
    /// (read when the config says the feed-forward is gated).
    pub gated: Option<[&'static str; 2]>,
    /// The output projection.
    pub down: &'static str,
    /// Whether the projections have biases.
    pub bias: bool,
}

impl FeedForwardNames {
    /// BART's `fc1` and `fc2`, with biases.
    pub(super) const BART: FeedForwardNames = FeedForwardNames {
        up: "fc1",
        gated: None,
        down: "fc2",
        bias: true,
    };

    /// T5's `wi` (gated: `wi_0`, `wi_1`) and `wo`, no biases.
    pub(super) const T5: FeedForwardNames = FeedForwardNames {
        up: "wi",
        gated: Some(["wi_0", "wi_1"]),
        down: "wo",
        bias: false,
    };
}

/// The fused Q/K/V projection and the output projection of the self-attention `p` of a block
/// of `stack`, named as `names` says.
pub(super) fn self_projections(
    l: &mut Loader<'_>,
    p: &str,
    stack: StackKind,
    names: AttentionNames,
) -> Result<(Linear<'static>, Linear<'static>), LoadError> {
    let (d, a) = (l.config.d_model, l.config.attention_width(stack));
    let [q, k, v, out] = names.below(p);
    let [qb, kb, vb, ob] = names.biases;
    let qkv = l.fused(&[&q, &k, &v], &[qb, kb, vb], a, d)?;
    let out = l.linear(&out, d, a, ob)?;
    Ok((qkv, out))
}

/// The self-attention `p` of a block of `stack`, named as `names` says.
pub(super) fn self_attention(
    l: &mut Loader<'_>,
    p: &str,
    stack: StackKind,
    names: AttentionNames,
) -> Result<SelfAttention<'static>, LoadError> {
    let (qkv, out) = self_projections(l, p, stack, names)?;
    SelfAttention::new(qkv, out, l.heads(stack)).map_err(malformed(p))
}

/// The cross-attention `p` of a decoder block, with the decoder's heads, named as `names`
/// says.
pub(super) fn cross_attention(
    l: &mut Loader<'_>,
    p: &str,
    names: AttentionNames,
) -> Result<CrossAttention<'static>, LoadError> {
    let decoder = StackKind::Decoder;
    let (d, a) = (l.config.d_model, l.config.attention_width(decoder));
    let [q, k, v, out] = names.below(p);
    let [qb, kb, vb, ob] = names.biases;
    let q = l.linear(&q, a, d, qb)?;
    let kv = l.fused(&[&k, &v], &[kb, vb], a, d)?;
    let out = l.linear(&out, d, a, ob)?;
    CrossAttention::new(q, kv, out, l.heads(decoder)).map_err(malformed(p))
}

/// The feed-forward `p` of a block of `stack`, named as `names` says: gated where the config
/// says so and the family has a gated layout.
pub(super) fn feed_forward(
    l: &mut Loader<'_>,
    p: &str,
    stack: StackKind,
    names: FeedForwardNames,
) -> Result<FeedForward<'static>, LoadError> {
    let (d, f) = (l.config.d_model, l.config.d_ff_in(stack));
    let activation = l.config.activation.kernel();
    let linear = |l: &mut Loader<'_>, name: &str, out: usize, inp: usize| {
        l.linear(&format!("{p}.{name}"), out, inp, names.bias)
    };
    let layer = match names.gated.filter(|_| l.config.gated_ffn) {
        Some([gate, up]) => {
            let gate = linear(l, gate, f, d)?;
            let up = linear(l, up, f, d)?;
            FeedForward::gated(gate, up, linear(l, names.down, d, f)?, activation)
        }
        None => {
            let up = linear(l, names.up, f, d)?;
            FeedForward::new(up, linear(l, names.down, d, f)?, activation)
        }
    };
    layer.map_err(malformed(p))
}
