//! Text in, text out: a [`Translator`] holds one model, its tokenizer and its decoding
//! defaults, shared (`Arc`) by any number of [`Translating`] sessions, one per concurrent
//! user, each with its own preallocated arena.
//!
//! One translation is what the Python pipeline of `transformers` does: `tokenizer(text)` (the
//! family's special tokens, the source language code where the family has one), then
//! `model.generate` with the directory's `generation_config.json` (the target language token
//! as forced BOS where the tokenizer has one), then `tokenizer.decode(ids,
//! skip_special_tokens=True)`. A source longer than the model reads is
//! [`TranslateError::SourceTooLong`] unless [`TranslateOptions::truncate`] is set, which keeps
//! the first `max - 1` ids and the last one (the family's closing special token).
//!
//! A generation config with `do_sample: true` makes sampling the default, as `transformers`
//! samples then: one hypothesis drawn with the config's `temperature`, `top_k` and `top_p`
//! (`transformers`' defaults 1, 50 and 1 when absent) and seed 0 (set
//! `options.decode.search.sampling` to change it). `transformers` would sample inside a beam
//! search when `num_beams > 1` (beam sampling); tessel samples one hypothesis only, so a
//! sampling default runs with one beam. [`Translator::target_prefix`] turns text into the ids
//! of a target prefix ([`DecodeOptions::prefix`]), forced after the forced BOS.

use std::path::Path;
use std::sync::Arc;

use tessel_kernels::Isa;
use tessel_model::generation::SamplingDefaults;
use tessel_model::{
    ArenaPlan, DecodeOptions, Hypotheses, Limits, Model, RunError, Sampling, Session, SessionError,
};
use tessel_text::{Family, TextError, TextTokenizer};
use thiserror::Error;

use crate::model_dir::{LoadSettings, ModelDir, ModelDirError};

mod batch;
mod ids;
mod queue;
mod score;

pub use batch::{BatchTranslating, LineResult};
pub use ids::{
    token_batches, BatchShape, Hypothesis, IdsBatch, IdsResult, DEFAULT_BATCH, DEFAULT_BATCH_ARENA,
};
pub use queue::{Ticket, TranslateQueue};
pub use score::score_ids;

