//! `tessel.Translator`: CTranslate2's `Translator` over tessel's batched sessions.
//!
//! `translate_batch` takes and returns tokens, as CTranslate2's does. A CTranslate2 directory
//! maps them with its own vocabularies and `config.json` (an unknown token reads as its
//! `unk_token`, `add_source_bos`/`add_source_eos` add those tokens), so it needs no tokenizer
//! files; a Hugging Face directory maps them with its tokenizer's vocabulary. The hypotheses
//! come back as tokens, without the end token unless asked, with their scores when asked. The
//! search follows CTranslate2's rules ([`Convention::CTranslate2`]) with its defaults (beam 2,
//! at most 256 tokens, at least 1). `translate` is text in, text out with the directory's
//! tokenizer and generation config, as `transformers`' pipeline translates.
//!
//! Each call takes batched sessions from a pool of at most `inter_threads` (planned for the
//! call's batch size and beam, kept for later calls of the same shape) and runs its batches
//! on up to `inter_threads` of them at once, each on `intra_threads` threads, with the GIL
//! released. Every example's hypotheses are those it gets decoded alone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};
use tessel_kernels::Isa;
use tessel_model::load::ct2::Ct2Vocab;
use tessel_model::load::directory::{Directory, Modality};
use tessel_model::{Convention, DecodeOptions, Model, Sampling};
use tessel_pipeline::{
    BatchShape, Hypothesis, IdsBatch, IdsResult, LoadSettings, ModelDir, TranslateError,
    TranslateOptions, Translator as TextTranslator,
};
use tessel_text::TextTokenizer;

use crate::pool::{lock, Pool};
use crate::{errors, settings};

/// Widest beam a call may ask for: the width the model is loaded for (sessions are planned for
/// each call's own width, up to this).
const MAX_BEAM: usize = 32;

/// CTranslate2's default cut of sources (`max_input_length`).
const CT2_MAX_INPUT_LENGTH: usize = 1024;

/// A translation model and its pool of batched sessions.
#[pyclass(module = "tessel._tessel", frozen)]
pub struct Translator {
    model: Arc<Model<'static>>,
    vocab: Vocab,
    /// Text in, text out, where the directory has tokenizer files.
    text: Option<TextTranslator>,
    /// The generation config's decoding options (its decoder start and banned words).
    generation: DecodeOptions,
    by_languages: Mutex<HashMap<Languages, TextTranslator>>,
    pool: Pool<BatchShape, IdsBatch>,
    isa: Isa,
    intra_threads: usize,
    /// The constructor's arguments, which pickling stores to reopen the model.
    opened_with: OpenedWith,
}

/// What [`Translator::__reduce__`] stores.
#[derive(Clone)]
struct OpenedWith {
    path: PathBuf,
    compute_type: String,
    inter_threads: usize,
    intra_threads: usize,
}

/// A source and a target language (`None`: the model's default).
type Languages = (Option<String>, Option<String>);

/// Where tokens get their ids.
enum Vocab {
    /// A CTranslate2 directory's vocabularies and token settings.
    Ct2(Box<Ct2Vocab>),
    /// The tokenizer of [`Translator::text`].
    Tokenizer,
}

/// One example's result, as CTranslate2's `TranslationResult`.
#[pyclass(module = "tessel._tessel", frozen, get_all)]
pub struct TranslationResult {
    /// The hypotheses' tokens, best first.
    hypotheses: Vec<Vec<String>>,
    /// Their scores when `return_scores` was set, else empty.
    scores: Vec<f32>,
    /// Always empty: tessel does not return attention.
    attention: Vec<Vec<Vec<f32>>>,
    /// Always empty: tessel does not return logits.
    logits: Vec<Vec<f32>>,
}

#[pymethods]
impl TranslationResult {
    fn __repr__(&self) -> String {
        format!(
            "TranslationResult(hypotheses={:?}, scores={:?})",
            self.hypotheses, self.scores
        )
    }
}

