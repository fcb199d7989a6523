//! Greedy and beam search over a session's decoder, with all state in the arena.
//!
//! Beam search keeps `beam` live hypotheses; at each step it takes the best `2·beam`
//! continuations (summed log-probabilities), moves those ending in EOS to the finished set
//! (score divided by `length^length_penalty`, length counting EOS) and keeps the best `beam`
//! others, reordering the self-attention cache rows in place. It stops when `beam` hypotheses
//! have finished or after `max_steps` tokens (live beams are then finished as they are).
//! Greedy search is the one-beam case without the log-softmax over the whole vocabulary.
//!
//! Under `transformers`' rules ([`Session::generate_as_transformers`]) the finished set is
//! `transformers`' beam hypotheses: each step, the candidates among the best `beam` that end
//! (EOS, or any token at the last step) are offered to a set of the `beam` best finished
//! hypotheses by normalised score, where a better one replaces the worst. When the search
//! stops is [`EarlyStopping`]: as soon as the set is full (`early_stopping=True`), or only when
//! the best live hypothesis, normalised as if it ended now (`False`) or, with a positive length
//! penalty, at the length limit (`"never"`), cannot beat the worst finished one
//! (`_check_early_stop_heuristic` in `transformers`' `generation/utils.py`); always at the
//! length limit. Under CTranslate2's rules ([`Session::generate_as_ctranslate2`]) every ending
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

pub use options::{EarlyStopping, SearchOptions};
pub use views::{Hypotheses, Hypothesis, StepLogits, StepView};

use crate::forward::Tokens;
use crate::session::{check_tokens, Arena, ModelRef, RunError, Session};
use rules::Rules;
use state::State;
use step::{Next, Search};

impl<M: ModelRef, A: Arena> Session<M, A> {
    fn check_search(&self, options: &SearchOptions) -> Result<(), RunError> {
        if self.source_len().is_none() {
            return Err(RunError::NotEncoded);
        }
        let limits = self.limits();
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
        if let Some(sampling) = &options.sampling {
            if options.beam != 1 {
                return Err(RunError::BadOption("sampling needs beam 1"));
            }
            sampling.check().map_err(RunError::BadOption)?;
        }
        Ok(())
    }

    /// Greedy or beam search from BOS over the encoded source; `on_step` sees the raw logits of
    /// every step (afterwards, beam search turns them into log-probabilities in place). Returns
    /// the finished hypotheses, best first (at most `beam`), borrowed from the arena until the
    /// next call on the session.
    pub fn generate(
        &mut self,
        options: &SearchOptions,
        on_step: impl FnMut(StepView<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        let bos = self.model().config().bos_id;
        self.generate_from(&[bos], options, on_step)
    }

    /// [`Session::generate`] after a forced start: `prefix` (BOS first, then e.g. language or
    /// task tokens) is fed in one batched [`Session::prefill`], and the search continues from
    /// its last token. Hypotheses hold only the tokens generated after the prefix; the prefix
    /// and `max_steps` together take `prefix.len() - 1 + max_steps` target positions.
    pub fn generate_from(
        &mut self,
        prefix: &[u32],
        options: &SearchOptions,
        mut on_step: impl FnMut(StepView<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        self.generate_with(prefix, options, |step| {
            on_step(StepView {
                step: step.step,
                logits: step.logits,
                beams: step.beams,
                vocab: step.vocab,
            })
        })
    }

    /// [`Session::generate_from`] with a logits processor: `process` may change each step's
    /// raw logits (and sees each hypothesis's tokens so far) before the search ranks them.
    pub fn generate_with(
        &mut self,
        prefix: &[u32],
        options: &SearchOptions,
        process: impl FnMut(&mut StepLogits<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        self.search_processed(prefix, options, Rules::Plain, process)
    }

    /// [`Session::generate_with`] with the rules of CTranslate2's beam search
    /// (`BeamSearch::search`, `translate_batch` with `num_hypotheses`): of the step's `2·beam`
    /// candidates, each of the best `beam` that ends (EOS, or any at the last step) is
    /// registered as finished and its place taken by the next candidate of the other `beam`
    /// that is not EOS. Registered hypotheses are ranked by normalised score and the best
    /// `num_hypotheses` returned. The search stops at the length limit, or with a length
    /// penalty of 0 once the best candidate of some step has ended and `num_hypotheses` are
    /// registered, or else once `beam` are. The first free step after `forced` forced steps
    /// (a target prefix, a forced BOS) finishes only on its best candidate: an EOS further down
    /// ends no hypothesis and takes its beam out of the search (CTranslate2 scores it -1e10).
    pub fn generate_as_ctranslate2(
        &mut self,
        prefix: &[u32],
        options: &SearchOptions,
        num_hypotheses: usize,
        forced: usize,
        process: impl FnMut(&mut StepLogits<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        let rules = Rules::CTranslate2 {
            num_hypotheses,
            forced,
        };
        self.search_processed(prefix, options, rules, process)
    }

    /// [`Session::generate_with`] with the rules of `transformers`' beam search: the processor
    /// gets each row's log-probabilities (`log_softmax` of the raw logits) and the search ranks
    /// what it leaves without normalising again; and an EOS continuation finishes a hypothesis
    /// only when it ranks among the best `beam` of the step's `2·beam` candidates (lower ones
    /// are dropped), into the set of the best `beam` finished ones; the search stops as
    /// `early_stopping` says (see the module documentation). Greedy search (one beam) still
    /// hands the processor raw logits, as `transformers`' greedy search does.
    pub fn generate_as_transformers(
        &mut self,
        prefix: &[u32],
        options: &SearchOptions,
        early_stopping: EarlyStopping,
        process: impl FnMut(&mut StepLogits<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        self.search_processed(
            prefix,
            options,
            Rules::Transformers(early_stopping),
            process,
        )
    }
    /// Checks a forced start against the target vocabulary and the positions it leaves.
    fn check_prefix(&self, prefix: &[u32], options: &SearchOptions) -> Result<(), RunError> {
        if prefix.is_empty() {
            return Err(RunError::BadOption("the prefix needs at least one token"));
        }
        let positions = prefix.len() - 1 + options.max_steps;
        let max = self.limits().max_tgt_len;
        if positions > max {
            return Err(RunError::TargetTooLong {
                len: positions,
                max,
            });
        }
        check_tokens("target", prefix, self.model().config().tgt_vocab)
    }

    /// The search loop: the prefix, then one decoder step per token until the rules stop.
    fn search_processed(
        &mut self,
        prefix: &[u32],
        options: &SearchOptions,
        rules: Rules,
        mut process: impl FnMut(&mut StepLogits<'_>),
    ) -> Result<Hypotheses<'_>, RunError> {
        self.check_search(options)?;
        self.check_prefix(prefix, options)?;
        let config = self.model().config();
        let mut search = Search::new(options, rules, self.isa(), config, self.limits());
        self.reset_decoder();
        for step in 0..options.max_steps {
            if step == 0 {
                self.prefill(prefix)?;
            } else {
                self.step(Tokens::Staged(search.live))?;
            }
            match search.step(step, self.search_buffers(), &mut process)? {
                Next::Done => break,
                Next::Same => {}
                Next::Reordered(kept) => self.reorder(Tokens::Staged(kept)),
            }
        }
        Ok(self.finished(search.tally.finished))
    }

    /// The `count` finished hypotheses in the arena, sorted best first.
    fn finished(&mut self, count: usize) -> Hypotheses<'_> {
        let limits = self.limits();
        let tgt = limits.max_tgt_len;
        let mut st = State::new(self.search_buffers().search, limits.max_beam, tgt);
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
}
