//! The immutable, shareable model: embeddings, the encoder and decoder stacks of
//! [`Block`]s and the output projection, each layer holding its weights in their storage type.
//!
//! Built by the loaders ([`crate::load`]: Hugging Face, CTranslate2 and tessel's own
//! directories, packed images, seeded weights); run by [`crate::Session`]s, any number of them
//! at once.

use crate::config::Config;
use crate::layers::{Block, ConvStem, Embedding, Linear, Norm, RelativeBias};

/// What the encoder reads.
#[derive(Clone, Debug)]
pub enum Source<'w> {
    /// Token ids through an embedding.
    Tokens(Embedding<'w>),
    /// Log-mel frames through a convolutional stem.
    Audio(ConvStem<'w>),
}

/// The blocks of a stack: a list the model owns, or a slice in storage the host provides (a
/// model parsed from a packed image without an allocator).
#[derive(Clone, Debug)]
pub enum Blocks<'w> {
    /// Blocks in memory the host keeps alive for `'w`.
    Borrowed(&'w [Block<'w>]),
    /// Blocks the stack owns.
    #[cfg(feature = "std")]
    Owned(Vec<Block<'w>>),
}

impl<'w> Blocks<'w> {
    /// The blocks, first to last.
    pub fn as_slice(&self) -> &[Block<'w>] {
        match self {
            Blocks::Borrowed(blocks) => blocks,
            #[cfg(feature = "std")]
            Blocks::Owned(blocks) => blocks,
        }
    }
}

impl Source<'_> {
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
pub struct Stack<'w> {
    pub(crate) blocks: Blocks<'w>,
    pub(crate) final_norm: Option<Norm<'w>>,
    pub(crate) position_bias: Option<RelativeBias<'w>>,
    pub(crate) side_bias: Option<RelativeBias<'w>>,
}

impl<'w> Stack<'w> {
    /// A stack of `blocks` followed by `final_norm`.
    #[cfg(feature = "std")]
    pub fn new(blocks: Vec<Block<'w>>, final_norm: Option<Norm<'w>>) -> Stack<'w> {
        Stack::over(Blocks::Owned(blocks), final_norm)
    }

    /// A stack of `blocks`, owned or borrowed, followed by `final_norm`.
    pub fn over(blocks: Blocks<'w>, final_norm: Option<Norm<'w>>) -> Stack<'w> {
        Stack {
            blocks,
            final_norm,
            position_bias: None,
            side_bias: None,
        }
    }

    /// The same stack with a relative position bias on every block's self-attention.
    pub fn with_position_bias(mut self, bias: RelativeBias<'w>) -> Stack<'w> {
        self.position_bias = Some(bias);
        self
    }

    /// The same stack with LongT5's transient-global side bias (the bias of a side key by its
    /// block's distance to the query's block) on every block's self-attention.
    pub fn with_side_bias(mut self, bias: RelativeBias<'w>) -> Stack<'w> {
        self.side_bias = Some(bias);
        self
    }

    /// The transient-global side bias of the stack's self-attention, if any.
    pub fn side_bias(&self) -> Option<&RelativeBias<'w>> {
        self.side_bias.as_ref()
    }

    /// The blocks, first to last.
    pub fn blocks(&self) -> &[Block<'w>] {
        self.blocks.as_slice()
    }

    /// Leading source tokens a session gives global attention unless told otherwise: the
    /// first token when a block has Longformer's global projections (as LED's model cards
    /// use it), none otherwise.
    pub fn default_global_tokens(&self) -> usize {
        let global = self.blocks().iter().any(|b| {
            let (_, attention) = b.self_attention_layer();
            attention.local().is_some_and(|l| l.has_global())
        });
        usize::from(global)
    }

    /// The norm applied to the last block's output, if any.
    pub fn final_norm(&self) -> Option<&Norm<'w>> {
        self.final_norm.as_ref()
    }

    /// The relative position bias of the stack's self-attention, if any.
    pub fn position_bias(&self) -> Option<&RelativeBias<'w>> {
        self.position_bias.as_ref()
    }

    /// Bytes one pass reads (cross-attention memory projections excluded).
    pub fn step_bytes(&self) -> usize {
        self.blocks().iter().map(Block::step_bytes).sum::<usize>()
            + self.final_norm.as_ref().map_or(0, Norm::bytes)
            + self.position_bias.as_ref().map_or(0, RelativeBias::bytes)
            + self.side_bias.as_ref().map_or(0, RelativeBias::bytes)
    }
}

/// A loaded model: immutable, `Send + Sync`, shared by any number of [`crate::Session`]s.
///
/// `'w` is how long its borrowed tensors live: loaders build `Model<'static>` (every tensor
/// owned); a model parsed from a packed image ([`crate::load::image`]) borrows the image's bytes.
#[derive(Clone, Debug)]
pub struct Model<'w> {
    pub(crate) config: Config,
    pub(crate) source: Source<'w>,
    pub(crate) target: Embedding<'w>,
    pub(crate) encoder: Stack<'w>,
    pub(crate) decoder: Stack<'w>,
    pub(crate) generator: Linear<'w>,
}

impl<'w> Model<'w> {
    /// A model from its parts (the loaders' and the image reader's last step). With `std`, the
    /// packed weights it owns on small pages move into one buffer of huge pages (best effort:
    /// where the system has them), so a decode step streams them without a TLB miss every
    /// 4 KiB.
    pub fn from_parts(
        config: Config,
        source: Source<'w>,
        target: Embedding<'w>,
        (encoder, decoder): (Stack<'w>, Stack<'w>),
        generator: Linear<'w>,
    ) -> Model<'w> {
        #[cfg_attr(not(feature = "std"), allow(unused_mut))]
        let mut model = Model {
            config,
            source,
            target,
            encoder,
            decoder,
            generator,
        };
        #[cfg(feature = "std")]
        crate::storage::pool::pool_small_weights(model.linears_mut());
        model
    }

    /// Every linear layer the model owns, in the order its passes read them: the audio stem,
    /// the encoder's blocks, the decoder's, the output projection.
    #[cfg(feature = "std")]
    fn linears_mut(&mut self) -> Vec<&mut Linear<'w>> {
        let mut linears = Vec::new();
        if let Source::Audio(stem) = &mut self.source {
            linears.extend(stem.linears_mut());
        }
        for stack in [&mut self.encoder, &mut self.decoder] {
            if let Blocks::Owned(blocks) = &mut stack.blocks {
                for block in blocks {
                    linears.extend(block.linears_mut());
                }
            }
        }
        linears.push(&mut self.generator);
        linears
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What the encoder reads.
    pub fn source(&self) -> &Source<'w> {
        &self.source
    }

    /// The target embedding.
    pub fn target_embedding(&self) -> &Embedding<'w> {
        &self.target
    }

    /// The encoder stack.
    pub fn encoder(&self) -> &Stack<'w> {
        &self.encoder
    }

    /// The decoder stack.
    pub fn decoder(&self) -> &Stack<'w> {
        &self.decoder
    }

    /// The output projection to target logits.
    pub fn generator(&self) -> &Linear<'w> {
        &self.generator
    }

    /// Bytes of all weights as laid out in memory (a table shared by both embeddings counted
    /// once).
    pub fn weight_bytes(&self) -> usize {
        let shared = match &self.source {
            Source::Tokens(e) => e.table().same_as(self.target.table()),
            Source::Audio(_) => false,
        };
        let memory: usize = self
            .decoder
            .blocks()
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