#[pymethods]
impl Translator {
    /// Loads a model directory (CTranslate2 or Hugging Face) for translation.
    #[new]
    #[pyo3(signature = (model_path, device="cpu", *, device_index=0, compute_type="default",
        inter_threads=1, intra_threads=0, max_queued_batches=0, flash_attention=false,
        tensor_parallel=false, files=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model_path: PathBuf,
        device: &str,
        device_index: i64,
        compute_type: &str,
        inter_threads: usize,
        intra_threads: usize,
        max_queued_batches: i64,
        flash_attention: bool,
        tensor_parallel: bool,
        files: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Translator> {
        settings::cpu_only(device)?;
        let _ = (device_index, max_queued_batches);
        if flash_attention || tensor_parallel {
            return Err(errors::unsupported(
                "flash_attention and tensor_parallel",
                "GPU features",
            ));
        }
        if files.is_some() {
            return Err(errors::unsupported("files", "give a model directory"));
        }
        let load = LoadSettings {
            max_beam: MAX_BEAM,
            weights: settings::weights(compute_type)?,
            ..LoadSettings::default()
        };
        let (model, vocab, text, generation) = py.detach(|| open(&model_path, load))?;
        let opened_with = OpenedWith {
            path: model_path,
            compute_type: compute_type.to_owned(),
            inter_threads,
            intra_threads,
        };
        Ok(Translator {
            opened_with,
            model,
            vocab,
            text,
            generation,
            by_languages: Mutex::new(HashMap::new()),
            pool: Pool::new(inter_threads),
            isa: settings::isa()?,
            intra_threads: settings::threads(intra_threads),
        })
    }

    /// Translates tokenized sources (CTranslate2's `translate_batch`).
    #[pyo3(signature = (source, target_prefix=None, *, max_batch_size=0, batch_type="examples",
        asynchronous=false, beam_size=2, patience=1.0, num_hypotheses=1, length_penalty=1.0,
        coverage_penalty=0.0, repetition_penalty=1.0, no_repeat_ngram_size=0, disable_unk=false,
        suppress_sequences=None, end_token=None, return_end_token=false, prefix_bias_beta=0.0,
        max_input_length=CT2_MAX_INPUT_LENGTH, max_decoding_length=256, min_decoding_length=1,
        use_vmap=false, return_scores=false, return_logits_vocab=false, return_attention=false,
        return_alternatives=false, min_alternative_expansion_prob=0.0, sampling_topk=1,
        sampling_topp=1.0, sampling_temperature=1.0, replace_unknowns=false, callback=None,
        sampling_seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn translate_batch(
        &self,
        py: Python<'_>,
        source: Vec<Vec<String>>,
        target_prefix: Option<Vec<Option<Vec<String>>>>,
        max_batch_size: usize,
        batch_type: &str,
        asynchronous: bool,
        beam_size: usize,
        patience: f32,
        num_hypotheses: usize,
        length_penalty: f32,
        coverage_penalty: f32,
        repetition_penalty: f32,
        no_repeat_ngram_size: usize,
        disable_unk: bool,
        suppress_sequences: Option<Vec<Vec<String>>>,
        end_token: Option<String>,
        return_end_token: bool,
        prefix_bias_beta: f32,
        max_input_length: usize,
        max_decoding_length: usize,
        min_decoding_length: usize,
        use_vmap: bool,
        return_scores: bool,
        return_logits_vocab: bool,
        return_attention: bool,
        return_alternatives: bool,
        min_alternative_expansion_prob: f32,
        sampling_topk: usize,
        sampling_topp: f32,
        sampling_temperature: f32,
        replace_unknowns: bool,
        callback: Option<Bound<'_, PyAny>>,
        sampling_seed: Option<u64>,
    ) -> PyResult<Vec<TranslationResult>> {
        let _ = min_alternative_expansion_prob;
        for (name, off, why) in [
            (
                "batch_type=\"tokens\"",
                batch_type == "examples",
                "batches count examples",
            ),
            ("asynchronous", !asynchronous, "calls return their results"),
            (
                "patience",
                patience == 1.0,
                "beam search stops as CTranslate2's does at 1",
            ),
            (
                "coverage_penalty",
                coverage_penalty == 0.0,
                "no attention is kept",
            ),
            (
                "prefix_bias_beta",
                prefix_bias_beta == 0.0,
                "prefixes are forced",
            ),
            ("use_vmap", !use_vmap, "no vocabulary map"),
            (
                "return_logits_vocab",
                !return_logits_vocab,
                "logits stay in the arena",
            ),
            (
                "return_attention",
                !return_attention,
                "no attention is kept",
            ),
            (
                "return_alternatives",
                !return_alternatives,
                "no alternatives",
            ),
            (
                "replace_unknowns",
                !replace_unknowns,
                "no attention is kept",
            ),
            ("callback", callback.is_none(), "results come back together"),
        ] {
            if !off {
                return Err(errors::unsupported(name, why));
            }
        }
        if batch_type != "examples" && batch_type != "tokens" {
            return Err(errors::input(format!(
                "batch_type {batch_type:?}: expected \"examples\""
            )));
        }
        if let Some(end) = &end_token {
            if self.target_id(end) != Some(self.model.config().eos_id) {
                return Err(errors::unsupported(
                    "end_token other than the model's",
                    "the model's end token ends every hypothesis",
                ));
            }
        }
        if let Some(prefixes) = &target_prefix {
            if prefixes.len() != source.len() {
                return Err(errors::input(format!(
                    "target_prefix has {} entries for {} sources",
                    prefixes.len(),
                    source.len()
                )));
            }
        }
        let search = Search {
            beam_size,
            num_hypotheses,
            length_penalty,
            repetition_penalty,
            no_repeat_ngram_size,
            max_decoding_length,
            min_decoding_length,
            sampling: (sampling_topk != 1).then(|| Sampling {
                temperature: sampling_temperature,
                top_k: sampling_topk,
                top_p: sampling_topp,
                seed: sampling_seed.unwrap_or_else(random_seed),
            }),
        };
        let mut options = search.options(&self.generation)?;
        options
            .bad_words
            .extend(self.suppressed(suppress_sequences.as_deref(), disable_unk)?);
        let sources = source
            .iter()
            .map(|tokens| self.source_ids(tokens, max_input_length))
            .collect::<PyResult<Vec<_>>>()?;
        let per_example: Vec<DecodeOptions> = match &target_prefix {
            None => Vec::new(),
            Some(prefixes) => prefixes
                .iter()
                .map(|prefix| {
                    let mut o = options.clone();
                    o.prefix = self.target_ids(prefix.as_deref().unwrap_or_default())?;
                    Ok(o)
                })
                .collect::<PyResult<_>>()?,
        };
        let jobs: Vec<(&[u32], &DecodeOptions)> = sources
            .iter()
            .enumerate()
            .map(|(i, ids)| (ids.as_slice(), per_example.get(i).unwrap_or(&options)))
            .collect();
        let outcomes = py.detach(|| self.run(&jobs, beam_size, max_batch_size))?;
        outcomes
            .into_iter()
            .map(|outcome| {
                let hyps = outcome.map_err(errors::translate)?;
                Ok(self.result(hyps, return_end_token, return_scores))
            })
            .collect()
    }

