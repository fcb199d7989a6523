//! A session: one model's working state in one preallocated arena, and the calls that run it
//! (encode, decoder steps, forced prefixes, beam reordering; search is in [`crate::search`]).
//!
//! After the session is created nothing here allocates: every buffer is a region of the arena
//! the [`ArenaPlan`] sized from the config. A refused call changes nothing.

#[cfg(feature = "std")]
use std::sync::Arc;

use tessel_kernels::{Isa, KernelError};
use thiserror::Error;

#[cfg(feature = "std")]
use crate::aligned::AlignedBuf;
use crate::forward::{self, Tokens};
use crate::layers::Run;
use crate::model::Model;
use crate::plan::{ArenaPlan, Limits};
use crate::runner::Runner;
#[cfg(feature = "std")]
use crate::threads::{PoolError, ThreadPool};

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
    /// A host's buffer cannot hold the arena ([`buffer_bytes`]).
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

/// How a session holds its model: `&Model`, or (with `std`) `Arc<Model>`, `Rc<Model>`,
/// `Box<Model>`, whatever the lifetime of the model's tensors.
pub trait ModelRef {
    /// The model, its tensors seen for as long as the borrow of the handle.
    fn model(&self) -> &Model<'_>;
}

impl<'w> ModelRef for &Model<'w> {
    fn model(&self) -> &Model<'_> {
        self
    }
}

/// The owning pointers a host may keep a model in.
#[cfg(feature = "std")]
macro_rules! model_ref_for {
    ($($pointer:ident)::+) => {
        impl<'w> ModelRef for $($pointer)::+<Model<'w>> {
            fn model(&self) -> &Model<'_> {
                self
            }
        }
    };
}
#[cfg(feature = "std")]
model_ref_for!(std::sync::Arc);
#[cfg(feature = "std")]
model_ref_for!(std::rc::Rc);
#[cfg(feature = "std")]
model_ref_for!(Box);

/// Memory a session's arena can live in: its own `AlignedBuf` (the default, with `std`), or
/// `&mut [f32]` carved from a buffer the host provides ([`Session::in_buffer`]).
pub trait Arena: AsRef<[f32]> + AsMut<[f32]> {}

impl<A: AsRef<[f32]> + AsMut<[f32]>> Arena for A {}

/// The arena a session allocates for itself.
#[cfg(feature = "std")]
pub type OwnArena = AlignedBuf;
/// Without `std` a session's arena is always a host's buffer.
#[cfg(not(feature = "std"))]
pub type OwnArena = &'static mut [f32];

/// One model's working state: the arena, the encoded source and the decoder caches.
///
/// `M` is how the session holds its model ([`ModelRef`]): `&Model` (borrowed) or
/// `Arc<Model>` (owned and shared, for hosts that keep sessions without lifetimes), or any
/// other pointer to a [`Model`]. `A` is where its arena lives ([`Arena`]).
pub struct Session<M: ModelRef, A: Arena = OwnArena> {
    model: M,
    isa: Isa,
    plan: ArenaPlan,
    arena: A,
    runner: Runner,
    state: forward::State,
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

#[cfg(feature = "std")]
impl<M: ModelRef> Session<M> {
    /// A session over `model` running at `isa`, planned for the config's maximum lengths and
    /// beam: plans and allocates the whole arena, once.
    pub fn new(model: M, isa: Isa) -> Result<Session<M>, SessionError> {
        let limits = Limits::of(model.model().config());
        Session::with_limits(model, isa, limits)
    }

    /// A session planned for `limits` (each at most the config's maximum): a smaller arena for
    /// hosts that know their lengths.
    pub fn with_limits(model: M, isa: Isa, limits: Limits) -> Result<Session<M>, SessionError> {
        let plan = ArenaPlan::with_limits(model.model().config(), limits)?;
        let pool = ThreadPool::new(limits.threads)?;
        let arena = AlignedBuf::zeros(plan.total_f32())
            .map_err(|e| SessionError::OutOfMemory { bytes: e.bytes })?;
        Ok(Session {
            model,
            isa,
            plan,
            arena,
            runner: Runner::Pool(Arc::new(pool)),
            state: forward::State::default(),
        })
    }
}

/// Bytes a buffer for [`Session::in_buffer`] needs for `plan`: the arena and up to 63 bytes
/// to reach a 64-byte boundary.
pub fn buffer_bytes(plan: &ArenaPlan) -> usize {
    plan.total_bytes() + crate::aligned::ALIGN_BYTES - 1
}

impl<'b, M: ModelRef> Session<M, &'b mut [f32]> {
    /// A session whose arena is carved from `buffer`, which the host provides (at least
    /// [`buffer_bytes`] of the plan for `limits`; any alignment): nothing is allocated and no
    /// thread is started. The part used is zeroed. GEMMs run on the calling thread whatever
    /// `limits.threads` says.
    pub fn in_buffer(
        model: M,
        isa: Isa,
        limits: Limits,
        buffer: &'b mut [u8],
    ) -> Result<Session<M, &'b mut [f32]>, SessionError> {
        let limits = limits.with_threads(1);
        let plan = ArenaPlan::with_limits(model.model().config(), limits)?;
        let align = crate::aligned::ALIGN_BYTES;
        let skip = (align - buffer.as_ptr() as usize % align) % align;
        let needed = plan.total_bytes();
        let got = buffer.len();
        let too_small = SessionError::BufferTooSmall {
            needed: buffer_bytes(&plan),
            got,
        };
        let bytes = buffer
            .get_mut(skip..)
            .and_then(|rest| rest.get_mut(..needed))
            .ok_or(too_small)?;
        bytes.fill(0);
        let arena: &'b mut [f32] = bytemuck::cast_slice_mut(bytes);
        Ok(Session {
            model,
            isa,
            plan,
            arena,
            runner: Runner::Serial,
            state: forward::State::default(),
        })
    }
}

