//! `tessel.Translator`: CTranslate2's `Translator` over tessel's batched sessions.
//!
//! `translate_batch` takes and returns tokens, as CTranslate2's does ([`tokens`]: a
//! CTranslate2 directory maps them with its own vocabularies and `config.json`, so it needs no
//! tokenizer files; a Hugging Face directory with its tokenizer's vocabulary). The hypotheses
//! come back as tokens, without the end token unless asked, with their scores when asked. The
//! search follows CTranslate2's rules with its defaults ([`search`]: beam 2, at most 256
//! tokens, at least 1). `translate` is text in, text out with the directory's tokenizer and
//! generation config, as `transformers`' pipeline translates.
//!
//! Each call runs its batches on up to `inter_threads` pooled sessions at once, each on
//! `intra_threads` threads, with the GIL released ([`batches`]). Every example's hypotheses
//! are those it gets decoded alone.

mod batches;
mod pending;
mod score;
mod search;
mod stream;
mod tokens;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};
use tessel_model::load::directory::{Directory, Modality};
use tessel_model::{DecodeOptions, Model, Sampling};
use tessel_pipeline::{
    LoadSettings, ModelDir, TranslateError, TranslateOptions, Translator as TextTranslator,
};
use tessel_text::TextTokenizer;

use crate::pool::{lock, Pool};
use crate::{errors, settings};
use batches::{BatchType, Batches, Job};
pub use pending::AsyncTranslationResult;
use pending::Decode;
pub use score::ScoringResult;
use score::{ScoreJob, Singles};
use search::{check_beam, refuse_unsupported, Search, MAX_BEAM};
pub use stream::{GenerationStepResult, TokenStream};
use tokens::Tokens;

/// CTranslate2's default cut of sources (`max_input_length`).
const CT2_MAX_INPUT_LENGTH: usize = 1024;