    /// Translates texts with the directory's tokenizer and generation config (the languages
    /// for the families that have them), as `transformers`' translation pipeline does: the
    /// best hypothesis's text for each. `beam_size` and `max_length` replace the generation
    /// config's `num_beams` and `max_length`; a text longer than the model reads is refused
    /// unless `truncate` is set.
    #[pyo3(signature = (texts, src_lang=None, tgt_lang=None, *, beam_size=None,
        max_length=None, max_batch_size=0, truncate=false))]
    #[allow(clippy::too_many_arguments)]
    fn translate(
        &self,
        py: Python<'_>,
        texts: Vec<String>,
        src_lang: Option<String>,
        tgt_lang: Option<String>,
        beam_size: Option<usize>,
        max_length: Option<usize>,
        max_batch_size: usize,
        truncate: bool,
    ) -> PyResult<Vec<String>> {
        let translator = self.for_languages(src_lang, tgt_lang)?;
        let mut options = TranslateOptions {
            truncate,
            ..translator.defaults().clone()
        };
        if let Some(beam) = beam_size {
            check_beam(beam)?;
            options.decode.search.beam = beam;
        }
        if let Some(max) = max_length {
            options.decode.max_length = max;
            options.decode.max_new_tokens = None;
        }
        let beam = options.decode.search.beam.clamp(1, MAX_BEAM);
        let max = self.model.config().max_src_len;
        py.detach(|| {
            let sources = texts
                .iter()
                .map(|text| translator.source_ids(text, max, &options))
                .collect::<Result<Vec<_>, _>>()
                .map_err(errors::translate)?;
            let jobs: Vec<(&[u32], &DecodeOptions)> = sources
                .iter()
                .map(|ids| (ids.as_slice(), &options.decode))
                .collect();
            let outcomes = self.run(&jobs, beam, max_batch_size)?;
            outcomes
                .into_iter()
                .map(|outcome| {
                    let hyps = translator.texts(outcome?)?;
                    Ok(hyps.into_iter().next().map(|h| h.text).unwrap_or_default())
                })
                .collect::<Result<Vec<_>, TranslateError>>()
                .map_err(errors::translate)
        })
    }

    /// Pickles as the path and options, which reopen the model (`copyreg.__newobj_ex__`
    /// calls the constructor with them).
    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(
        Bound<'py, PyAny>,
        (Bound<'py, PyType>, (PathBuf,), Bound<'py, PyDict>),
    )> {
        let newobj = py.import("copyreg")?.getattr("__newobj_ex__")?;
        let o = &self.opened_with;
        let kwargs = PyDict::new(py);
        kwargs.set_item("compute_type", &o.compute_type)?;
        kwargs.set_item("inter_threads", o.inter_threads)?;
        kwargs.set_item("intra_threads", o.intra_threads)?;
        Ok((
            newobj,
            (py.get_type::<Translator>(), (o.path.clone(),), kwargs),
        ))
    }

    /// The model directory.
    #[getter]
    fn model_path(&self) -> PathBuf {
        self.opened_with.path.clone()
    }

    /// Threads each batch's products run on.
    #[getter]
    fn intra_threads(&self) -> usize {
        self.intra_threads
    }

    /// Batches decoded at once at the most.
    #[getter]
    fn inter_threads(&self) -> usize {
        self.pool.capacity()
    }
}

