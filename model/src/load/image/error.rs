//! Why an image was refused.

use super::names::TensorName;
use crate::config::ConfigError;

/// A malformed, truncated or foreign image, or host storage that cannot hold it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ImageError {
    /// Fewer bytes than the header or a part it points to needs.
    #[error("the image is truncated: {what} needs {needed} bytes, {got} are there")]
    Truncated {
        /// The part that does not fit.
        what: &'static str,
        /// Bytes it needs (up to its end).
        needed: u64,
        /// Bytes the image has.
        got: u64,
    },
    /// Not a tessel image.
    #[error("not a packed tessel model (bad magic)")]
    BadMagic,
    /// A format version this reader does not know.
    #[error("image format version {0} is not supported (expected 1)")]
    Version(u32),
    /// Written on a host of the other byte order, or read on a big-endian host.
    #[error("the image's byte order differs from this host's")]
    ByteOrder,
    /// The header's own fields disagree (sizes, offsets, the stated length).
    #[error("inconsistent header: {0}")]
    Header(&'static str),
    /// The config record does not describe a valid model.
    #[error("config record: {0}")]
    Config(#[from] ConfigError),
    /// A config record field holds a value outside its range.
    #[error("config record field `{0}` holds an unknown value")]
    ConfigField(&'static str),
    /// The directory has another number of slots than the config implies.
    #[error("the directory has {got} tensor records, the config implies {expected}")]
    SlotCount {
        /// Slots the config implies.
        expected: u64,
        /// Slots in the header.
        got: u64,
    },
    /// A tensor record that does not fit its slot.
    #[error("tensor record {slot}: {problem}")]
    Tensor {
        /// Index in the directory.
        slot: usize,
        /// What is wrong.
        problem: &'static str,
    },
    /// A float tensor (weights, biases, tables, int8 dequantisation factors) holds a NaN or
    /// an infinity.
    #[error("tensor {name} (record {slot}) holds a non-finite value (NaN or infinity)")]
    NonFinite {
        /// Index in the directory.
        slot: usize,
        /// What the slot holds.
        name: TensorName,
    },
    /// The image buffer does not start on a boundary its tensors can be read from in place.
    #[error("the image buffer is not {0}-byte aligned")]
    Misaligned(usize),
    /// The host's block storage has fewer slots than the model has blocks.
    #[error("the model has {needed} blocks, the block storage holds {got}")]
    BlockStorage {
        /// Blocks of both stacks.
        needed: usize,
        /// Slots given.
        got: usize,
    },
    /// The tensors do not assemble into layers (a width or head count disagrees).
    #[error("layer: {0}")]
    Layer(#[from] tessel_kernels::KernelError),
}