/// A translation model and its pool of batched sessions (`tessel.Translator` subclasses it
/// with the iterable methods, as CTranslate2 adds them in Python).
#[pyclass(module = "tessel._tessel", frozen, subclass)]
pub struct Translator {
    batches: Batches,
    singles: Arc<Singles>,
    tokens: Tokens,
    /// Text in, text out, where the directory has tokenizer files.
    text: Option<TextTranslator>,
    /// The generation config's decoding options (its decoder start and banned words).
    generation: DecodeOptions,
    by_languages: Mutex<HashMap<Languages, TextTranslator>>,
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

/// One example's result, as CTranslate2's `TranslationResult`.
#[derive(Clone)]
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
        refuse_unsupported(&[
            ("flash_attention", !flash_attention, "a GPU feature"),
            ("tensor_parallel", !tensor_parallel, "a GPU feature"),
            ("files", files.is_none(), "give a model directory"),
        ])?;
        let load = LoadSettings {
            max_beam: MAX_BEAM,
            weights: settings::weights(compute_type)?,
            ..LoadSettings::default()
        };
        let (model, tokens, text, generation) = py.detach(|| open(&model_path, load))?;
        let (isa, threads) = (settings::isa()?, settings::threads(intra_threads));
        Ok(Translator {
            singles: Arc::new(Singles::new(
                Arc::clone(&model),
                (isa, threads),
                inter_threads,
            )),
            batches: Batches {
                model,
                pool: Pool::new(inter_threads),
                isa,
                threads,
            },
            tokens,
            text,
            generation,
            by_languages: Mutex::new(HashMap::new()),
            opened_with: OpenedWith {
                path: model_path,
                compute_type: compute_type.to_owned(),
                inter_threads,
                intra_threads,
            },
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
        slf: &Bound<'_, Self>,
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
    ) -> PyResult<Vec<Py<PyAny>>> {
        let _ = min_alternative_expansion_prob;
        let (py, this) = (slf.py(), slf.get());
        refuse_unsupported(&[
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
        ])?;
        let batch_type = BatchType::parse(batch_type)?;
        let search = Search {
            beam_size,
            num_hypotheses,
            length_penalty,
            patience,
            repetition_penalty,
            no_repeat_ngram_size,
            max_decoding_length,
            min_decoding_length,
            sampling: sampling(
                (sampling_topk, sampling_topp, sampling_temperature),
                sampling_seed,
            ),
        };
        let banned = (suppress_sequences.as_deref(), disable_unk);
        let options = this.options(&search, banned, end_token.as_deref())?;
        let sources = source
            .iter()
            .map(|tokens| this.tokens.source_ids(tokens, max_input_length))
            .collect::<PyResult<Vec<_>>>()?;
        let per_example = this.with_prefixes(&options, target_prefix.as_deref(), source.len())?;
        let decode = Decode {
            sources,
            per_example,
            options,
            beam: beam_size,
            batching: (max_batch_size, batch_type),
            return_end_token,
            return_scores,
        };
        if asynchronous {
            let pending = pending::start(slf.clone().unbind(), decode)?;
            return pending
                .into_iter()
                .map(|p| Ok(Py::new(py, p)?.into_any()))
                .collect();
        }
        let outcomes = py.detach(|| decode.run(this))?;
        outcomes
            .into_iter()
            .map(|outcome| Ok(Py::new(py, outcome?)?.into_any()))
            .collect()
    }

    /// Decodes one tokenized source greedily (or by sampling) and yields each token as soon
    /// as it is chosen (CTranslate2's `generate_tokens`): the target prefix's tokens first,
    /// then the generated ones, the last marked `is_last`.
    #[pyo3(signature = (source, target_prefix=None, *, max_decoding_length=256,
        min_decoding_length=1, sampling_topk=1, sampling_topp=1.0, sampling_temperature=1.0,
        return_log_prob=false, repetition_penalty=1.0, no_repeat_ngram_size=0,
        disable_unk=false, suppress_sequences=None, end_token=None,
        max_input_length=CT2_MAX_INPUT_LENGTH, use_vmap=false, sampling_seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn generate_tokens(
        slf: &Bound<'_, Self>,
        source: Vec<String>,
        target_prefix: Option<Vec<String>>,
        max_decoding_length: usize,
        min_decoding_length: usize,
        sampling_topk: usize,
        sampling_topp: f32,
        sampling_temperature: f32,
        return_log_prob: bool,
        repetition_penalty: f32,
        no_repeat_ngram_size: usize,
        disable_unk: bool,
        suppress_sequences: Option<Vec<Vec<String>>>,
        end_token: Option<String>,
        max_input_length: usize,
        use_vmap: bool,
        sampling_seed: Option<u64>,
    ) -> PyResult<stream::TokenStream> {
        refuse_unsupported(&[("use_vmap", !use_vmap, "no vocabulary map")])?;
        let this = slf.get();
        let search = Search {
            beam_size: 1,
            num_hypotheses: 1,
            length_penalty: 1.0,
            patience: 1.0,
            repetition_penalty,
            no_repeat_ngram_size,
            max_decoding_length,
            min_decoding_length,
            sampling: sampling(
                (sampling_topk, sampling_topp, sampling_temperature),
                sampling_seed,
            ),
        };
        let banned = (suppress_sequences.as_deref(), disable_unk);
        let mut options = this.options(&search, banned, end_token.as_deref())?;
        options.prefix = this
            .tokens
            .target_ids(target_prefix.as_deref().unwrap_or_default())?;
        let ids = this.tokens.source_ids(&source, max_input_length)?;
        let singles = Arc::clone(&this.singles);
        stream::start(
            slf.clone().unbind(),
            singles,
            (ids, options),
            return_log_prob,
        )
    }

    /// Scores tokenized targets after their sources (CTranslate2's `score_batch`): per
    /// example, the log-probability of each target token and of the end token after it,
    /// teacher-forced. Sources and decoder inputs (the start token and the target) are cut to
    /// `max_input_length` (0: no cut); `offset` leaves out the first tokens' scores.
    #[pyo3(signature = (source, target, *, max_batch_size=0, batch_type="examples",
        max_input_length=CT2_MAX_INPUT_LENGTH, offset=0, asynchronous=false))]
    #[allow(clippy::too_many_arguments)]
    fn score_batch(
        &self,
        py: Python<'_>,
        source: Vec<Vec<String>>,
        target: Vec<Vec<String>>,
        max_batch_size: usize,
        batch_type: &str,
        max_input_length: usize,
        offset: usize,
        asynchronous: bool,
    ) -> PyResult<Vec<ScoringResult>> {
        let _ = max_batch_size;
        refuse_unsupported(&[("asynchronous", !asynchronous, "calls return their results")])?;
        BatchType::parse(batch_type)?;
        if source.len() != target.len() {
            return Err(errors::input(format!(
                "{} sources for {} targets",
                source.len(),
                target.len()
            )));
        }
        let kept = match max_input_length {
            0 => usize::MAX,
            n => n - 1,
        };
        let jobs = source
            .iter()
            .zip(&target)
            .map(|(s, t)| {
                let t = &t[..t.len().min(kept)];
                Ok((
                    self.tokens.source_ids(s, max_input_length)?,
                    self.tokens.target_ids(t)?,
                ))
            })
            .collect::<PyResult<Vec<ScoreJob>>>()?;
        let scores = py.detach(|| self.singles.score(&jobs))?;
        let eos = self.batches.model.config().eos_id;
        Ok(jobs
            .iter()
            .zip(scores)
            .map(|((source, ids), log_probs)| {
                let tokens = ids.iter().chain([&eos]).map(|&id| self.tokens.token(id));
                // CTranslate2 returns an empty source's zeros without the offset.
                let skip = if source.is_empty() { 0 } else { offset };
                ScoringResult::new(tokens.collect(), log_probs, skip)
            })
            .collect())
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
        let max = self.batches.model.config().max_src_len;
        py.detach(|| {
            let sources = texts
                .iter()
                .map(|text| translator.source_ids(text, max, &options))
                .collect::<Result<Vec<_>, _>>()
                .map_err(errors::translate)?;
            let jobs: Vec<Job<'_>> = sources
                .iter()
                .map(|ids| (ids.as_slice(), &options.decode))
                .collect();
            let batching = (max_batch_size, BatchType::Examples);
            let outcomes = self.batches.run(&jobs, beam, batching)?;
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
    /// calls the constructor of the object's own class with them).
    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(
        Bound<'py, PyAny>,
        (Bound<'py, PyType>, (PathBuf,), Bound<'py, PyDict>),
    )> {
        let py = slf.py();
        let newobj = py.import("copyreg")?.getattr("__newobj_ex__")?;
        let o = &slf.get().opened_with;
        let kwargs = PyDict::new(py);
        kwargs.set_item("compute_type", &o.compute_type)?;
        kwargs.set_item("inter_threads", o.inter_threads)?;
        kwargs.set_item("intra_threads", o.intra_threads)?;
        Ok((newobj, (slf.get_type(), (o.path.clone(),), kwargs)))
    }

    /// The model directory.
    #[getter]
    fn model_path(&self) -> PathBuf {
        self.opened_with.path.clone()
    }

    /// Threads each batch's products run on.
    #[getter]
    fn intra_threads(&self) -> usize {
        self.batches.threads
    }

    /// Batches decoded at once at the most.
    #[getter]
    fn inter_threads(&self) -> usize {
        self.batches.pool.capacity()
    }
}

/// Sampling as CTranslate2's keywords ask for it (`top_k`, `top_p`, temperature): none for
/// `top_k` 1 (greedy); `seed` or a new one.
fn sampling((top_k, top_p, temperature): (usize, f32, f32), seed: Option<u64>) -> Option<Sampling> {
    (top_k != 1).then(|| Sampling {
        temperature,
        top_k,
        top_p,
        seed: seed.unwrap_or_else(tessel_pipeline::random_seed),
    })
}

/// The model, how its tokens map, its text translator (where the directory has tokenizer
/// files) and its generation config's options.
type Opened = (
    Arc<Model<'static>>,
    Tokens,
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
    let ct2 = loaded.ct2.clone();
    match (TextTokenizer::from_dir(directory.path()), ct2) {
        (Ok(tokenizer), ct2) => {
            let tokens = match ct2 {
                Some(vocab) => Tokens::Ct2(Box::new(vocab)),
                None => Tokens::Tokenizer(Box::new(tokenizer.clone())),
            };
            let dir = ModelDir::with_tokenizer(directory, loaded, tokenizer)
                .map_err(|e| errors::translate(e.into()))?;
            let text = TextTranslator::new(dir, None, None).map_err(errors::translate)?;
            Ok((Arc::clone(text.model()), tokens, Some(text), generation))
        }
        // A CTranslate2 directory translates tokens without tokenizer files.
        (Err(_), Some(vocab)) => Ok((
            Arc::new(loaded.model),
            Tokens::Ct2(Box::new(vocab)),
            None,
            generation,
        )),
        (Err(error), None) => Err(errors::load(error)),
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

    /// The options CTranslate2 would decode with for `search`, the sequences `banned`
    /// (`suppress_sequences`, `disable_unk`) banned, after checking `end_token`.
    fn options(
        &self,
        search: &Search,
        banned: (Option<&[Vec<String>]>, bool),
        end_token: Option<&str>,
    ) -> PyResult<DecodeOptions> {
        self.check_end_token(end_token)?;
        let mut options = search.options(&self.generation)?;
        let banned = self.tokens.suppressed(banned.0, banned.1)?;
        options.bad_words.extend(banned);
        Ok(options)
    }

    /// A target id's token.
    pub(crate) fn token(&self, id: u32) -> String {
        self.tokens.token(id)
    }

    /// Refuses an end token other than the model's.
    fn check_end_token(&self, end_token: Option<&str>) -> PyResult<()> {
        let Some(end) = end_token else {
            return Ok(());
        };
        if self.tokens.target_id(end) == Some(self.batches.model.config().eos_id) {
            return Ok(());
        }
        Err(errors::unsupported(
            "end_token other than the model's",
            "the model's end token ends every hypothesis",
        ))
    }

    /// Per source, `options` with its target prefix (empty without `target_prefix`, which
    /// must have one entry per source).
    fn with_prefixes(
        &self,
        options: &DecodeOptions,
        target_prefix: Option<&[Option<Vec<String>>]>,
        sources: usize,
    ) -> PyResult<Vec<DecodeOptions>> {
        let Some(prefixes) = target_prefix else {
            return Ok(Vec::new());
        };
        if prefixes.len() != sources {
            return Err(errors::input(format!(
                "target_prefix has {} entries for {sources} sources",
                prefixes.len()
            )));
        }
        prefixes
            .iter()
            .map(|prefix| {
                let mut o = options.clone();
                o.prefix = self
                    .tokens
                    .target_ids(prefix.as_deref().unwrap_or_default())?;
                Ok(o)
            })
            .collect()
    }
}
