//! [`ConfigBuilder`]: a [`Config`] built by concern.

use super::{
    Biases, Config, ConfigError, FfnActivation, FrontEnd, NormKind, NormPlacement, Positions,
    RelativeAttention,
};

/// A [`Config`] built by concern from [`Config::new`]'s architecture ([`Config::builder`]):
/// each method sets one part of the graph, what no method sets keeps `nn.Transformer`'s
/// choice, and [`ConfigBuilder::build`] validates the whole.
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub struct ConfigBuilder {
    config: Config,
}

/// Builder methods that each set fields of the config from their arguments:
/// `name(arg: Type => field, …);` sets `field` to `arg`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty => $field:ident),+);)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $($arg: $ty),+) -> ConfigBuilder {
                $(self.config.$field = $arg;)+
                self
            }
        )*
    };
}

impl ConfigBuilder {
    /// A builder that starts from `config` ([`Config::builder`]).
    pub(super) fn new(config: Config) -> ConfigBuilder {
        ConfigBuilder { config }
    }

    setters! {
        /// Width of one head when it is not `d_model / heads` ([`Config::d_head`]).
        head_width(d_head: Option<usize> => d_head);
        /// Where the norms sit in each layer, and whether final norms follow both stacks.
        norms(placement: NormPlacement => norm, final_norm: bool => final_norm);
        /// Which normalisation every norm is, and its epsilon.
        norm_kind(kind: NormKind => norm_kind, eps: f32 => layer_norm_eps);
        /// The feed-forward's activation, and whether it is gated.
        feed_forward(activation: FfnActivation => activation, gated: bool => gated_ffn);
        /// How positions are encoded, and the rows of their tables skipped before position 0.
        positions(positions: Positions => positions, offset: usize => position_offset);
        /// What the encoder reads.
        front_end(front_end: FrontEnd => front_end);
        /// Whether one embedding table serves both stacks.
        share_embeddings(shared: bool => share_embeddings);
        /// Whether embeddings are multiplied by `√d_model`.
        scale_embeddings(scaled: bool => scale_embeddings);
        /// Whether a norm follows the embeddings.
        embedding_norm(norm: bool => embedding_norm);
        /// Whether the output projection is the target embedding (transposed).
        tie_output(tied: bool => tie_output);
        /// Which projections carry biases.
        biases(biases: Biases => biases);
        /// The attention score scale; `None` is `1/√d_head`.
        attention_scale(scale: Option<f32> => attention_scale);
        /// Relative position buckets as an attention bias; `None`: no bias.
        relative_attention(relative: Option<RelativeAttention> => relative_attention);
    }

    /// The decoder's attention heads and feed-forward width, where they differ from the
    /// encoder's (the sizes' `heads` and `d_ff`); equal ones leave the config as it was.
    pub fn decoder_widths(mut self, heads: usize, d_ff: usize) -> ConfigBuilder {
        self.config.decoder_heads = (heads != self.config.heads).then_some(heads);
        self.config.decoder_d_ff = (d_ff != self.config.d_ff).then_some(d_ff);
        self
    }

    /// The config, validated ([`Config::validate`]).
    pub fn build(self) -> Result<Config, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}
