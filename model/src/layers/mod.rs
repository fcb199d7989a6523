//! The layers every encoder-decoder is assembled from, over the kernels' own types.
//!
//! | layer | file | holds |
//! |---|---|---|
//! | [`Linear`] | `linear.rs` | a weight packed once in its storage type, an optional bias |
//! | [`Norm`] | `norm.rs` | LayerNorm or RMSNorm parameters |
//! | [`Embedding`] | `embedding.rs` | a token table, positions, a scale, an optional norm |
//! | [`ConvStem`] | `conv_stem.rs` | Whisper's two convolutions over log-mel frames, positions |
//! | [`SelfAttention`], [`CrossAttention`] | `attention.rs` | fused projections, head layout |
//! | [`LocalAttention`] | `sparse.rs` | a local window and Longformer's global projections |
//! | [`TransientGlobal`] | `transient.rs` | LongT5's transient-global side keys: block size, aggregate norm |
//! | [`FeedForward`] | `feed_forward.rs` | up (and gate) projections, activation, down projection |
//! | [`RelativeBias`] | `relative_bias.rs` | T5's bucketed relative position bias, one per stack |
//! | [`Block`] | `block.rs` | one layer of either stack: self-attention, optional cross-attention, feed-forward, norms in pre or post placement |
//! | [`KvCache`], [`CrossKv`] | `kv_cache.rs` | the decoder's self-attention cache and the projected encoder memory |
//!
//! Every layer states what it needs from a session's arena for a given number of rows (its
//! working buffers and its kernels' scratch); [`crate::plan`] adds those statements up, so a
//! layer cannot be forgotten by the plan. Nothing here allocates when it runs.

mod attention;
mod block;
mod conv_stem;
mod embedding;
mod feed_forward;
mod groups;
mod kv_cache;
pub mod linear;
mod norm;
mod relative_bias;
mod sparse;
mod transient;

pub use attention::{CrossAttention, Heads, SelfAttention};
pub use block::{Block, BlockShape, LayerMemory, SelfMode, Work, WorkBuffers, WorkSizes};
pub use conv_stem::{ConvStem, StemSizes};
pub use embedding::{Embedding, EmbeddingTable};
pub use feed_forward::FeedForward;
pub use groups::{Group, StepBias};
pub use kv_cache::{
    CrossKv, CrossLayout, CrossMemory, KvCache, KvLayout, LayerCache, MemoryKv, MemoryType,
};
#[cfg(feature = "std")]
pub use linear::UnknownWeightType;
pub use linear::{Linear, LinearError, PackedWeight, WeightType};
pub use norm::Norm;
pub use relative_bias::RelativeBias;
pub use sparse::{GlobalProjections, LocalAttention};
pub use transient::{PassBiases, TransientBuffers, TransientGlobal};

use tessel_kernels::gemm::Parallel;
use tessel_kernels::Isa;

/// What every layer call runs with: the ISA level and the runner of the GEMMs' column blocks.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    /// The level the kernels run at.
    pub isa: Isa,
    /// Splits each GEMM's columns over the session's threads.
    pub parallel: &'a dyn Parallel,
}
