//! `score_batch`: each target's token log-probabilities after its source
//! ([`tessel_pipeline::score_ids`]), on pooled single-sequence sessions ([`Singles`], which
//! `generate_tokens` streams on too), the examples dealt to up to `inter_threads` sessions at
//! once (the GIL released).

use std::sync::Arc;

use pyo3::prelude::*;
use tessel_kernels::Isa;
use tessel_model::{Limits, Model, Session, SessionError};
use tessel_pipeline::{score_ids, TranslateError};

use crate::errors;
use crate::pool::Pool;

/// One example's scores, as CTranslate2's `ScoringResult`.
#[pyclass(module = "tessel._tessel", frozen, get_all)]
pub struct ScoringResult {
    /// The scored tokens: the target's, then the end token.
    tokens: Vec<String>,
    /// The log-probability of each.
    log_probs: Vec<f32>,
}

#[pymethods]
impl ScoringResult {
    fn __repr__(&self) -> String {
        format!(
            "ScoringResult(tokens={:?}, log_probs={:?})",
            self.tokens, self.log_probs
        )
    }
}

impl ScoringResult {
    /// The result of scored `tokens` (target then end token), without the first `offset`.
    pub fn new(tokens: Vec<String>, log_probs: Vec<f32>, offset: usize) -> ScoringResult {
        let skip = offset.min(tokens.len());
        ScoringResult {
            tokens: tokens[skip..].to_vec(),
            log_probs: log_probs[skip.min(log_probs.len())..].to_vec(),
        }
    }
}

/// A source's ids and its target's ids.
pub type ScoreJob = (Vec<u32>, Vec<u32>);

/// A model's single-sequence sessions (beam 1, each on `threads` threads).
pub struct Singles {
    pub model: Arc<Model<'static>>,
    pub isa: Isa,
    pub threads: usize,
    pub pool: Pool<(), Session<Arc<Model<'static>>>>,
}

impl Singles {
    /// Room for `capacity` sessions over `model` at once.
    pub fn new(
        model: Arc<Model<'static>>,
        (isa, threads): (Isa, usize),
        capacity: usize,
    ) -> Singles {
        Singles {
            model,
            isa,
            threads,
            pool: Pool::new(capacity),
        }
    }

    /// A new session.
    pub fn make(&self) -> PyResult<Session<Arc<Model<'static>>>> {
        let limits = Limits {
            max_beam: 1,
            ..Limits::of(self.model.config()).with_threads(self.threads)
        };
        Session::with_limits(Arc::clone(&self.model), self.isa, limits)
            .map_err(|e: SessionError| errors::translate(TranslateError::Session(e)))
    }

    /// Each job's log-probabilities, in input order.
    pub fn score(&self, jobs: &[ScoreJob]) -> PyResult<Vec<Vec<f32>>> {
        let workers = self.pool.capacity().min(jobs.len()).max(1);
        let make = || self.make();
        let outcomes = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    scope.spawn(move || -> PyResult<Vec<(usize, Vec<f32>)>> {
                        let mut session = self.pool.take((), make)?;
                        let mut out = Vec::new();
                        for (index, (source, target)) in
                            jobs.iter().enumerate().skip(w).step_by(workers)
                        {
                            let mut scores = Vec::with_capacity(target.len() + 1);
                            let scored = score_ids(&mut session, source, target, &mut scores);
                            if let Err(e) = scored {
                                self.pool.put((), session);
                                return Err(errors::translate(TranslateError::Run(e)));
                            }
                            out.push((index, scores));
                        }
                        self.pool.put((), session);
                        Ok(out)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect::<Vec<_>>()
        });
        let mut results = vec![Vec::new(); jobs.len()];
        for outcome in outcomes {
            for (index, scores) in outcome? {
                results[index] = scores;
            }
        }
        Ok(results)
    }
}
