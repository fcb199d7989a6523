//! Decoding options as translation users know them (`transformers.generate`, CTranslate2's
//! `translate_batch`) on top of [`crate::search`]: lengths, the logits processors of
//! [`crate::processors`], forced tokens and n-best lists. [`DecodeOptions::request`] turns
//! them into one [`Request`] for [`Session::generate`], from the decoder start token.
//!
//! Lengths: `max_length` counts decoder positions with the start token (`transformers`'
//! `max_length`), so at most `max_length - 1` tokens are generated; `max_new_tokens`
//! (`transformers`; CTranslate2's `max_decoding_length`, which counts a target prefix as
//! generated) replaces it when set; `max_length_ratio` `(a, b)` caps the generated tokens at
//! `⌈a · source_len⌉ + b` (fairseq's `max_len_a`/`max_len_b`). The smallest bound wins, and the
//! session's planned target length caps them all.
//!
//! Forced tokens (a forced BOS such as NLLB's target language, then a target prefix) are
//! generated steps whose only possible token is the forced one, with log-probability 0: they
//! count in the length that normalises scores, as in `transformers` (forced BOS) and
//! CTranslate2 (target prefix), and are part of every hypothesis's tokens.
//!
//! [`Convention`] chooses the beam search rules where the references differ: `transformers`
//! edits log-probabilities (its beam search normalises first) and finishes a hypothesis on
//! EOS only when the EOS continuation ranks among the best `beam` candidates
//! ([`BeamRules::Transformers`]), keeps the best `beam` finished hypotheses and stops as
//! [`DecodeOptions::early_stopping`] says (`transformers`' default: when the best live
//! hypothesis cannot beat the worst finished one); CTranslate2 edits raw logits and then
//! normalises, and builds n-best lists by its own rules ([`BeamRules::CTranslate2`]). Greedy
//! search edits raw logits under both, as both references do. The repetition penalty (which scales scores) and bans that change the
//! normaliser give different beam rankings under the two conventions.

use tessel_kernels::Isa;

use crate::config::Config;
use crate::plan::Limits;
use crate::processors::Processors;
use crate::search::{BeamRules, EarlyStopping, Request, SearchOptions, StepLogits};
use crate::session::{check_tokens, Arena, ModelRef, RunError, Session};

/// Which reference's conventions a search follows where they differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Convention {
    /// `transformers.generate`: beam search applies the processors to log-probabilities and
    /// finishes hypotheses only from the best `beam` candidates.
    #[default]
    Transformers,
    /// CTranslate2: beam search applies the processors to logits, then normalises.
    CTranslate2,
}

/// Everything a translation search can be asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeOptions {
    /// Beam width, length penalty, stopping at EOS (and any other search setting);
    /// `max_steps` is replaced by the length bounds below.
    pub search: SearchOptions,
    /// Hypotheses to return, best first (`num_return_sequences`, `num_hypotheses`), at most
    /// the beam width.
    pub num_hypotheses: usize,
    /// Decoder positions with the start token (`max_length`).
    pub max_length: usize,
    /// Tokens to generate at most, forced ones included (`max_new_tokens`,
    /// `max_decoding_length`); replaces `max_length` when set.
    pub max_new_tokens: Option<usize>,
    /// `(a, b)`: at most `⌈a · source_len⌉ + b` generated tokens.
    pub max_length_ratio: Option<(f32, usize)>,
    /// Decoder positions with the start token before EOS may be generated (`min_length`).
    pub min_length: usize,
    /// Repetition penalty θ ≥ 1 discourages, 1 is off (`repetition_penalty`).
    pub repetition_penalty: f32,
    /// Never repeat an n-gram of this size; 0 is off (`no_repeat_ngram_size`).
    pub no_repeat_ngram_size: usize,
    /// Tokens never generated (`suppress_tokens`).
    pub suppress_tokens: Vec<u32>,
    /// Token sequences never generated (`bad_words_ids`; one-token sequences are suppressed).
    pub bad_words: Vec<Vec<u32>>,
    /// Token forced first (`forced_bos_token_id`, e.g. the target language).
    pub forced_bos: Option<u32>,
    /// Token forced at the last step when the search gets there (`forced_eos_token_id`).
    pub forced_eos: Option<u32>,
    /// Tokens forced after the forced BOS (a target prefix).
    pub prefix: Vec<u32>,
    /// The decoder's first input; `None` is the model config's `bos_id`.
    pub decoder_start: Option<u32>,
    /// Where beam search applies the processors.
    pub convention: Convention,
    /// Turn every row back into log-probabilities after the processors ran
    /// (`renormalize_logits`, `transformers`' `LogitNormalization`): a forced or banned token
    /// then moves the scores of the rest of its row. The chosen tokens of greedy search never
    /// change; beam search's scores, and so its choices, can.
    pub renormalize_logits: bool,
    /// When beam search stops before the length limit under [`Convention::Transformers`]
    /// (`early_stopping`; CTranslate2 stops when `beam` hypotheses have finished).
    pub early_stopping: EarlyStopping,
}

impl DecodeOptions {
    /// Greedy search of at most `max_new_tokens` tokens, nothing else asked.
    pub fn greedy(max_new_tokens: usize) -> DecodeOptions {
        DecodeOptions {
            search: SearchOptions::greedy(max_new_tokens.max(1)),
            num_hypotheses: 1,
            max_length: usize::MAX,
            max_new_tokens: Some(max_new_tokens),
            max_length_ratio: None,
            min_length: 0,
            repetition_penalty: 1.0,
            no_repeat_ngram_size: 0,
            suppress_tokens: Vec::new(),
            bad_words: Vec::new(),
            forced_bos: None,
            forced_eos: None,
            prefix: Vec::new(),
            decoder_start: None,
            convention: Convention::Transformers,
            renormalize_logits: false,
            early_stopping: EarlyStopping::Heuristic,
        }
    }

