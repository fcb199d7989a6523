//! A batch's calls on one slot that batched transcription needs (faster-whisper's
//! `BatchedInferencePipeline`): log-mel features encoded into a slot, a forced prompt fed to a
//! slot's decoder with the logits of its last token, and a slot's forced pass that reports
//! cross-attention probabilities (word timestamps).
//!
//! Each runs as the [`Session`] call of the same name runs on a session holding that slot's
//! source (the same validation and the same result, row for row: every pass here is one
//! sequence's alone), between the steps of the searches running in the other slots, whose
//! caches, memories and search state it leaves as they are. None of them runs on a slot whose
//! search is still running, and none allocates.

use super::{Batch, Slot};
#[cfg(doc)]
use crate::session::Session;
use crate::session::{ModelRef, RunError};

impl<M: ModelRef> Batch<M> {
    /// Runs the convolutional front end (Whisper) and the encoder over log-mel features `mel`
    /// (`n_mels × frames`, bin-major) into slot `slot`, as [`Session::encode_audio`]: the
    /// cross-attention K/V of every decoder layer are projected once for the slot's beams and
    /// whatever the slot held is forgotten (its decoder, and its last search's outcome).
    ///
    /// Refuses a slot out of range ([`RunError::BadSlot`]), a slot whose search is still
    /// running ([`RunError::BadOption`]), a model that reads tokens
    /// ([`RunError::WrongInput`]), and features that are not `n_mels ×` an even, non-zero
    /// number of frames up to `2 · max_src_len` ([`RunError::BadFrames`]); a refused call
    /// changes nothing.
    pub fn encode_audio(&mut self, slot: usize, mel: &[f32]) -> Result<(), RunError> {
        self.encode_audio_staged(slot, mel, || {})
    }

    /// As [`Batch::encode_audio`], calling `encoded` once the encoder's output is complete and
    /// before the cross-attention K/V are projected ([`Session::encode_audio_staged`]), so
    /// that a caller can time the two apart. Refuses what [`Batch::encode_audio`] refuses.
    pub fn encode_audio_staged(
        &mut self,
        slot: usize,
        mel: &[f32],
        mut encoded: impl FnMut(),
    ) -> Result<(), RunError> {
        self.check_idle(slot)?;
        let frames = self.session.check_audio(mel)?;
        self.slots[slot] = Slot::default();
        self.session
            .encode_frames(slot, (mel, frames), &mut encoded)?;
        self.slots[slot].state.src_len = Some(frames / 2);
        Ok(())
    }

    /// Resets slot `slot`'s decoder and feeds `tokens` as one beam over its source, as
    /// [`Session::prefill`] after [`Session::reset_decoder`] (in chunks of up to
    /// `max_src_len` rows). Returns the logits after the last token (`1 × tgt_vocab`),
    /// borrowed from the arena until the next call. The slot's cache then holds `tokens`; a
    /// later search on the slot starts from scratch (it resets the decoder).
    ///
    /// Refuses a slot out of range ([`RunError::BadSlot`]), a slot whose search is still
    /// running ([`RunError::BadOption`]), a slot without an encoded source
    /// ([`RunError::NotEncoded`]), no tokens ([`RunError::BadOption`]), more than
    /// `max_tgt_len` ([`RunError::TargetTooLong`]) and a token outside the target vocabulary
    /// ([`RunError::TokenOutOfRange`]); a refused call changes nothing.
    pub fn prefill(&mut self, slot: usize, tokens: &[u32]) -> Result<&[f32], RunError> {
        self.check_idle(slot)?;
        let mut state = self.slots[slot].state;
        state.reset_decoder();
        self.session.check_prefill(&state, tokens)?;
        self.slots[slot].state = state;
        self.feed_prefix(slot, tokens)?;
        Ok(self.session.logits_rows(1))
    }

    /// [`Session::align`] over slot `slot`'s source and cache: a teacher-forced pass over
    /// `tokens` from the start (the slot's decoder is reset first; its cache then holds them),
    /// calling `on_logits(first, logits)` with the logits of every row, a few rows at a time
    /// in row order, and returning, for each `(layer, head)` of `heads` in turn, its
    /// cross-attention probabilities over the first `frames` source positions,
    /// `heads.len() × tokens.len() × frames` values, borrowed from the arena until the next
    /// call.
    ///
    /// Refuses a slot out of range ([`RunError::BadSlot`]), a slot whose search is still
    /// running ([`RunError::BadOption`]), and what [`Session::align`] refuses: a slot without
    /// an encoded source, more heads than [`Batch::with_alignment`] planned room for (none
    /// after [`Batch::new`]) or heads outside the decoder, `frames` outside 1 to the slot's
    /// encoded length, no tokens, more than `max_tgt_len` or `max_src_len` of them, or one
    /// outside the target vocabulary; a refused call changes nothing.
    pub fn align(
        &mut self,
        slot: usize,
        tokens: &[u32],
        heads: &[(usize, usize)],
        frames: usize,
        mut on_logits: impl FnMut(usize, &[f32]),
    ) -> Result<&[f32], RunError> {
        self.check_idle(slot)?;
        let mut state = self.slots[slot].state;
        self.session.check_align(&state, tokens, heads, frames)?;
        let at = (&mut state, slot);
        let done = self
            .session
            .forced_pass(at, tokens, (heads, frames), &mut on_logits);
        self.slots[slot].state = state;
        done?;
        Ok(self
            .session
            .align_probs(heads.len() * tokens.len() * frames))
    }

    /// Refuses a slot out of range or one whose search is still running.
    fn check_idle(&self, slot: usize) -> Result<(), RunError> {
        let max = self.slots.len();
        if slot >= max {
            return Err(RunError::BadSlot { slot, max });
        }
        if self.running(slot) {
            return Err(RunError::BadOption("the slot's search is still running"));
        }
        Ok(())
    }
}
