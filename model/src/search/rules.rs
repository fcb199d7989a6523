//! Which candidates of a beam step live on and which finish, and when the search stops, under
//! tessel's, CTranslate2's and `transformers`' rules.

use super::options::{EarlyStopping, SearchOptions};
use super::state::{Candidate, State};

/// Which reference's beam search rules a search follows. Greedy search (one beam) is the same
/// under all three.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BeamRules {
    /// tessel's own: the first `beam` finished hypotheses, stop then.
    #[default]
    Plain,
    /// CTranslate2's beam search (`BeamSearch::search`, `translate_batch` with
    /// `num_hypotheses`): of the step's `2·beam` candidates, each of the best `beam` that ends
    /// (EOS, or any at the last step) is registered as finished and its place taken by the
    /// next candidate of the other `beam` that is not EOS. Registered hypotheses are ranked by
    /// normalised score and the best `num_hypotheses` returned. The search stops at the length
    /// limit, or with a length penalty of 0 once the best candidate of some step has ended and
    /// `num_hypotheses` are registered, or else once `beam` are. The first free step after
    /// `forced` forced steps (a target prefix, a forced BOS) finishes only on its best
    /// candidate: an EOS further down ends no hypothesis and takes its beam out of the search
    /// (CTranslate2 scores it -1e10).
    CTranslate2 {
        /// Hypotheses asked for (`num_hypotheses`), which its early exit waits for.
        num_hypotheses: usize,
        /// Steps forced by a target prefix before the first free one.
        forced: usize,
    },
    /// `transformers`' beam search: the logits processor gets each row's log-probabilities
    /// (`log_softmax` of the raw logits) and the search ranks what it leaves without
    /// normalising again; an EOS continuation finishes a hypothesis only when it ranks among
    /// the best `beam` of the step's `2·beam` candidates (lower ones are dropped), into the set
    /// of the best `beam` finished ones; the search stops as the [`EarlyStopping`] says (see
    /// the module documentation). Greedy search still hands the processor raw logits, as
    /// `transformers`' greedy search does.
    Transformers(EarlyStopping),
}

/// One beam step's candidates as the selection rules see them.
#[derive(Clone, Copy, Debug)]
pub(super) struct BeamStep {
    /// Beam width.
    pub(super) beam: usize,
    /// Hypotheses to finish before the search stops (`round(beam · patience)`).
    pub(super) needed: usize,
    /// Candidates, best first, in the state's `cand_*` lists.
    pub(super) count: usize,
    /// Step index; the candidates are the `step + 1`-th tokens.
    pub(super) step: usize,
    /// The history the live hypotheses are in.
    pub(super) cur: usize,
    /// Stride of the histories (the planned target length).
    pub(super) tgt: usize,
    /// The token that ends a hypothesis; `None` when EOS is an ordinary token.
    pub(super) eos: Option<u32>,
    /// Exponent of the length normalisation.
    pub(super) length_penalty: f32,
    /// Whether this is the last step the length limits allow.
    pub(super) last: bool,
}

impl BeamStep {
    pub(super) fn len(&self) -> usize {
        self.step + 1
    }
}

/// What a search has finished so far.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Tally {
    /// Finished hypotheses held.
    pub(super) finished: usize,
    /// Hypotheses that ended under CTranslate2's or tessel's rules (may exceed those held:
    /// only the best `beam` are kept).
    pub(super) registered: usize,
    /// Whether the best candidate of some step ended (CTranslate2's `top_beam_finished`).
    pub(super) top_finished: bool,
}

impl Tally {
    /// CTranslate2's stop before the length limit: with a length penalty of 0, once a step's
    /// best candidate has ended and `num_hypotheses` are registered; else once `needed`
    /// (`round(beam · patience)`) are.
    pub(super) fn ctranslate2_done(
        &self,
        needed: usize,
        num_hypotheses: usize,
        length_penalty: f32,
    ) -> bool {
        if length_penalty == 0.0 {
            self.top_finished && self.registered >= num_hypotheses
        } else {
            self.registered >= needed
        }
    }
}