    /// Beam search of width `beam`, at most `max_new_tokens` tokens.
    pub fn beam(beam: usize, max_new_tokens: usize) -> DecodeOptions {
        let mut options = DecodeOptions::greedy(max_new_tokens);
        options.search.beam = beam;
        options
    }

    /// The most tokens a search over a source of `source_len` tokens generates, before the
    /// session's own limit.
    pub fn max_steps(&self, source_len: usize) -> usize {
        let mut steps = match self.max_new_tokens {
            Some(n) => n,
            None => self.max_length.saturating_sub(1),
        };
        if let Some((a, b)) = self.max_length_ratio {
            let scaled = (a as f64 * source_len as f64).ceil();
            let cap = if scaled.is_finite() && scaled >= 0.0 {
                (scaled as usize).saturating_add(b)
            } else {
                b
            };
            steps = steps.min(cap);
        }
        steps
    }

    /// Checks what the search itself does not.
    fn check(&self, tgt_vocab: usize) -> Result<(), RunError> {
        if self.num_hypotheses == 0 || self.num_hypotheses > self.search.beam {
            return Err(RunError::BadOption(
                "num_hypotheses must be between 1 and the beam width",
            ));
        }
        if self.search.beam > 1 && self.num_hypotheses > self.search.finished_needed() {
            return Err(RunError::BadOption(
                "num_hypotheses must not exceed beam × patience",
            ));
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return Err(RunError::BadOption(
                "repetition_penalty must be finite and positive",
            ));
        }
        check_tokens("target", &self.suppress_tokens, tgt_vocab)?;
        check_tokens("target", &self.prefix, tgt_vocab)?;
        for word in &self.bad_words {
            check_tokens("target", word, tgt_vocab)?;
        }
        let single = |t: Option<u32>| t.map(|t| [t]).unwrap_or_default();
        check_tokens("target", &single(self.forced_bos), tgt_vocab)?;
        check_tokens("target", &single(self.forced_eos), tgt_vocab)?;
        check_tokens("target", &single(self.decoder_start), tgt_vocab)?;
        Ok(())
    }
}

impl DecodeOptions {
    /// The [`Request`] that searches as these options say over the source `session` has
    /// encoded: from the decoder start token, the processors of [`crate::processors`] editing
    /// every step (forced tokens first), under the [`Convention`]'s beam rules. Run it with
    /// [`Session::generate`] (`session.generate(options.request(&session)?)`), which returns
    /// up to the beam width's hypotheses, best first (take `num_hypotheses`); a per-step
    /// callback added with [`Request::on_step`] sees each step's logits after the processors
    /// ran (log-probabilities in `transformers`' beam search).
    pub fn request<M: ModelRef, A: Arena>(
        &self,
        session: &Session<M, A>,
    ) -> Result<Request<'_, impl FnMut(&mut StepLogits<'_>) + '_>, RunError> {
        let source_len = session.source_len().ok_or(RunError::NotEncoded)?;
        let planned = (session.model().config(), session.limits(), session.isa());
        self.request_for(source_len, planned)
    }

    /// The [`Request`] of [`DecodeOptions::request`] for a source of `source_len` tokens
    /// encoded by a session (or a slot of a [`crate::Batch`]) of `config`, planned as `limits`
    /// say, at `isa`.
    pub fn request_for(
        &self,
        source_len: usize,
        (config, limits, isa): (&Config, Limits, Isa),
    ) -> Result<Request<'_, impl FnMut(&mut StepLogits<'_>) + '_>, RunError> {
        self.check(config.tgt_vocab)?;
        let steps = self.max_steps(source_len).min(limits.max_tgt_len);
        if steps == 0 {
            return Err(RunError::BadOption(
                "the length limits leave no token to generate",
            ));
        }
        let processors = Processors {
            start: self.decoder_start.unwrap_or(config.bos_id),
            context_has_start: self.convention == Convention::Transformers,
            eos: config.eos_id,
            forced_bos: self.forced_bos,
            prefix: &self.prefix,
            forced_eos: self.forced_eos,
            last_step: steps - 1,
            repetition_penalty: self.repetition_penalty,
            no_repeat_ngram_size: self.no_repeat_ngram_size,
            suppress: &self.suppress_tokens,
            bad_words: &self.bad_words,
            min_length: self.min_length,
        };
        let forced = processors.forced_len();
        if forced > steps {
            return Err(RunError::BadOption(
                "more forced tokens than the length limits allow",
            ));
        }
        let rules = match self.convention {
            Convention::Transformers => BeamRules::Transformers(self.early_stopping),
            Convention::CTranslate2 => BeamRules::CTranslate2 {
                num_hypotheses: self.num_hypotheses,
                forced,
            },
        };
        let renormalize = self.renormalize_logits;
        let search = SearchOptions {
            max_steps: steps,
            ..self.search
        };
        let request = Request::new(search).rules(rules).process(move |step| {
            processors.apply(step);
            if renormalize {
                let live = step.beams * step.vocab;
                for row in step.logits[..live].chunks_exact_mut(step.vocab) {
                    crate::ops::log_softmax(isa, row);
                }
            }
        });
        Ok(match &self.decoder_start {
            Some(start) => request.prefix(core::slice::from_ref(start)),
            None => request,
        })
    }
}
