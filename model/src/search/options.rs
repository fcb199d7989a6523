//! What a search is asked to do: beam width, length limit and penalty, EOS, sampling and
//! `transformers`' early stopping ([`SearchOptions`]), and everything one
//! [`Session::generate`](crate::Session::generate) call takes around them ([`Request`]): the
//! forced start, the beam rules, the logits processor and the per-step callback.

use core::fmt;

use super::rules::BeamRules;
use super::views::{StepLogits, StepView};
use crate::sampling::Sampling;

/// How to search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchOptions {
    /// Beam width; 1 is greedy.
    pub beam: usize,
    /// Tokens to generate at most (decoder positions, the BOS input included).
    pub max_steps: usize,
    /// Exponent α of the length normalisation `score / length^α` (0: raw sum).
    pub length_penalty: f32,
    /// Finish a hypothesis when it produces EOS; `false` treats EOS as an ordinary token, so
    /// every search runs exactly `max_steps` steps (benchmarks).
    pub stop_at_eos: bool,
    /// Draw each token at random instead of taking the most likely one (`beam` must be 1);
    /// `None` is greedy or beam search.
    pub sampling: Option<Sampling>,
    /// Beam search patience (Kasai et al. 2022, as CTranslate2 and openai-whisper take it): the
    /// search goes on until `round(beam · patience)` hypotheses have finished instead of
    /// `beam`; the best `beam` of them are kept. 1 is the plain rule; greedy search and
    /// sampling ignore it. Under `transformers`' rules only 1 is accepted.
    pub patience: f32,
}

impl SearchOptions {
    /// Greedy search of at most `max_steps` tokens, stopping at EOS.
    pub fn greedy(max_steps: usize) -> SearchOptions {
        SearchOptions {
            beam: 1,
            max_steps,
            length_penalty: 1.0,
            stop_at_eos: true,
            sampling: None,
            patience: 1.0,
        }
    }

    /// Beam search of width `beam`, at most `max_steps` tokens, length penalty 1.
    pub fn beam(beam: usize, max_steps: usize) -> SearchOptions {
        SearchOptions {
            beam,
            ..SearchOptions::greedy(max_steps)
        }
    }

    /// The hypotheses a beam search waits for before it stops: `round(beam · patience)`.
    pub fn finished_needed(&self) -> usize {
        libm::roundf(self.beam as f32 * self.patience) as usize
    }

    /// One hypothesis of at most `max_steps` tokens, each drawn as `sampling` says.
    pub fn sample(sampling: Sampling, max_steps: usize) -> SearchOptions {
        SearchOptions {
            sampling: Some(sampling),
            ..SearchOptions::greedy(max_steps)
        }
    }
}

/// When a beam search under `transformers`' rules stops before its length limit
/// (`early_stopping` of `transformers.generate`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EarlyStopping {
    /// `early_stopping=True`: as soon as `beam` hypotheses have finished.
    WhenFull,
    /// `early_stopping=False` (`transformers`' default): once `beam` hypotheses have finished
    /// and the best live one, its score normalised by its current length, is no better than
    /// the worst finished one.
    #[default]
    Heuristic,
    /// `early_stopping="never"`: as `Heuristic`, but with a positive length penalty the live
    /// score is normalised by the length limit (the best it could reach), so the search
    /// nearly always runs to the limit.
    Never,
}

