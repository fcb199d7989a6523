//! The packed model image: one file holding a whole [`Model`], its GEMM weights already in the
//! kernels' panel layout, so a reader borrows every tensor straight from the bytes
//! ([`parse`], no allocation) and a host can run a model from `include_bytes!`.
//!
//! # Format (version 1, every integer little-endian)
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `TESSELPK` |
//! | 8..12 | format version (1) |
//! | 12..16 | `0x0102_0304`: a reader on a host of the other byte order sees it swapped |
//! | 16..20 | words of the config record ([`CONFIG_WORDS`]) |
//! | 20..24 | tensor records in the directory |
//! | 24..32 | byte offset of the directory |
//! | 32..40 | byte offset of the data |
//! | 40..48 | length of the whole image in bytes |
//! | 48..64 | zero |
//! | 64.. | the [`crate::Config`] as [`CONFIG_WORDS`] `u32` words ([`config_to_words`]) |
//! | directory | one 32-byte [`TensorRecord`] per tensor slot, in the canonical order below |
//! | data | tensors, each starting on a 64-byte boundary of the image |
//!
//! A record says the element type (`f32`, `f16`, `bf16`, `int8`), whether the tensor
//! is a packed GEMM weight (`k × n` in [`tessel_kernels::gemm::PackedB`]'s layout, or for int8
//! [`tessel_kernels::gemm::int8::PackedI8`]'s with its per-channel scales, each the same at
//! every ISA level) or a plain row-major table (`k` rows of `n`), where its bytes are,
//! flags (the bf16 dot-product mode) and one parameter (an embedding's scale, a norm's
//! epsilon, a position table's offset). Optional tensors (biases, LayerNorm's `β`, an
//! embedding norm, positions, a gate) have a slot whose record says absent, so the number of
//! slots follows from the config alone. Two slots may point at the same bytes (a table shared
//! by both embeddings).
//!
//! Canonical order: the source (token embedding: table, positions, norm `γ`, `β`; or the conv
//! stem: conv1 weight, bias, conv2 weight, bias, positions), the target embedding (4 slots),
//! the encoder and the decoder (per block: self-attention norm `γ β`, QKV weight and bias,
//! output weight and bias, cross-attention norm `γ β`, query, key/value, output (weight and
//! bias each), feed-forward norm `γ β`, up, gate, down (weight and bias each): 22 slots, the
//! cross-attention ones absent in the encoder; then the final norm `γ β` and the relative
//! position bias table), and the generator (weight, bias).
//!
//! The reader checks everything before it builds a layer: magic, version, byte order, the
//! config (validated as a loaded one is), the slot count, every record's kind, layout,
//! shape against the config, offset alignment, that its bytes lie inside the image, and that
//! every float value is finite (as the directory loaders check; an int8 weight's
//! dequantisation factors included); it returns an [`ImageError`] (a non-finite value names
//! its tensor, [`TensorName`]), never panics. Layers then re-check their own invariants (widths,
//! heads) as for any loader.

mod config_record;
mod error;
mod header;
mod names;
#[cfg(feature = "std")]
mod owned;
mod read;
mod record;
#[cfg(feature = "std")]
mod write;

pub use config_record::{config_from_words, config_to_words, CONFIG_WORDS};
pub use error::ImageError;
pub use header::{blocks_needed, ImageHeader};
pub use names::TensorName;
#[cfg(feature = "std")]
pub use owned::to_owned;
pub use read::parse;
pub use record::{Kind, Layout, TensorRecord, RECORD_BYTES};
#[cfg(feature = "std")]
pub use write::{load, write, PackError};

#[cfg(feature = "std")]
use crate::model::Model;

/// The first 8 bytes of every image.
pub const MAGIC: [u8; 8] = *b"TESSELPK";

/// The format version this crate writes and reads.
pub const VERSION: u32 = 1;

/// The byte-order marker, written little-endian.
pub const BYTE_ORDER_MARK: u32 = 0x0102_0304;

/// Bytes of the fixed header.
pub const HEADER_BYTES: usize = 64;

/// Alignment of every tensor's first byte, relative to the image's start (and the alignment
/// an image buffer must have for its tensors to be read in place).
pub const DATA_ALIGN: usize = 64;

/// Tensor slots of one block.
pub const BLOCK_SLOTS: usize = 22;

/// Memory an image can be embedded in with the alignment [`parse`] needs:
/// `static IMAGE: &Aligned<[u8]> = &Aligned(*include_bytes!("model.tessel"));`.
#[repr(C, align(64))]
pub struct Aligned<T: ?Sized>(pub T);

#[cfg(feature = "std")]
impl Model<'_> {
    /// The packed image of this model ([`write()`]).
    pub fn pack(&self) -> Result<Vec<u8>, PackError> {
        write(self)
    }
}
