//! `translate_batch`'s decoding as one piece ([`Decode`]), run in the call or, with
//! `asynchronous=True`, on a thread of its own: the call then returns at once with one
//! [`AsyncTranslationResult`] per source (CTranslate2's), each ready when the call's batches
//! are decoded. A failing source raises from its own `result()`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};

use pyo3::prelude::*;
use tessel_model::DecodeOptions;

use super::batches::{BatchType, Job};
use super::{TranslationResult, Translator};
use crate::errors;
use crate::pool::lock;

/// A `translate_batch` call's sources and options, ready to decode.
pub struct Decode {
    pub sources: Vec<Vec<u32>>,
    /// Per source, its options (with its target prefix); empty when every source has
    /// `options`.
    pub per_example: Vec<DecodeOptions>,
    pub options: DecodeOptions,
    pub beam: usize,
    pub batching: (usize, BatchType),
    pub return_end_token: bool,
    pub return_scores: bool,
}

/// One result per source, or why that source failed.
pub type Outcomes = Vec<PyResult<TranslationResult>>;

impl Decode {
    /// Decodes every source on `translator`'s sessions (no GIL needed).
    pub fn run(&self, translator: &Translator) -> PyResult<Outcomes> {
        let jobs: Vec<Job<'_>> = self
            .sources
            .iter()
            .enumerate()
            .map(|(i, ids)| {
                let options = self.per_example.get(i).unwrap_or(&self.options);
                (ids.as_slice(), options)
            })
            .collect();
        let outcomes = translator.batches.run(&jobs, self.beam, self.batching)?;
        let eos = translator.batches.model.config().eos_id;
        Ok(outcomes
            .into_iter()
            .map(|outcome| {
                let hyps = outcome.map_err(errors::translate)?;
                let (end, scores) = (self.return_end_token, self.return_scores);
                Ok(translator.tokens.result(hyps, eos, end, scores))
            })
            .collect())
    }
}

/// The outcomes of an asynchronous call, once its thread has them.
struct Shared {
    outcomes: Mutex<Option<PyResult<Outcomes>>>,
    ready: Condvar,
}

/// One source's result of an asynchronous `translate_batch`, as CTranslate2's.
#[pyclass(module = "tessel._tessel", frozen)]
pub struct AsyncTranslationResult {
    shared: Arc<Shared>,
    index: usize,
}

#[pymethods]
impl AsyncTranslationResult {
    /// Waits for the result (the GIL released) and returns it, or raises why this source
    /// failed.
    fn result(&self, py: Python<'_>) -> PyResult<TranslationResult> {
        py.detach(|| {
            let mut outcomes = lock(&self.shared.outcomes);
            while outcomes.is_none() {
                outcomes = self
                    .shared
                    .ready
                    .wait(outcomes)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        });
        let outcomes = lock(&self.shared.outcomes);
        match outcomes.as_ref() {
            Some(Ok(all)) => match &all[self.index] {
                Ok(result) => Ok(result.clone()),
                Err(error) => Err(error.clone_ref(py)),
            },
            Some(Err(error)) => Err(error.clone_ref(py)),
            None => Err(errors::run("the translation has no result")),
        }
    }

    /// Whether the result is ready.
    fn done(&self) -> bool {
        lock(&self.shared.outcomes).is_some()
    }
}

/// Starts decoding `decode` on a thread of its own: one pending result per source.
pub fn start(translator: Py<Translator>, decode: Decode) -> PyResult<Vec<AsyncTranslationResult>> {
    let shared = Arc::new(Shared {
        outcomes: Mutex::new(None),
        ready: Condvar::new(),
    });
    let count = decode.sources.len();
    let on_thread = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("tessel-translate".into())
        .spawn(move || {
            let run = catch_unwind(AssertUnwindSafe(|| decode.run(translator.get())));
            let outcomes =
                run.unwrap_or_else(|_| Err(errors::run("the translation thread panicked")));
            *lock(&on_thread.outcomes) = Some(outcomes);
            on_thread.ready.notify_all();
        })
        .map_err(errors::run)?;
    Ok((0..count)
        .map(|index| AsyncTranslationResult {
            shared: Arc::clone(&shared),
            index,
        })
        .collect())
}
