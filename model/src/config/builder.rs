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

impl ConfigBuilder {
    /// A builder that starts from `config` ([`Config::builder`]).
    pub(super) fn new(config: Config) -> ConfigBuilder {
        ConfigBuilder { config }
    }

    /// Width of one head when it is not `d_model / heads` ([`Config::d_head`]).
    pub fn head_width(mut self, d_head: Option<usize>) -> ConfigBuilder {
        self.config.d_head = d_head;
        self
    }

    /// The decoder's attention heads and feed-forward width, where they differ from the
    /// encoder's (the sizes' `heads` and `d_ff`); equal ones leave the config as it was.
    pub fn decoder_widths(mut self, heads: usize, d_ff: usize) -> ConfigBuilder {
        self.config.decoder_heads = (heads != self.config.heads).then_some(heads);
        self.config.decoder_d_ff = (d_ff != self.config.d_ff).then_some(d_ff);
        self
    }

    /// Where the norms sit in each layer, and whether final norms follow both stacks.
    pub fn norms(mut self, placement: NormPlacement, final_norm: bool) -> ConfigBuilder {
        self.config.norm = placement;
        self.config.final_norm = final_norm;
        self
    }

    /// Which normalisation every norm is, and its epsilon.
    pub fn norm_kind(mut self, kind: NormKind, eps: f32) -> ConfigBuilder {
        self.config.norm_kind = kind;
        self.config.layer_norm_eps = eps;
        self
    }

    /// The feed-forward's activation, and whether it is gated.
    pub fn feed_forward(mut self, activation: FfnActivation, gated: bool) -> ConfigBuilder {
        self.config.activation = activation;
        self.config.gated_ffn = gated;
        self
    }

    /// How positions are encoded, and the rows of their tables skipped before position 0.
    pub fn positions(mut self, positions: Positions, offset: usize) -> ConfigBuilder {
        self.config.positions = positions;
        self.config.position_offset = offset;
        self
    }

    /// What the encoder reads.
    pub fn front_end(mut self, front_end: FrontEnd) -> ConfigBuilder {
        self.config.front_end = front_end;
        self
    }

    /// Whether one embedding table serves both stacks.
    pub fn share_embeddings(mut self, shared: bool) -> ConfigBuilder {
        self.config.share_embeddings = shared;
        self
    }

    /// Whether embeddings are multiplied by `√d_model`.
    pub fn scale_embeddings(mut self, scaled: bool) -> ConfigBuilder {
        self.config.scale_embeddings = scaled;
        self
    }

    /// Whether a norm follows the embeddings.
    pub fn embedding_norm(mut self, norm: bool) -> ConfigBuilder {
        self.config.embedding_norm = norm;
        self
    }

    /// Whether the output projection is the target embedding (transposed).
    pub fn tie_output(mut self, tied: bool) -> ConfigBuilder {
        self.config.tie_output = tied;
        self
    }

    /// Which projections carry biases.
    pub fn biases(mut self, biases: Biases) -> ConfigBuilder {
        self.config.biases = biases;
        self
    }

    /// The attention score scale; `None` is `1/√d_head`.
    pub fn attention_scale(mut self, scale: Option<f32>) -> ConfigBuilder {
        self.config.attention_scale = scale;
        self
    }

    /// Relative position buckets as an attention bias; `None`: no bias.
    pub fn relative_attention(mut self, relative: Option<RelativeAttention>) -> ConfigBuilder {
        self.config.relative_attention = relative;
        self
    }

    /// The config, validated ([`Config::validate`]).
    pub fn build(self) -> Result<Config, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}