/// Why a translation failed.
#[derive(Debug, Error)]
pub enum TranslateError {
    /// The model directory could not be loaded.
    #[error(transparent)]
    ModelDir(#[from] ModelDirError),
    /// The tokenizer refused the text, the ids or a language code.
    #[error(transparent)]
    Tokenizer(#[from] TextError),
    /// The directory holds a model that does not translate text (Whisper).
    #[error("{0} is not a text-to-text model")]
    NotTextModel(&'static str),
    /// The source is longer than the model reads, and truncation was not asked for.
    #[error("the source is {len} tokens, more than the {max} this model reads (ask for truncation to cut it)")]
    SourceTooLong {
        /// Source tokens.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A session could not be created.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The search refused its input or options.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Per-call options: the search and what to do with long sources.
#[derive(Clone, Debug, PartialEq)]
pub struct TranslateOptions {
    /// Beam, lengths, penalties, n-best (and the sampling settings of the search).
    pub decode: DecodeOptions,
    /// Cut sources longer than the model reads instead of refusing them.
    pub truncate: bool,
}

/// One hypothesis as text.
#[derive(Clone, Debug, PartialEq)]
pub struct Translation {
    /// The decoded text.
    pub text: String,
    /// The generated ids (forced tokens and EOS included).
    pub tokens: Vec<u32>,
    /// Its score: summed log-probabilities over `length^length_penalty`.
    pub score: f32,
}

/// A shared translation model: cheap to clone, `Send + Sync`.
#[derive(Clone)]
pub struct Translator {
    model: Arc<Model<'static>>,
    tokenizer: Arc<TextTokenizer>,
    defaults: TranslateOptions,
    search: TranslateOptions,
    sampling: SamplingDefaults,
    /// Widest beam of the sessions, where it differs from the model's.
    max_beam: Option<usize>,
    /// Longest source of the sessions, where it is shorter than the model's.
    max_src_len: Option<usize>,
    /// Leading source tokens with global attention (Longformer encoders), where it differs
    /// from the model's default.
    global_tokens: Option<usize>,
}

/// `transformers`' `top_k` when sampling and the generation config does not set it.
const DEFAULT_TOP_K: usize = 50;

impl Translator {
    /// Loads a model directory ([`ModelDir::load`]) with source and target languages (for the
    /// families that have them; an unknown code is [`TextError::UnknownLanguage`]).
    pub fn load(
        dir: &Path,
        settings: LoadSettings,
        src_lang: Option<&str>,
        tgt_lang: Option<&str>,
    ) -> Result<Translator, TranslateError> {
        Translator::new(ModelDir::load(dir, settings)?, src_lang, tgt_lang)
    }

    /// A translator over a loaded directory.
    pub fn new(
        dir: ModelDir,
        src_lang: Option<&str>,
        tgt_lang: Option<&str>,
    ) -> Result<Translator, TranslateError> {
        if dir.is_speech() || dir.tokenizer.family() == Family::Whisper {
            return Err(TranslateError::NotTextModel("Whisper"));
        }
        let tokenizer = dir.tokenizer.with_languages(src_lang, tgt_lang)?;
        let search = TranslateOptions {
            decode: dir.generation.options,
            truncate: false,
        };
        Translator::assemble(
            Arc::new(dir.model),
            tokenizer,
            search,
            dir.generation.sampling,
        )
    }

    /// The same model with other source and target languages (for the families that have
    /// them; `None` keeps the current one): the tokenizer is copied, the model shared.
    pub fn with_languages(
        &self,
        src_lang: Option<&str>,
        tgt_lang: Option<&str>,
    ) -> Result<Translator, TranslateError> {
        let tokenizer = (*self.tokenizer)
            .clone()
            .with_languages(src_lang, tgt_lang)?;
        let translator = Translator::assemble(
            Arc::clone(&self.model),
            tokenizer,
            self.search.clone(),
            self.sampling,
        )?;
        Ok(Translator {
            max_beam: self.max_beam,
            max_src_len: self.max_src_len,
            global_tokens: self.global_tokens,
            ..translator
        })
    }

    /// A translator whose defaults are `search` with the tokenizer's target language as the
    /// forced BOS, sampling as `sampling` says.
    fn assemble(
        model: Arc<Model<'static>>,
        tokenizer: TextTokenizer,
        mut search: TranslateOptions,
        sampling: SamplingDefaults,
    ) -> Result<Translator, TranslateError> {
        if let Some(bos) = tokenizer.forced_bos_id()? {
            search.decode.forced_bos = Some(bos);
        }
        let mut defaults = search.clone();
        if sampling.do_sample {
            defaults.decode.search.sampling = Some(sampling_of(&sampling, 0));
            defaults.decode.search.beam = 1;
            defaults.decode.num_hypotheses = 1;
        }
        Ok(Translator {
            model,
            tokenizer: Arc::new(tokenizer),
            defaults,
            search,
            sampling,
            max_beam: None,
            max_src_len: None,
            global_tokens: None,
        })
    }

    /// The generation config's sampling settings (`do_sample`, `temperature`, `top_k`,
    /// `top_p`), applied to [`Translator::defaults`] when `do_sample` is set.
    pub fn sampling_defaults(&self) -> &SamplingDefaults {
        &self.sampling
    }

    /// The sampling settings of the generation config with `seed`, whether or not it sets
    /// `do_sample`: its `temperature`, `top_k` and `top_p`, else `transformers`' defaults.
    pub fn sampling(&self, seed: u64) -> Sampling {
        sampling_of(&self.sampling, seed)
    }

    /// The ids of `text` as a target prefix: the target tokenizer's ids without the family's
    /// special tokens around them (the closing `</s>`, the target language code, which is the
    /// forced BOS where the family has one).
    pub fn target_prefix(&self, text: &str) -> Result<Vec<u32>, TranslateError> {
        let mut ids = self.tokenizer.encode_target(text)?;
        let eos = self.tokenizer.eos_id();
        let lang = self.tokenizer.forced_bos_id()?;
        let bos = self.defaults.decode.forced_bos;
        while let Some(&last) = ids.last() {
            if Some(last) == eos || Some(last) == lang {
                ids.pop();
            } else {
                break;
            }
        }
        if ids
            .first()
            .is_some_and(|&t| Some(t) == bos || Some(t) == lang)
        {
            ids.remove(0);
        }
        Ok(ids)
    }

    /// The model's defaults (from its generation config and languages), to start options from.
    pub fn defaults(&self) -> &TranslateOptions {
        &self.defaults
    }

    /// The model's defaults without sampling (the generation config's search, even when it
    /// sets `do_sample`).
    pub fn search_defaults(&self) -> &TranslateOptions {
        &self.search
    }

    /// The model.
    pub fn model(&self) -> &Arc<Model<'static>> {
        &self.model
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// What a session with `threads` GEMM threads is planned for: the model's limits, with
    /// beams up to [`Translator::with_max_beam`]'s width where it was set.
    pub fn limits(&self, threads: usize) -> Limits {
        let limits = Limits::of(self.model.config()).with_threads(threads);
        Limits {
            max_beam: self.max_beam.unwrap_or(limits.max_beam),
            max_src_len: self.max_src_len(),
            ..limits
        }
    }

    /// The longest source its sessions read: the model's, or less where
    /// [`Translator::with_max_source_len`] set it.
    pub fn max_src_len(&self) -> usize {
        let model = self.model.config().max_src_len;
        self.max_src_len.map_or(model, |n| n.min(model))
    }

    /// The same translator, its sessions planned for sources of at most `max_src_len` tokens
    /// (at most the model's): a smaller arena for a model with a long position table (LED
    /// reads 16,384 tokens).
    pub fn with_max_source_len(&self, max_src_len: usize) -> Translator {
        Translator {
            max_src_len: Some(max_src_len.max(1)),
            ..self.clone()
        }
    }

    /// The same translator, its sessions giving the first `tokens` source tokens global
    /// attention in a Longformer encoder (LED; [`Session::set_global_tokens`]).
    pub fn with_global_tokens(&self, tokens: usize) -> Translator {
        Translator {
            global_tokens: Some(tokens),
            ..self.clone()
        }
    }

    /// The global tokens its sessions are given, where set.
    pub fn global_tokens(&self) -> Option<usize> {
        self.global_tokens
    }

    /// The same translator, its sessions planned for beams up to `max_beam` instead of the
    /// width the model was loaded for.
    pub fn with_max_beam(&self, max_beam: usize) -> Translator {
        Translator {
            max_beam: Some(max_beam),
            ..self.clone()
        }
    }

    /// Bytes of the arena a session with `threads` GEMM threads allocates, planned without
    /// allocating it (so a host can check it fits before making sessions).
    pub fn session_bytes(&self, threads: usize) -> Result<usize, TranslateError> {
        let plan = ArenaPlan::with_limits(self.model.config(), self.limits(threads))
            .map_err(SessionError::from)?;
        Ok(plan.total_bytes())
    }

    /// A session planned for the model's limits with `threads` GEMM threads, at `isa`.
    pub fn session(&self, isa: Isa, threads: usize) -> Result<Translating, TranslateError> {
        let limits = self.limits(threads);
        let mut session = Session::with_limits(Arc::clone(&self.model), isa, limits)?;
        if let Some(tokens) = self.global_tokens {
            session.set_global_tokens(tokens);
        }
        Ok(Translating {
            translator: self.clone(),
            session,
        })
    }
}

impl Translator {
    /// The source ids of `text` for a model reading at most `max` tokens: refused when longer,
    /// or cut to its first `max - 1` ids and its last when `options.truncate` says so.
    pub fn source_ids(
        &self,
        text: &str,
        max: usize,
        options: &TranslateOptions,
    ) -> Result<Vec<u32>, TranslateError> {
        let mut ids = self.tokenizer.encode(text)?;
        if ids.len() > max {
            if !options.truncate {
                return Err(TranslateError::SourceTooLong {
                    len: ids.len(),
                    max,
                });
            }
            let last = ids[ids.len() - 1];
            ids.truncate(max - 1);
            ids.push(last);
        }
        Ok(ids)
    }

    /// Each hypothesis of ids with its text.
    pub fn texts(&self, hyps: Vec<Hypothesis>) -> Result<Vec<Translation>, TranslateError> {
        hyps.into_iter()
            .map(|h| {
                Ok(Translation {
                    text: self.tokenizer.decode(&h.tokens)?,
                    tokens: h.tokens,
                    score: h.score,
                })
            })
            .collect()
    }

    /// The first `options.decode.num_hypotheses` of `hyps` as text.
    fn translations(
        &self,
        hyps: Hypotheses<'_>,
        options: &TranslateOptions,
    ) -> Result<Vec<Translation>, TranslateError> {
        let mut out = Vec::with_capacity(options.decode.num_hypotheses);
        for h in hyps.iter().take(options.decode.num_hypotheses) {
            out.push(Translation {
                text: self.tokenizer.decode(h.tokens)?,
                tokens: h.tokens.to_vec(),
                score: h.score,
            });
        }
        Ok(out)
    }
}

/// A seed that differs from call to call, for sampling without a seed given (the standard
/// library's per-process random keys).
pub fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// The sampling a generation config's settings describe, with `seed`.
fn sampling_of(defaults: &SamplingDefaults, seed: u64) -> Sampling {
    Sampling {
        temperature: defaults.temperature.unwrap_or(1.0),
        top_k: defaults.top_k.unwrap_or(DEFAULT_TOP_K),
        top_p: defaults.top_p.unwrap_or(1.0),
        seed,
    }
}

/// One user's translating session.
pub struct Translating {
    translator: Translator,
    session: Session<Arc<Model<'static>>>,
}

impl Translating {
    /// Translates `text` with the model's defaults: the best hypothesis's text.
    pub fn translate(&mut self, text: &str) -> Result<String, TranslateError> {
        let options = self.translator.defaults.clone();
        let mut best = self.translate_with(text, &options)?;
        Ok(if best.is_empty() {
            String::new()
        } else {
            best.swap_remove(0).text
        })
    }

    /// Translates `text`: `options.decode.num_hypotheses` hypotheses, best first.
    pub fn translate_with(
        &mut self,
        text: &str,
        options: &TranslateOptions,
    ) -> Result<Vec<Translation>, TranslateError> {
        match self.encode_text(text, options)? {
            0 => Ok(Vec::new()),
            _ => self.generate(options),
        }
    }

    /// The first half of [`Translating::translate_with`]: tokenises `text` as `options` say
    /// and encodes it; returns its number of source tokens (0: an empty text, nothing
    /// encoded).
    pub fn encode_text(
        &mut self,
        text: &str,
        options: &TranslateOptions,
    ) -> Result<usize, TranslateError> {
        let max = self.session.limits().max_src_len;
        let ids = self.translator.source_ids(text, max, options)?;
        if !ids.is_empty() {
            self.session.encode(&ids)?;
        }
        Ok(ids.len())
    }

    /// The second half of [`Translating::translate_with`]: decodes the source
    /// [`Translating::encode_text`] encoded into `options.decode.num_hypotheses` hypotheses,
    /// best first.
    pub fn generate(
        &mut self,
        options: &TranslateOptions,
    ) -> Result<Vec<Translation>, TranslateError> {
        self.generate_watched(options, |_| {})
    }

    /// [`Translating::generate`], calling `on_step` with each decoder step's index as it
    /// runs (a progress report; nothing allocates for it).
    pub fn generate_watched(
        &mut self,
        options: &TranslateOptions,
        mut on_step: impl FnMut(usize),
    ) -> Result<Vec<Translation>, TranslateError> {
        let request = options.decode.request(&self.session)?;
        let hyps = self
            .session
            .generate(request.on_step(|view| on_step(view.step)))?;
        self.translator.translations(hyps, options)
    }

    /// Translates each line, in order: each line's hypotheses or why that line failed (a
    /// failing line does not stop the others).
    pub fn translate_lines<S: AsRef<str>>(
        &mut self,
        lines: &[S],
        options: &TranslateOptions,
    ) -> Vec<Result<Vec<Translation>, TranslateError>> {
        lines
            .iter()
            .map(|line| self.translate_with(line.as_ref(), options))
            .collect()
    }

    /// The translator this session belongs to.
    pub fn translator(&self) -> &Translator {
        &self.translator
    }
}
