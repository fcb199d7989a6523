//! Why a call on a session, or its creation, was refused.

use tessel_kernels::KernelError;
use thiserror::Error;

#[cfg(feature = "std")]
use crate::threads::PoolError;

/// Why a call on a session was refused. A refused call changes nothing: the session keeps its
/// state and stays usable.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum RunError {
    /// Empty source.
    #[error("the source is empty")]
    EmptySource,
    /// Source longer than `max_src_len`.
    #[error("source length {len} exceeds max_src_len {max}")]
    SourceTooLong {
        /// Given length.
        len: usize,
        /// Configured maximum.
        max: usize,
    },
    /// A token id outside its vocabulary.
    #[error("{side} token {token} is outside the vocabulary of {vocab}")]
    TokenOutOfRange {
        /// `source` or `target`.
        side: &'static str,
        /// The id.
        token: u32,
        /// Vocabulary size.
        vocab: usize,
    },
    /// The call gives the encoder another kind of input than the model reads.
    #[error("this model's encoder reads {expected}, not {got}")]
    WrongInput {
        /// What the model reads.
        expected: &'static str,
        /// What the call gave.
        got: &'static str,
    },
    /// Audio features that are not `n_mels ×` an even number of frames within the limit.
    #[error(
        "{len} feature values are not {n_mels} bins × an even number of frames up to {max_frames}"
    )]
    BadFrames {
        /// Values given.
        len: usize,
        /// Bins per frame.
        n_mels: usize,
        /// Most frames the session holds (twice `max_src_len`).
        max_frames: usize,
    },
    /// Decoding before any successful encode.
    #[error("decode called before encode")]
    NotEncoded,
    /// More beams than the plan holds, or none.
    #[error("beam width {beam} outside 1..={max}")]
    BadBeam {
        /// Requested width.
        beam: usize,
        /// `max_beam`.
        max: usize,
    },
    /// A batch slot that does not exist.
    #[error("slot {slot} outside the batch's {max} slots")]
    BadSlot {
        /// Requested slot.
        slot: usize,
        /// `max_batch`.
        max: usize,
    },
    /// More requests than a batch has slots.
    #[error("{requests} requests for a batch of {max} slots")]
    BatchTooLarge {
        /// Requests given.
        requests: usize,
        /// `max_batch`.
        max: usize,
    },
    /// The target would exceed `max_tgt_len` positions.
    #[error("target length {len} exceeds max_tgt_len {max}")]
    TargetTooLong {
        /// Positions requested.
        len: usize,
        /// Configured maximum.
        max: usize,
    },
    /// A step's row count differs from the beams in the cache.
    #[error("step has {got} rows but the cache holds {expected} beams")]
    BeamCountMismatch {
        /// Beams in the cache.
        expected: usize,
        /// Rows given.
        got: usize,
    },
    /// A parent index is not an active beam.
    #[error("parent {parent} is not one of the {active} active beams")]
    BadParent {
        /// The index.
        parent: u32,
        /// Active beams.
        active: usize,
    },
    /// After the logits processor (a step callback), no candidate of step `step` is finite:
    /// every logit is NaN or `-inf` (or the best is `+inf`), so nothing can be ranked.
    #[error("every logit is non-finite at step {step} (NaN or infinite: nothing left to rank)")]
    NonFiniteLogits {
        /// The step (0 after the prefix).
        step: usize,
    },
    /// A search option is invalid.
    #[error("invalid search option: {0}")]
    BadOption(&'static str),
    /// A kernel refused its arguments (an internal inconsistency; never expected).
    #[error("kernel error: {0}")]
    Kernel(#[from] KernelError),
}

/// Why a session could not be created.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum SessionError {
    /// The limits exceed the model's config (or are zero).
    #[error(transparent)]
    Limits(#[from] crate::config::ConfigError),
    /// The arena could not be allocated.
    #[error("cannot allocate the {bytes}-byte arena")]
    OutOfMemory {
        /// Arena size.
        bytes: usize,
    },
    /// A host's buffer cannot hold the arena ([`buffer_bytes`](super::buffer_bytes)).
    #[error("the buffer holds {got} bytes, the session needs {needed}")]
    BufferTooSmall {
        /// Bytes needed (the arena and alignment slack).
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// The worker threads could not be started (or the count is out of range).
    #[cfg(feature = "std")]
    #[error(transparent)]
    Threads(#[from] PoolError),
}

/// `TokenOutOfRange` for the first id of `tokens` at or above `vocab`.
pub(crate) fn check_tokens(
    side: &'static str,
    tokens: &[u32],
    vocab: usize,
) -> Result<(), RunError> {
    match tokens.iter().find(|&&t| t as usize >= vocab) {
        Some(&token) => Err(RunError::TokenOutOfRange { side, token, vocab }),
        None => Ok(()),
    }
}