/// A logits processor that changes nothing.
pub type Unchanged = fn(&mut StepLogits<'_>);

/// A per-step callback that looks at nothing.
pub type Unwatched = fn(StepView<'_>);

/// One search: its [`SearchOptions`] and, with defaults, what may come around them. Built with
/// [`Request::new`] and the setters, which take closures by value (nothing allocates):
///
/// ```
/// # use tessel_model::{BeamRules, EarlyStopping, Request, SearchOptions};
/// let prompt = [0, 7];
/// let mut steps = 0;
/// let request = Request::new(SearchOptions::beam(4, 32))
///     .prefix(&prompt)
///     .rules(BeamRules::Transformers(EarlyStopping::Heuristic))
///     .process(|step| step.row_mut(0)[3] = f32::NEG_INFINITY)
///     .on_step(|_| steps += 1);
/// # let _ = request;
/// ```
pub struct Request<'a, P = Unchanged, S = Unwatched> {
    /// Beam width, length limit and penalty, EOS, sampling.
    pub search: SearchOptions,
    /// A forced start (BOS first, then e.g. language or task tokens), fed in one batched
    /// [`Session::prefill`](crate::Session::prefill); the search continues from its last
    /// token. Hypotheses hold only the tokens generated after it; it and `max_steps` together
    /// take `prefix.len() - 1 + max_steps` target positions. `None`: the model's BOS alone.
    pub prefix: Option<&'a [u32]>,
    /// Whose beam search rules decide which candidates finish and when the search stops.
    pub rules: BeamRules,
    /// Changes each step's logits (and sees each hypothesis's tokens so far) before the search
    /// ranks them: raw logits, or log-probabilities under [`BeamRules::Transformers`] with more
    /// than one beam.
    pub process: P,
    /// Sees each step's logits after `process` ran, one call per decoder step the search runs
    /// (afterwards, beam search turns raw logits into log-probabilities in place).
    pub on_step: S,
}

impl<'a> Request<'a> {
    /// A search as `search` says, from the model's BOS, under tessel's own rules, the logits
    /// unchanged and unwatched.
    pub fn new(search: SearchOptions) -> Request<'a> {
        Request {
            search,
            prefix: None,
            rules: BeamRules::Plain,
            process: |_| {},
            on_step: |_| {},
        }
    }
}

impl<'a, P, S> Request<'a, P, S>
where
    P: FnMut(&mut StepLogits<'_>),
    S: FnMut(StepView<'_>),
{
    /// The same request from the forced start `prefix` (see [`Request::prefix`]).
    pub fn prefix(self, prefix: &'a [u32]) -> Request<'a, P, S> {
        Request {
            prefix: Some(prefix),
            ..self
        }
    }

    /// The same request under `rules`.
    pub fn rules(self, rules: BeamRules) -> Request<'a, P, S> {
        Request { rules, ..self }
    }

    /// The same request with `process` as its logits processor.
    pub fn process<Q: FnMut(&mut StepLogits<'_>)>(self, process: Q) -> Request<'a, Q, S> {
        self.with_callbacks(|_| process, |on_step| on_step)
    }

    /// The same request with `on_step` called after every step.
    pub fn on_step<T: FnMut(StepView<'_>)>(self, on_step: T) -> Request<'a, P, T> {
        self.with_callbacks(|process| process, |_| on_step)
    }

    /// The same request with its callbacks replaced as `process` and `on_step` say, each
    /// given the one it replaces (to wrap it, as a host that watches the processed logits
    /// does).
    pub fn with_callbacks<Q, T>(
        self,
        process: impl FnOnce(P) -> Q,
        on_step: impl FnOnce(S) -> T,
    ) -> Request<'a, Q, T> {
        Request {
            search: self.search,
            prefix: self.prefix,
            rules: self.rules,
            process: process(self.process),
            on_step: on_step(self.on_step),
        }
    }
}

impl<P, S> fmt::Debug for Request<'_, P, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("search", &self.search)
            .field("prefix", &self.prefix)
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

/// The requests of a batch's running slots, by slot: every slot's (`[Request]`, as
/// [`Batch::generate`](crate::Batch::generate) takes them) or those of some
/// (`[Option<Request>]`, as [`Batch::step`](crate::Batch::step) takes them).
#[cfg(feature = "std")]
pub trait SlotRequests<'a, P, S> {
    /// Slot `slot`'s request, if it has one.
    fn of(&mut self, slot: usize) -> Option<&mut Request<'a, P, S>>;
}

#[cfg(feature = "std")]
impl<'a, P, S> SlotRequests<'a, P, S> for [Request<'a, P, S>] {
    fn of(&mut self, slot: usize) -> Option<&mut Request<'a, P, S>> {
        self.get_mut(slot)
    }
}

#[cfg(feature = "std")]
impl<'a, P, S> SlotRequests<'a, P, S> for [Option<Request<'a, P, S>>] {
    fn of(&mut self, slot: usize) -> Option<&mut Request<'a, P, S>> {
        self.get_mut(slot).and_then(Option::as_mut)
    }
}
