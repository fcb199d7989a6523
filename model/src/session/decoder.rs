//! A session's decoder calls: steps of one token per beam, forced prefixes, beam reordering,
//! and the regions a search works in.

use super::{check_tokens, Arena, ModelRef, RunError, Session};
use crate::config::StackKind;
use crate::forward::{self, Tokens};

impl<M: ModelRef, A: Arena> Session<M, A> {
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
        self.step(Tokens::Given(tokens), tokens.len())?;
        Ok(self.logits())
    }

    /// One decoder step for `rows` tokens (already validated), one per beam.
    pub(crate) fn step(&mut self, tokens: Tokens<'_>, rows: usize) -> Result<(), RunError> {
        self.decode((tokens, rows), forward::Rows::Beams)?;
        self.state.advance(1, rows, rows);
        Ok(())
    }

    /// One decoder pass over `rows` tokens (already validated), as `rows_are` says.
    fn decode(
        &mut self,
        (tokens, rows): (Tokens<'_>, usize),
        rows_are: forward::Rows,
    ) -> Result<(), RunError> {
        let group = self.state.group(0, rows)?;
        let (model, run, plan, arena, _) = self.pass();
        forward::decode(model, run, plan, arena, &[group], (tokens, rows_are))?;
        Ok(())
    }

    /// Logits of the last decoder step, one row per beam of that step (empty before any step
    /// since the last encode or reset; a later [`Session::reorder_beams`] does not move them).
    pub fn logits(&self) -> &[f32] {
        self.logits_rows(self.state.logits_rows)
    }

    /// The first `rows` rows of the logits region (of the last pass in any slot).
    pub(crate) fn logits_rows(&self, rows: usize) -> &[f32] {
        let vocab = self.model().config().tgt_vocab;
        &self.arena.as_ref()[self.plan.layout.regions.logits.range()][..rows * vocab]
    }

    /// Feeds a forced target prefix as one beam (BOS first when starting from scratch), in
    /// chunks of up to `max_src_len` rows: each chunk reads every weight once for all its
    /// tokens, with causal self-attention over the cache. Returns the logits after the last
    /// token (`1 × tgt_vocab`); decoding then continues with [`Session::decode_step`].
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<&[f32], RunError> {
        self.check_prefill(&self.state, tokens)?;
        let limits = self.plan.limits;
        for chunk in tokens.chunks(limits.max_src_len) {
            self.decode((Tokens::Given(chunk), chunk.len()), forward::Rows::Prefix)?;
            self.state.advance(chunk.len(), 1, 1);
        }
        Ok(self.logits())
    }

    /// A teacher-forced pass over `tokens` from the start (the decoder is reset first; its
    /// cache then holds them, as after [`Session::prefill`]), reporting what alignment needs:
    /// `on_logits(first, logits)` is called with the logits of every row, a few rows at a
    /// time in row order (`logits` is `rows × tgt_vocab`, starting at row `first`), and the
    /// returned slice holds, for each `(layer, head)` of `heads` in turn, the probabilities
    /// its cross-attention weighs the source with, `softmax(scale · q·kᵀ)` over the first
    /// `frames` source positions ([`crate::layers::Heads::probabilities`]), `tokens.len() ×
    /// frames` values row by row: `heads.len() × tokens.len() × frames` in all.
    ///
    /// The session must be created with room for `heads.len()` pairs
    /// ([`Session::with_alignment`]); `tokens` fit one pass (at most `max_tgt_len` and
    /// `max_src_len`); `frames` is 1 to the encoded length. Nothing is allocated.
    pub fn align(
        &mut self,
        tokens: &[u32],
        heads: &[(usize, usize)],
        frames: usize,
        mut on_logits: impl FnMut(usize, &[f32]),
    ) -> Result<&[f32], RunError> {
        self.check_align(&self.state, tokens, heads, frames)?;
        let mut state = self.state;
        let done = self.forced_pass((&mut state, 0), tokens, (heads, frames), &mut on_logits);
        self.state = state;
        done?;
        Ok(self.align_probs(heads.len() * tokens.len() * frames))
    }

    /// Checks a forced prefix of `tokens` as one beam continuing a decoder at `state`: encoded,
    /// at least one token, one beam held (or none decoded), within `max_tgt_len`, in the target
    /// vocabulary.
    pub(crate) fn check_prefill(
        &self,
        state: &forward::State,
        tokens: &[u32],
    ) -> Result<(), RunError> {
        state.src_len.ok_or(RunError::NotEncoded)?;
        let limits = self.plan.limits;
        if tokens.is_empty() {
            return Err(RunError::BadOption("prefill needs at least one token"));
        }
        if state.position > 0 && state.active != 1 {
            return Err(RunError::BeamCountMismatch {
                expected: state.active,
                got: 1,
            });
        }
        let len = state.position.saturating_add(tokens.len());
        if len > limits.max_tgt_len {
            return Err(RunError::TargetTooLong {
                len,
                max: limits.max_tgt_len,
            });
        }
        check_tokens("target", tokens, self.model().config().tgt_vocab)
    }

    /// Checks a forced pass ([`Session::align`]) of `tokens` over the source of a decoder at
    /// `state`, reporting `heads` over its first `frames` positions.
    pub(crate) fn check_align(
        &self,
        state: &forward::State,
        tokens: &[u32],
        heads: &[(usize, usize)],
        frames: usize,
    ) -> Result<(), RunError> {
        let src_len = state.src_len.ok_or(RunError::NotEncoded)?;
        let limits = self.plan.limits;
        let config = self.model().config();
        if tokens.is_empty() {
            return Err(RunError::BadOption(
                "a forced pass needs at least one token",
            ));
        }
        let max = limits.max_tgt_len.min(limits.max_src_len);
        if tokens.len() > max {
            return Err(RunError::TargetTooLong {
                len: tokens.len(),
                max,
            });
        }
        if heads.len() > self.plan.align_heads {
            return Err(RunError::BadOption(
                "more alignment heads than the session was created for",
            ));
        }
        if heads.iter().any(|&(layer, head)| {
            layer >= config.decoder_layers || head >= config.heads_in(StackKind::Decoder)
        }) {
            return Err(RunError::BadOption("alignment head outside the decoder"));
        }
        if frames == 0 || frames > src_len {
            return Err(RunError::BadOption(
                "alignment frames must be 1 to the encoded length",
            ));
        }
        check_tokens("target", tokens, config.tgt_vocab)
    }

    /// The forced pass of [`Session::align`] (checked by [`Session::check_align`]) in slot
    /// `slot`, whose decoder is `state`: resets it, runs the pass and leaves it after `tokens`
    /// (reset again if the pass fails). The probabilities are then [`Session::align_probs`].
    pub(crate) fn forced_pass(
        &mut self,
        (state, slot): (&mut forward::State, usize),
        tokens: &[u32],
        (heads, frames): (&[(usize, usize)], usize),
        on_logits: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<(), RunError> {
        state.reset_decoder();
        let group = state.group(slot, tokens.len())?;
        let (model, run, plan, arena, _) = self.pass();
        let outputs = forward::AlignOutputs {
            heads,
            frames,
            on_logits,
        };
        let done = forward::align(model, run, plan, arena, group, tokens, outputs);
        if let Err(e) = done {
            state.reset_decoder();
            return Err(e.into());
        }
        state.advance(tokens.len(), 1, 0);
        Ok(())
    }

    /// The first `len` values of the alignment probabilities region (of the last forced pass).
    pub(crate) fn align_probs(&self, len: usize) -> &[f32] {
        &self.arena.as_ref()[self.plan.layout.regions.align_probs.range()][..len]
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
        self.reorder(Tokens::Given(parents), parents.len(), &mut |_, _, _| None)
    }

    /// Reorders the cache by the `beams` `parents` (already validated), copying only the
    /// positions `differing` says a row does not yet share with its parent.
    pub(crate) fn reorder(
        &mut self,
        parents: Tokens<'_>,
        beams: usize,
        differing: &mut forward::Differing<'_>,
    ) -> Result<(), RunError> {
        let at = (0, self.state.position);
        let parents = (parents, beams);
        forward::reorder(&self.plan, self.arena.as_mut(), at, parents, differing)?;
        self.state.active = beams;
        Ok(())
    }

    /// The arena regions a search works in: the last logits, the staged tokens and parents of
    /// the next step, and the search state.
    pub(crate) fn search_buffers(&mut self) -> forward::SearchBuffers<'_> {
        let vocab = self.model().config().tgt_vocab;
        let rows = self.state.logits_rows;
        forward::search_buffers(&self.plan, self.arena.as_mut(), 0, (0, rows), vocab)
    }
}
