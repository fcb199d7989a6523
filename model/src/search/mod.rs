//! Greedy and beam search over a session's decoder, with all state in the arena.
//!
//! Beam search keeps `beam` live hypotheses; at each step it takes the best `2·beam`
//! continuations (summed log-probabilities), moves those ending in EOS to the finished set
//! (score divided by `length^length_penalty`, length counting EOS) and keeps the best `beam`
//! others, reordering the self-attention cache rows in place. It stops when `beam` hypotheses
//! have finished (`round(beam · patience)` with a [`SearchOptions::patience`], the best `beam`
//! of them kept) or after `max_steps` tokens (live beams are then finished as they are).
//! Greedy search is the one-beam case without the log-softmax over the whole vocabulary.
//!
//! One call, [`Session::generate`], runs every search; its [`Request`] holds the
//! [`SearchOptions`], the forced start, the [`BeamRules`], the logits processor and the
//! per-step callback.
//!
//! Under `transformers`' rules ([`BeamRules::Transformers`]) the finished set is
//! `transformers`' beam hypotheses: each step, the candidates among the best `beam` that end
//! (EOS, or any token at the last step) are offered to a set of the `beam` best finished
//! hypotheses by normalised score, where a better one replaces the worst. When the search
//! stops is [`EarlyStopping`]: as soon as the set is full (`early_stopping=True`), or only when
//! the best live hypothesis, normalised as if it ended now (`False`) or, with a positive length
//! penalty, at the length limit (`"never"`), cannot beat the worst finished one
//! (`_check_early_stop_heuristic` in `transformers`' `generation/utils.py`); always at the
//! length limit. Under CTranslate2's rules ([`BeamRules::CTranslate2`]) every ending
//! candidate among the best `beam` is registered (possibly more than `beam` in all), the best
//! `num_hypotheses` are returned, and the search stops as its `BeamSearch` does.
//!
//! A step whose logits, after the logits processor, leave no finite candidate (every one NaN
//! or `-inf`, or a greedy best of `+inf`) ends the search with
//! [`RunError::NonFiniteLogits`](crate::RunError::NonFiniteLogits) instead of ranking garbage.
//!
//! Sampling ([`SearchOptions::sampling`], one beam only) draws each token from
//! `softmax(logits / T)` after the logits processors ran (see [`crate::sampling`]) instead of
//! taking the argmax. The hypothesis score is still the sum of the log-probabilities of the
//! chosen tokens under the *untempered* processed distribution, `log_softmax(logits)[token]`,
//! as openai-whisper accumulates `sum_logprobs` at every temperature (its fallback compares
//! `sum_logprobs / (len + 1)` against a threshold), then normalised as for greedy search.

mod options;
mod rules;
mod state;
mod step;
mod views;

#[cfg(feature = "std")]
pub use options::SlotRequests;
pub use options::{EarlyStopping, Request, SearchOptions, Unchanged, Unwatched};
pub use rules::BeamRules;
pub use views::{Hypotheses, Hypothesis, StepLogits, StepView};

use crate::forward::Tokens;
use crate::plan::Limits;
use crate::session::{check_tokens, Arena, ModelRef, RunError, Session};
use state::State;
pub(crate) use step::Next;
pub(crate) use step::Search;

/// Checks search options against the plan's limits.
pub(crate) fn check_search(options: &SearchOptions, limits: Limits) -> Result<(), RunError> {
    if options.beam == 0 || options.beam > limits.max_beam {
        return Err(RunError::BadBeam {
            beam: options.beam,
            max: limits.max_beam,
        });
    }
    if options.max_steps == 0 {
        return Err(RunError::BadOption("max_steps must be positive"));
    }
    if options.max_steps > limits.max_tgt_len {
        return Err(RunError::TargetTooLong {
            len: options.max_steps,
            max: limits.max_tgt_len,
        });
    }
    if !options.length_penalty.is_finite() {
        return Err(RunError::BadOption("length_penalty must be finite"));
    }
    if !(options.patience.is_finite() && options.patience > 0.0) {
        return Err(RunError::BadOption("patience must be positive and finite"));
    }
    if options.beam > 1 && options.finished_needed() == 0 {
        return Err(RunError::BadOption(
            "beam × patience must round to at least one hypothesis",
        ));
    }
    if let Some(sampling) = &options.sampling {
        if options.beam != 1 {
            return Err(RunError::BadOption("sampling needs beam 1"));
        }
        sampling.check().map_err(RunError::BadOption)?;
    }
    Ok(())
}