/// The model, how its tokens map, its text translator (where the directory has tokenizer
/// files) and its generation config's options.
type Opened = (
    Arc<Model<'static>>,
    Vocab,
    Option<TextTranslator>,
    DecodeOptions,
);

/// Loads a translation model directory.
fn open(path: &Path, settings: LoadSettings) -> PyResult<Opened> {
    let directory = Directory::open(path).map_err(errors::load)?;
    if directory.modality() == Some(Modality::Speech) {
        return Err(errors::input(format!(
            "{} holds a Whisper model: load it with WhisperModel",
            path.display()
        )));
    }
    let generation = directory.generation().options.clone();
    let loaded = directory.load(&settings).map_err(errors::load)?;
    let vocab = match &loaded.ct2 {
        Some(ct2) => Vocab::Ct2(Box::new(ct2.clone())),
        None => Vocab::Tokenizer,
    };
    match TextTokenizer::from_dir(directory.path()) {
        Ok(tokenizer) => {
            let dir = ModelDir::with_tokenizer(directory, loaded, tokenizer)
                .map_err(|e| errors::translate(e.into()))?;
            let text = TextTranslator::new(dir, None, None).map_err(errors::translate)?;
            Ok((Arc::clone(text.model()), vocab, Some(text), generation))
        }
        // A CTranslate2 directory translates tokens without tokenizer files.
        Err(_) if matches!(vocab, Vocab::Ct2(_)) => {
            Ok((Arc::new(loaded.model), vocab, None, generation))
        }
        Err(error) => Err(errors::load(error)),
    }
}

impl Translator {
    /// The text translator, for the pair of languages (`None`: the model's default), made
    /// once per pair.
    fn for_languages(&self, src: Option<String>, tgt: Option<String>) -> PyResult<TextTranslator> {
        let Some(text) = &self.text else {
            return Err(errors::input(
                "the model directory has no tokenizer files: translate() needs them \
                 (translate_batch takes tokens)",
            ));
        };
        if src.is_none() && tgt.is_none() {
            return Ok(text.clone());
        }
        let mut cache = lock(&self.by_languages);
        let key = (src, tgt);
        if let Some(t) = cache.get(&key) {
            return Ok(t.clone());
        }
        let t = text
            .with_languages(key.0.as_deref(), key.1.as_deref())
            .map_err(errors::translate)?;
        cache.insert(key, t.clone());
        Ok(t)
    }

    /// The tokenizer behind [`Vocab::Tokenizer`].
    fn tokenizer(&self) -> &TextTokenizer {
        self.text
            .as_ref()
            .expect("a directory without a CTranslate2 vocabulary has a tokenizer")
            .tokenizer()
    }

