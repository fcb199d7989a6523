//! The immutable, shareable model: embeddings, the encoder and decoder stacks of
//! [`Block`]s and the output projection, each layer holding its weights in their storage type.
//!
//! Built by the loaders ([`crate::weights`] for safetensors and seeded weights, [`crate::ct2`]
//! for CTranslate2 directories); run by [`crate::Session`]s, any number of them at once.

use crate::config::Config;
use crate::layers::{Block, ConvStem, Embedding, Linear, Norm, RelativeBias};

/// What the encoder reads.
#[derive(Clone, Debug)]
pub enum Source {
    /// Token ids through an embedding.
    Tokens(Embedding),
    /// Log-mel frames through a convolutional stem.
    Audio(ConvStem),
}

impl Source {
    /// Bytes of its weights and tables, the embedding table counted when `count_table`.
    fn bytes(&self, count_table: bool) -> usize {
        match self {
            Source::Tokens(embedding) => embedding.bytes(count_table),
            Source::Audio(stem) => stem.bytes(),
        }
    }
}

/// A stack of blocks, its optional final norm and its optional relative position bias
/// (shared by every block's self-attention).
#[derive(Clone, Debug)]
pub struct Stack {
    pub(crate) blocks: Vec<Block>,
    pub(crate) final_norm: Option<Norm>,
    pub(crate) position_bias: Option<RelativeBias>,
}

impl Stack {
    /// A stack of `blocks` followed by `final_norm`.
    pub fn new(blocks: Vec<Block>, final_norm: Option<Norm>) -> Stack {
        Stack {
            blocks,
            final_norm,
            position_bias: None,
        }
    }

    /// The same stack with a relative position bias on every block's self-attention.
    pub fn with_position_bias(mut self, bias: RelativeBias) -> Stack {
        self.position_bias = Some(bias);
        self
    }

    /// The blocks, first to last.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The norm applied to the last block's output, if any.
    pub fn final_norm(&self) -> Option<&Norm> {
        self.final_norm.as_ref()
    }

    /// Bytes one pass reads (cross-attention memory projections excluded).
    pub fn step_bytes(&self) -> usize {
        self.blocks.iter().map(Block::step_bytes).sum::<usize>()
            + self.final_norm.as_ref().map_or(0, Norm::bytes)
            + self.position_bias.as_ref().map_or(0, RelativeBias::bytes)
    }
}

/// A loaded model: immutable, `Send + Sync`, shared by any number of [`crate::Session`]s.
#[derive(Clone, Debug)]
pub struct Model {
    pub(crate) config: Config,
    pub(crate) source: Source,
    pub(crate) target: Embedding,
    pub(crate) encoder: Stack,
    pub(crate) decoder: Stack,
    pub(crate) generator: Linear,
}

impl Model {
    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What the encoder reads.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The target embedding.
    pub fn target_embedding(&self) -> &Embedding {
        &self.target
    }

    /// The encoder stack.
    pub fn encoder(&self) -> &Stack {
        &self.encoder
    }

    /// The decoder stack.
    pub fn decoder(&self) -> &Stack {
        &self.decoder
    }

    /// The output projection to target logits.
    pub fn generator(&self) -> &Linear {
        &self.generator
    }

    /// Bytes of all weights as laid out in memory (a table shared by both embeddings counted
    /// once).
    pub fn weight_bytes(&self) -> usize {
        let shared = match &self.source {
            Source::Tokens(e) => std::sync::Arc::ptr_eq(e.table(), self.target.table()),
            Source::Audio(_) => false,
        };
        let memory: usize = self
            .decoder
            .blocks
            .iter()
            .filter_map(Block::cross_attention)
            .map(|c| c.memory_bytes())
            .sum();
        self.encoder.step_bytes()
            + self.decoder.step_bytes()
            + memory
            + self.source.bytes(!shared)
            + self.target.bytes(true)
            + self.generator.bytes()
    }

    /// Bytes of the weights one decoder step reads: every decoder layer's weights except the
    /// cross-attention K/V projection (applied once per source), the final norm and the
    /// generator (plus one embedding and position row per beam, not counted).
    pub fn decode_step_weight_bytes(&self) -> usize {
        self.decoder.step_bytes() + self.generator.bytes()
    }
}