/// Checks what the rules take: `transformers` has no patience.
pub(crate) fn check_rules(options: &SearchOptions, rules: BeamRules) -> Result<(), RunError> {
    if matches!(rules, BeamRules::Transformers(_)) && options.beam > 1 && options.patience != 1.0 {
        return Err(RunError::BadOption(
            "transformers' beam search has no patience (it must be 1)",
        ));
    }
    Ok(())
}

/// Checks a forced start against the target vocabulary and the positions it leaves.
pub(crate) fn check_prefix(
    prefix: &[u32],
    options: &SearchOptions,
    limits: Limits,
    tgt_vocab: usize,
) -> Result<(), RunError> {
    if prefix.is_empty() {
        return Err(RunError::BadOption("the prefix needs at least one token"));
    }
    let positions = prefix.len() - 1 + options.max_steps;
    let max = limits.max_tgt_len;
    if positions > max {
        return Err(RunError::TargetTooLong {
            len: positions,
            max,
        });
    }
    check_tokens("target", prefix, tgt_vocab)
}

impl<M: ModelRef, A: Arena> Session<M, A> {
    /// Greedy or beam search over the encoded source as `request` says: from its prefix (or
    /// BOS), `process` editing and `on_step` seeing every step's logits, under its rules.
    /// Returns the finished hypotheses, best first (at most `beam`), borrowed from the arena
    /// until the next call on the session.
    pub fn generate<P, S>(&mut self, request: Request<'_, P, S>) -> Result<Hypotheses<'_>, RunError>
    where
        P: FnMut(&mut StepLogits<'_>),
        S: FnMut(StepView<'_>),
    {
        let Request {
            search: options,
            prefix,
            rules,
            mut process,
            mut on_step,
        } = request;
        let bos = [self.model().config().bos_id];
        let prefix = prefix.unwrap_or(&bos);
        self.run_search(prefix, &options, rules, |step| {
            process(step);
            on_step(step.view());
        })
    }

    /// The search loop: the prefix, then one decoder step per token until the rules stop.
    fn run_search(
        &mut self,
        prefix: &[u32],
        options: &SearchOptions,
        rules: BeamRules,
        mut process: impl FnMut(&mut StepLogits<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        self.source_len().ok_or(RunError::NotEncoded)?;
        check_search(options, self.limits())?;
        check_rules(options, rules)?;
        let config = self.model().config();
        check_prefix(prefix, options, self.limits(), config.tgt_vocab)?;
        let mut search = Search::new(options, rules, self.isa(), config, self.limits());
        self.reset_decoder();
        for step in 0..options.max_steps {
            if step == 0 {
                self.prefill(prefix)?;
            } else {
                self.step(Tokens::Staged, search.live())?;
            }
            match search.step(step, self.search_buffers(), &mut process)? {
                Next::Done => break,
                Next::Same => {}
                Next::Reordered(kept, lineage) => {
                    let beams = self.limits().max_beam;
                    let mut differing =
                        |search: &mut [f32], b, p| lineage.differing(search, beams, b, p);
                    self.reorder(Tokens::Staged, kept, &mut differing)?
                }
            }
        }
        Ok(self.finished(search.finished()))
    }

    /// The `count` finished hypotheses in the arena, sorted best first.
    fn finished(&mut self, count: usize) -> Hypotheses<'_> {
        let limits = self.limits();
        finished(self.search_buffers().search, limits, count)
    }
}

/// The `count` finished hypotheses of the search state `search`, sorted best first.
pub(crate) fn finished(search: &mut [f32], limits: Limits, count: usize) -> Hypotheses<'_> {
    let tgt = limits.max_tgt_len;
    let mut st = State::new(search, limits.max_beam, tgt);
    st.sort_finished(count, tgt);
    let State {
        finished: tokens,
        finished_len: lens,
        finished_score: scores,
        ..
    } = st;
    Hypotheses {
        tokens,
        lens,
        scores,
        count,
        stride: tgt,
    }
}