    /// A source's ids: cut to `max_input_length` tokens (0: no cut), mapped as CTranslate2
    /// maps them (its vocabulary, unknown tokens as `unk_token`, the special tokens its
    /// config adds) or through the tokenizer's vocabulary (unknown tokens as `<unk>`).
    fn source_ids(&self, tokens: &[String], max_input_length: usize) -> PyResult<Vec<u32>> {
        let tokens = match max_input_length {
            0 => tokens,
            n => &tokens[..tokens.len().min(n)],
        };
        if let Vocab::Ct2(vocab) = &self.vocab {
            return Ok(vocab.source_ids(tokens));
        }
        let tokenizer = self.tokenizer();
        tokens
            .iter()
            .map(|t| match tokenizer.token_to_id(t) {
                Some(id) => Ok(id),
                None => self.unk(t),
            })
            .collect()
    }

    /// A target token's id.
    fn target_id(&self, token: &str) -> Option<u32> {
        match &self.vocab {
            Vocab::Ct2(vocab) => vocab.target.id(token),
            Vocab::Tokenizer => self.tokenizer().target_token_to_id(token),
        }
    }

    /// A target id's token; ids past the vocabulary (the padding rows of T5's embedding) read
    /// as the unknown token.
    fn token(&self, id: u32) -> String {
        let found = match &self.vocab {
            Vocab::Ct2(vocab) => vocab.target.token(id).map(str::to_owned),
            Vocab::Tokenizer => self.tokenizer().id_to_token(id),
        };
        found.unwrap_or_else(|| self.unk_token().to_owned())
    }

    fn unk_token(&self) -> &str {
        match &self.vocab {
            Vocab::Ct2(vocab) => &vocab.tokens.unk_token,
            Vocab::Tokenizer => "<unk>",
        }
    }

    /// The unknown token's id, for `token`, which the vocabulary lacks.
    fn unk(&self, token: &str) -> PyResult<u32> {
        self.target_id(self.unk_token()).ok_or_else(|| {
            errors::input(format!(
                "token {token:?} is not in the vocabulary, which has no {}",
                self.unk_token()
            ))
        })
    }

    /// A target prefix's ids: every token must be in the target vocabulary.
    fn target_ids(&self, tokens: &[String]) -> PyResult<Vec<u32>> {
        tokens
            .iter()
            .map(|t| {
                self.target_id(t).ok_or_else(|| {
                    errors::input(format!("target token {t:?} is not in the vocabulary"))
                })
            })
            .collect()
    }

    /// `suppress_sequences` (and the unknown token when `disable_unk`) as banned sequences.
    fn suppressed(
        &self,
        sequences: Option<&[Vec<String>]>,
        disable_unk: bool,
    ) -> PyResult<Vec<Vec<u32>>> {
        let mut banned = Vec::new();
        for sequence in sequences.unwrap_or_default() {
            banned.push(self.target_ids(sequence)?);
        }
        if disable_unk {
            banned.push(vec![self.unk(self.unk_token())?]);
        }
        Ok(banned)
    }

    /// One example's hypotheses as tokens.
    fn result(
        &self,
        hyps: Vec<Hypothesis>,
        return_end_token: bool,
        return_scores: bool,
    ) -> TranslationResult {
        let eos = self.model.config().eos_id;
        let mut hypotheses = Vec::with_capacity(hyps.len());
        let mut scores = Vec::new();
        for h in hyps {
            let mut ids = h.tokens.as_slice();
            if !return_end_token {
                if let Some((&last, rest)) = ids.split_last() {
                    if last == eos {
                        ids = rest;
                    }
                }
            }
            hypotheses.push(ids.iter().map(|&id| self.token(id)).collect());
            if return_scores {
                scores.push(h.score);
            }
        }
        if hypotheses.is_empty() {
            // An empty source: one empty hypothesis, as an empty line translates to nothing.
            hypotheses.push(Vec::new());
            if return_scores {
                scores.push(0.0);
            }
        }
        TranslationResult {
            hypotheses,
            scores,
            attention: Vec::new(),
            logits: Vec::new(),
        }
    }