impl<M: ModelRef, A: Arena> Session<M, A> {
    /// The lengths and beam width this session holds.
    pub fn limits(&self) -> Limits {
        self.plan.limits
    }

    /// The arena plan (named regions and sizes).
    pub fn plan(&self) -> &ArenaPlan {
        &self.plan
    }

    /// The ISA level this session runs at.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The model.
    pub fn model(&self) -> &Model<'_> {
        self.model.model()
    }

    /// Length of the encoded source, if any.
    pub fn source_len(&self) -> Option<usize> {
        self.state.src_len
    }

    /// Target positions decoded since the last encode or reset.
    pub fn position(&self) -> usize {
        self.state.position
    }

    /// Beams held by the self-attention cache.
    pub fn active_beams(&self) -> usize {
        self.state.active
    }

    /// Forgets the decoded positions (keeps the encoded source and its cross-attention K/V).
    pub fn reset_decoder(&mut self) {
        self.state.reset_decoder();
    }

    /// Runs the encoder over `src` and projects the cross-attention K/V of every decoder layer,
    /// once for all beams. Resets the decoder.
    pub fn encode(&mut self, src: &[u32]) -> Result<(), RunError> {
        if src.is_empty() {
            return Err(RunError::EmptySource);
        }
        let max = self.plan.limits.max_src_len;
        if src.len() > max {
            return Err(RunError::SourceTooLong {
                len: src.len(),
                max,
            });
        }
        if self.model().config().front_end.n_mels().is_some() {
            return Err(RunError::WrongInput {
                expected: "audio frames",
                got: "tokens",
            });
        }
        check_tokens("source", src, self.model().config().src_vocab)?;
        self.state = forward::State::default();
        let run = Run {
            isa: self.isa,
            parallel: self.runner.parallel(),
        };
        forward::encode(
            self.model.model(),
            run,
            &self.plan,
            self.arena.as_mut(),
            src,
        )?;
        self.state.src_len = Some(src.len());
        Ok(())
    }

    /// Runs a convolutional front end (Whisper) over log-mel features `mel`, laid out
    /// `n_mels × frames` (bin-major, as Whisper's log-mel spectrogram), then the encoder, and
    /// projects the cross-attention K/V of every decoder layer once for all beams. `frames`
    /// must be even and at most `2 · max_src_len`. Resets the decoder.
    pub fn encode_audio(&mut self, mel: &[f32]) -> Result<(), RunError> {
        let Some(n_mels) = self.model().config().front_end.n_mels() else {
            return Err(RunError::WrongInput {
                expected: "tokens",
                got: "audio frames",
            });
        };
        let max_frames = 2 * self.plan.limits.max_src_len;
        let frames = mel.len() / n_mels;
        if mel.is_empty()
            || !mel.len().is_multiple_of(n_mels)
            || !frames.is_multiple_of(2)
            || frames > max_frames
        {
            return Err(RunError::BadFrames {
                len: mel.len(),
                n_mels,
                max_frames,
            });
        }
        self.state = forward::State::default();
        let run = Run {
            isa: self.isa,
            parallel: self.runner.parallel(),
        };
        forward::encode_audio(
            self.model.model(),
            run,
            &self.plan,
            self.arena.as_mut(),
            mel,
            frames,
        )?;
        self.state.src_len = Some(frames / 2);
        Ok(())
    }

    fn encoded(&self) -> Result<usize, RunError> {
        self.state.src_len.ok_or(RunError::NotEncoded)
    }

    /// Checks a decoder step of one token per beam against the session state.
    fn check_step(&self, tokens: &[u32]) -> Result<(), RunError> {
        self.encoded()?;
        let rows = tokens.len();
        let limits = self.plan.limits;
        if rows == 0 || rows > limits.max_beam {
            return Err(RunError::BadBeam {
                beam: rows,
                max: limits.max_beam,
            });
        }
        if self.state.position > 0 && rows != self.state.active {
            return Err(RunError::BeamCountMismatch {
                expected: self.state.active,
                got: rows,
            });
        }
        if self.state.position >= limits.max_tgt_len {
            return Err(RunError::TargetTooLong {
                len: self.state.position + 1,
                max: limits.max_tgt_len,
            });
        }
        check_tokens("target", tokens, self.model().config().tgt_vocab)
    }

    /// Decodes one position for each beam: row `i` of the cache continues with `tokens[i]`.
    /// Returns the logits, `tokens.len() × tgt_vocab`. The first step after encode (or
    /// [`Session::reset_decoder`]) sets the number of beams; later steps must keep it (use
    /// [`Session::reorder_beams`] to change which history each row continues).
    pub fn decode_step(&mut self, tokens: &[u32]) -> Result<&[f32], RunError> {
        self.check_step(tokens)?;
        self.step(Tokens::Given(tokens))?;
        Ok(self.logits())
    }

    /// One decoder step for the tokens (already validated), one per beam.
    pub(crate) fn step(&mut self, tokens: Tokens<'_>) -> Result<(), RunError> {
        let run = Run {
            isa: self.isa,
            parallel: self.runner.parallel(),
        };
        let rows = tokens.len();
        forward::decode(
            self.model.model(),
            run,
            &self.plan,
            self.arena.as_mut(),
            &self.state,
            tokens,
            forward::Rows::Beams,
        )?;
        self.state.advance(1, rows, rows);
        Ok(())
    }

    /// Logits of the last decoder step, one row per beam of that step (empty before any step
    /// since the last encode or reset; a later [`Session::reorder_beams`] does not move them).
    pub fn logits(&self) -> &[f32] {
        let vocab = self.model().config().tgt_vocab;
        &self.arena.as_ref()[self.plan.layout.logits.range()][..self.state.logits_rows * vocab]
    }

    /// Feeds a forced target prefix as one beam (BOS first when starting from scratch), in
    /// chunks of up to `max_src_len` rows: each chunk reads every weight once for all its
    /// tokens, with causal self-attention over the cache. Returns the logits after the last
    /// token (`1 × tgt_vocab`); decoding then continues with [`Session::decode_step`].
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<&[f32], RunError> {
        self.encoded()?;
        let limits = self.plan.limits;
        if tokens.is_empty() {
            return Err(RunError::BadOption("prefill needs at least one token"));
        }
        if self.state.position > 0 && self.state.active != 1 {
            return Err(RunError::BeamCountMismatch {
                expected: self.state.active,
                got: 1,
            });
        }
        let len = self.state.position.saturating_add(tokens.len());
        if len > limits.max_tgt_len {
            return Err(RunError::TargetTooLong {
                len,
                max: limits.max_tgt_len,
            });
        }
        check_tokens("target", tokens, self.model().config().tgt_vocab)?;
        for chunk in tokens.chunks(limits.max_src_len) {
            let run = Run {
                isa: self.isa,
                parallel: self.runner.parallel(),
            };
            forward::decode(
                self.model.model(),
                run,
                &self.plan,
                self.arena.as_mut(),
                &self.state,
                Tokens::Given(chunk),
                forward::Rows::Prefix,
            )?;
            self.state.advance(chunk.len(), 1, 1);
        }
        Ok(self.logits())
    }

    /// Makes beam `i` continue the history of beam `parents[i]` (the number of beams becomes
    /// `parents.len()`), by copying cache rows within the arena.
    pub fn reorder_beams(&mut self, parents: &[u32]) -> Result<(), RunError> {
        let max = self.plan.limits.max_beam;
        if parents.is_empty() || parents.len() > max {
            return Err(RunError::BadBeam {
                beam: parents.len(),
                max,
            });
        }
        self.encoded()?;
        let active = self.state.active;
        if let Some(&parent) = parents.iter().find(|&&p| p as usize >= active) {
            return Err(RunError::BadParent { parent, active });
        }
        self.reorder(Tokens::Given(parents));
        Ok(())
    }

    /// Reorders the cache by `parents` (already validated).
    pub(crate) fn reorder(&mut self, parents: Tokens<'_>) {
        let beams = parents.len();
        forward::reorder(
            &self.plan,
            self.arena.as_mut(),
            self.state.position,
            parents,
        );
        self.state.active = beams;
    }

    /// The arena regions a search works in: the last logits, the staged tokens and parents of
    /// the next step, and the search state.
    pub(crate) fn search_buffers(&mut self) -> forward::SearchBuffers<'_> {
        let vocab = self.model().config().tgt_vocab;
        let rows = self.state.logits_rows;
        forward::search_buffers(&self.plan, self.arena.as_mut(), rows * vocab)
    }
}
