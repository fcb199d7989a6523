//! A session: one model's working state in one preallocated arena, and the calls that run it
//! (encode here; decoder steps, forced prefixes and beam reordering in `decoder`; search is in
//! [`crate::search`]).
//!
//! After the session is created nothing here allocates: every buffer is a region of the arena
//! the [`ArenaPlan`] sized from the config. A refused call changes nothing.

mod decoder;
mod error;
mod holders;

#[cfg(feature = "std")]
use std::sync::Arc;

use tessel_kernels::Isa;

pub(crate) use error::check_tokens;
pub use error::{RunError, SessionError};
pub use holders::{Arena, ModelRef, OwnArena};

#[cfg(feature = "std")]
use crate::aligned::AlignedBuf;
use crate::forward;
use crate::layers::Run;
use crate::model::Model;
use crate::plan::{ArenaPlan, Limits};
use crate::runner::Runner;
#[cfg(feature = "std")]
use crate::threads::ThreadPool;

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
    /// Leading source tokens with global attention (Longformer encoders).
    global_tokens: usize,
}

#[cfg(feature = "std")]
impl<M: ModelRef> Session<M> {
    /// A session over `model` running at `isa`, planned for the config's maximum lengths and
    /// beam: plans and allocates the whole arena, once, and makes every page of it resident
    /// (later calls take no page fault in it).
    pub fn new(model: M, isa: Isa) -> Result<Session<M>, SessionError> {
        let limits = Limits::of(model.model().config());
        Session::with_limits(model, isa, limits)
    }

    /// A session planned for `limits` (each at most the config's maximum): a smaller arena for
    /// hosts that know their lengths.
    pub fn with_limits(model: M, isa: Isa, limits: Limits) -> Result<Session<M>, SessionError> {
        Session::with_alignment(model, isa, limits, 0)
    }

    /// A session planned for `limits` with room for the cross-attention probabilities of up to
    /// `heads` (layer, head) pairs ([`ArenaPlan::with_alignment`]), which
    /// [`Session::align`] reports; 0 plans none (as [`Session::with_limits`]).
    pub fn with_alignment(
        model: M,
        isa: Isa,
        limits: Limits,
        heads: usize,
    ) -> Result<Session<M>, SessionError> {
        let plan = ArenaPlan::with_alignment(model.model().config(), limits, heads)?;
        let pool = ThreadPool::new(limits.threads)?;
        let mut arena = AlignedBuf::zeros(plan.total_f32())
            .map_err(|e| SessionError::OutOfMemory { bytes: e.bytes })?;
        // Backed now: no call after this one takes a page fault in the arena.
        arena.make_resident();
        let runner = Runner::Pool(Arc::new(pool));
        Ok(Session::from_parts(model, isa, plan, arena, runner))
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
        Ok(Session::from_parts(model, isa, plan, arena, Runner::Serial))
    }
}

impl<M: ModelRef, A: Arena> Session<M, A> {
    /// A session over `arena`, planned as `plan`, whose GEMMs `runner` runs: its decoder at
    /// the start and the encoder's default global tokens.
    fn from_parts(model: M, isa: Isa, plan: ArenaPlan, arena: A, runner: Runner) -> Session<M, A> {
        let global_tokens = model.model().encoder().default_global_tokens();
        Session {
            model,
            isa,
            plan,
            arena,
            runner,
            state: forward::State::default(),
            global_tokens,
        }
    }

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

    /// What a forward pass runs on: the model, the threads at this session's ISA level, the
    /// plan, the arena and the decoder's state.
    pub(crate) fn pass(
        &mut self,
    ) -> (&Model<'_>, Run<'_>, &ArenaPlan, &mut [f32], &forward::State) {
        let run = self.runner.run(self.isa);
        let arena = self.arena.as_mut();
        (self.model.model(), run, &self.plan, arena, &self.state)
    }

    /// Gives the first `tokens` positions of every source encoded from now on global
    /// attention, in a Longformer encoder (LED): they attend to, and are attended by, every
    /// position. The default is the first token, as LED's model cards use it for
    /// summarisation; 0 leaves every token local. Models without global attention ignore it.
    pub fn set_global_tokens(&mut self, tokens: usize) {
        self.global_tokens = tokens;
    }

    /// Leading source positions given global attention ([`Session::set_global_tokens`]).
    pub fn global_tokens(&self) -> usize {
        self.global_tokens
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
        self.check_source(src)?;
        self.state = forward::State::default();
        let global = self.global_tokens;
        let (model, run, plan, arena, _) = self.pass();
        let mut group = [crate::layers::Group::default()];
        forward::encode(model, run, plan, arena, (&[(0, src)], global), &mut group)?;
        self.state.src_len = Some(src.len());
        Ok(())
    }

    /// Checks a source of token ids against the plan and the model.
    pub(crate) fn check_source(&self, src: &[u32]) -> Result<(), RunError> {
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
        check_tokens("source", src, self.model().config().src_vocab)
    }

    /// Runs a convolutional front end (Whisper) over log-mel features `mel`, laid out
    /// `n_mels × frames` (bin-major, as Whisper's log-mel spectrogram), then the encoder, and
    /// projects the cross-attention K/V of every decoder layer once for all beams. `frames`
    /// must be even and at most `2 · max_src_len`. Resets the decoder.
    pub fn encode_audio(&mut self, mel: &[f32]) -> Result<(), RunError> {
        self.encode_audio_staged(mel, || {})
    }

    /// As [`encode_audio`](Self::encode_audio), calling `encoded` once the encoder's output is
    /// complete and before the cross-attention K/V are projected, so that a caller can time
    /// the two apart (other engines, as CTranslate2, project them in the first decoder step).
    pub fn encode_audio_staged(
        &mut self,
        mel: &[f32],
        mut encoded: impl FnMut(),
    ) -> Result<(), RunError> {
        let frames = self.check_audio(mel)?;
        self.state = forward::State::default();
        self.encode_frames(0, (mel, frames), &mut encoded)?;
        self.state.src_len = Some(frames / 2);
        Ok(())
    }

    /// Checks log-mel features for [`Session::encode_audio`]: a model with an audio front end,
    /// and `n_mels ×` an even, non-zero number of frames, at most `2 · max_src_len`. Returns
    /// the frames.
    pub(crate) fn check_audio(&self, mel: &[f32]) -> Result<usize, RunError> {
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
        Ok(frames)
    }

    /// Runs the front end and the encoder over `frames` frames of `mel` (checked by
    /// [`Session::check_audio`]), calls `encoded`, and projects the cross-attention K/V into
    /// slot `slot`.
    pub(crate) fn encode_frames(
        &mut self,
        slot: usize,
        (mel, frames): (&[f32], usize),
        encoded: &mut dyn FnMut(),
    ) -> Result<(), RunError> {
        let (model, run, plan, arena, _) = self.pass();
        forward::encode_audio(model, run, (plan, slot), arena, (mel, frames), encoded)?;
        Ok(())
    }

    fn encoded(&self) -> Result<usize, RunError> {
        self.state.src_len.ok_or(RunError::NotEncoded)
    }
}