    /// Decodes the jobs with beams up to `beam`, longest first, in batches of
    /// `max_batch_size` (0: [`BatchShape::default_batch`]) on up to the pool's sessions at
    /// once.
    fn run(
        &self,
        jobs: &[(&[u32], &DecodeOptions)],
        beam: usize,
        max_batch_size: usize,
    ) -> PyResult<Vec<IdsResult>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let config = self.model.config();
        let threads = self.intra_threads;
        let slots = match max_batch_size {
            0 => BatchShape::default_batch(config, threads, beam, jobs.len())
                .map_err(errors::translate)?,
            n => n.min(jobs.len()),
        };
        let shape = BatchShape {
            threads,
            max_batch: slots,
            max_beam: beam,
        };
        let groups = groups(jobs, slots, self.pool.capacity());
        let outcomes = std::thread::scope(|scope| {
            let handles: Vec<_> = groups
                .iter()
                .map(|group| {
                    scope.spawn(move || -> PyResult<Vec<IdsResult>> {
                        let mut session = self.pool.take(shape, || {
                            IdsBatch::new(Arc::clone(&self.model), self.isa, shape)
                                .map_err(errors::translate)
                        })?;
                        let group_jobs: Vec<_> = group.iter().map(|&i| jobs[i]).collect();
                        let out = session.translate_ids(&group_jobs);
                        self.pool.put(shape, session);
                        Ok(out)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect::<Vec<_>>()
        });
        let mut results: Vec<Option<IdsResult>> = jobs.iter().map(|_| None).collect();
        for (group, outcome) in groups.iter().zip(outcomes) {
            for (&index, result) in group.iter().zip(outcome?) {
                results[index] = Some(result);
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every job is in one group"))
            .collect())
    }
}

/// The jobs' indices, longest source first, dealt batch by batch to at most `workers` groups
/// (each group's batches are then the same as one session would form).
fn groups(jobs: &[(&[u32], &DecodeOptions)], slots: usize, workers: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(jobs[i].0.len()));
    let batches: Vec<&[usize]> = order.chunks(slots.max(1)).collect();
    let count = workers.min(batches.len()).max(1);
    let mut groups = vec![Vec::new(); count];
    for (n, batch) in batches.iter().enumerate() {
        groups[n % count].extend_from_slice(batch);
    }
    groups
}

/// The search keywords of `translate_batch`.
struct Search {
    beam_size: usize,
    num_hypotheses: usize,
    length_penalty: f32,
    repetition_penalty: f32,
    no_repeat_ngram_size: usize,
    max_decoding_length: usize,
    min_decoding_length: usize,
    sampling: Option<Sampling>,
}

impl Search {
    /// The options CTranslate2 would search with: its convention and lengths, nothing of the
    /// generation config (`generation`) but the decoder start and banned words it fixes for
    /// the model.
    fn options(&self, generation: &DecodeOptions) -> PyResult<DecodeOptions> {
        let beam = self.beam_size;
        check_beam(beam)?;
        if self.num_hypotheses == 0 || self.num_hypotheses > beam.max(1) && self.sampling.is_none()
        {
            return Err(errors::input(format!(
                "num_hypotheses {}: expected 1 to beam_size ({beam})",
                self.num_hypotheses
            )));
        }
        if self.sampling.is_some() && (beam != 1 || self.num_hypotheses != 1) {
            return Err(errors::unsupported(
                "sampling with beam_size or num_hypotheses above 1",
                "one hypothesis is drawn",
            ));
        }
        let mut o = generation.clone();
        o.search.beam = beam;
        o.search.length_penalty = self.length_penalty;
        o.search.sampling = self.sampling;
        o.num_hypotheses = self.num_hypotheses;
        o.max_new_tokens = Some(self.max_decoding_length);
        o.max_length = usize::MAX;
        o.max_length_ratio = None;
        o.min_length = self.min_decoding_length + 1;
        o.repetition_penalty = self.repetition_penalty;
        o.no_repeat_ngram_size = self.no_repeat_ngram_size;
        o.suppress_tokens.clear();
        o.forced_bos = None;
        o.forced_eos = None;
        o.prefix.clear();
        o.renormalize_logits = false;
        o.convention = Convention::CTranslate2;
        Ok(o)
    }
}

fn check_beam(beam: usize) -> PyResult<()> {
    if beam == 0 || beam > MAX_BEAM {
        return Err(errors::input(format!(
            "beam_size {beam}: expected 1 to {MAX_BEAM}"
        )));
    }
    Ok(())
}

/// A seed that differs from call to call (the standard library's per-process random keys).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}