impl State<'_> {
    fn is_eos(&self, at: &BeamStep, c: usize) -> bool {
        Some(self.cand_token[c]) == at.eos
    }

    /// Candidate `c` continues as live hypothesis `slot`.
    fn keep_candidate(
        &mut self,
        at: &BeamStep,
        c: usize,
        slot: usize,
        parents: &mut [u32],
        step_tokens: &mut [u32],
    ) {
        let Candidate { score, from, token } = self.candidate(c);
        self.keep(at.cur, at.step, slot, from, token, score, at.tgt);
        parents[slot] = from as u32;
        step_tokens[slot] = token;
    }

    /// Candidate `c` ends: offered to the best `beam` finished hypotheses.
    fn register(&mut self, at: &BeamStep, c: usize, tally: &mut Tally) {
        let Candidate { score, from, token } = self.candidate(c);
        let norm = normalise(score, at.len(), at.length_penalty);
        let (beam, cur, len, tgt) = (at.beam, at.cur, at.len(), at.tgt);
        self.offer_finished(&mut tally.finished, beam, cur, from, len, token, norm, tgt);
    }

    /// tessel's and `transformers`' selection: the best `beam` candidates that are not EOS
    /// live on. An EOS candidate finishes while fewer than `needed` have (tessel; the best
    /// `beam` of them are held), or, under
    /// `transformers`' rules, when it ranks among the best `beam`, where at the last step
    /// every such candidate ends. Returns the live hypotheses.
    pub(super) fn select_best(
        &mut self,
        at: &BeamStep,
        transformers: bool,
        tally: &mut Tally,
        parents: &mut [u32],
        step_tokens: &mut [u32],
    ) -> usize {
        let mut kept = 0;
        for c in 0..at.count {
            let at_eos = self.is_eos(at, c);
            if transformers && (at_eos || at.last) && c < at.beam {
                self.register(at, c, tally);
            }
            if at_eos {
                if !transformers && tally.registered < at.needed {
                    tally.registered += 1;
                    self.register(at, c, tally);
                }
            } else if kept < at.beam {
                self.keep_candidate(at, c, kept, parents, step_tokens);
                kept += 1;
            }
        }
        kept
    }

    /// CTranslate2's selection (`BeamSearch::search`): each of the best `beam` candidates
    /// that ends (EOS, any at the last step) is registered and its place taken by the next of
    /// the other candidates that is not EOS. At the first free step after a forced prefix an
    /// EOS below the best candidate neither ends nor lives (CTranslate2 scores it -1e10), and
    /// may be such a replacement. Returns the live hypotheses.
    pub(super) fn select_ctranslate2(
        &mut self,
        at: &BeamStep,
        first_free: bool,
        tally: &mut Tally,
        parents: &mut [u32],
        step_tokens: &mut [u32],
    ) -> usize {
        let dead = |st: &Self, c: usize| first_free && c > 0 && st.is_eos(at, c);
        let mut kept = 0;
        let mut secondary = at.beam;
        for slot in 0..at.count.min(at.beam) {
            let mut take = slot;
            if (self.is_eos(at, slot) && !dead(self, slot)) || at.last {
                tally.top_finished |= slot == 0;
                tally.registered += 1;
                self.register(at, slot, tally);
                let replacement =
                    (secondary..at.count).find(|&j| dead(self, j) || !self.is_eos(at, j));
                if let Some(j) = replacement {
                    take = j;
                    secondary = j + 1;
                }
            }
            if !at.last && !dead(self, take) {
                self.keep_candidate(at, take, kept, parents, step_tokens);
                kept += 1;
            }
        }
        kept
    }

    /// Whether a beam search under `transformers`' rules stops after a step that generated
    /// the `len`-th token, with `finished` hypotheses finished and the live ones' scores in
    /// `beam_score`, best first (`transformers`' `_beam_search_has_unfinished_sequences`).
    pub(super) fn transformers_done(
        &self,
        finished: usize,
        beam: usize,
        early_stopping: EarlyStopping,
        len: usize,
        options: &SearchOptions,
    ) -> bool {
        if finished < beam {
            return false;
        }
        let alpha = options.length_penalty;
        let horizon = match early_stopping {
            EarlyStopping::WhenFull => return true,
            EarlyStopping::Never if alpha > 0.0 => options.max_steps,
            EarlyStopping::Heuristic | EarlyStopping::Never => len,
        };
        let best_live = normalise(self.beam_score[0], horizon, alpha);
        let worst = self.finished_score[self.worst_finished(finished)];
        // `transformers` goes on while the best live hypothesis could still do better.
        best_live <= worst
    }
}

pub(super) fn normalise(score: f32, len: usize, alpha: f32) -> f32 {
    if alpha == 0.0 {
        score
    } else {
        score / libm::powf(len as f32, alpha)
    }
}
