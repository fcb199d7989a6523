//! The batched sessions of a translator: jobs sorted by length and cut into batches of at
//! most `max_batch_size` examples, or (CTranslate2's `batch_type="tokens"`) of at most
//! `max_batch_size` tokens counting each example as long as the batch's longest; the batches
//! dealt to up to `inter_threads` sessions at once, each session planned for a (batch size,
//! beam, source length) shape and kept in a bounded pool for later calls of that shape.

use std::sync::Arc;

use pyo3::PyResult;
use tessel_kernels::Isa;
use tessel_model::{DecodeOptions, Model};
use tessel_pipeline::{token_batches, BatchShape, IdsBatch, IdsResult};

use crate::errors;
use crate::pool::Pool;

/// A source's ids and the options it is decoded with.
pub type Job<'a> = (&'a [u32], &'a DecodeOptions);

/// A model's batched sessions.
pub struct Batches {
    pub model: Arc<Model<'static>>,
    pub pool: Pool<BatchShape, IdsBatch>,
    pub isa: Isa,
    /// Threads each session's products run on.
    pub threads: usize,
}

/// What `max_batch_size` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchType {
    /// Examples per batch.
    Examples,
    /// Source tokens per batch, each example counted as long as the batch's longest.
    Tokens,
}

impl BatchType {
    /// CTranslate2's `batch_type` keyword.
    pub fn parse(name: &str) -> PyResult<BatchType> {
        match name {
            "examples" => Ok(BatchType::Examples),
            "tokens" => Ok(BatchType::Tokens),
            other => Err(errors::input(format!(
                "batch_type {other:?}: expected \"examples\" or \"tokens\""
            ))),
        }
    }
}

impl Batches {
    /// Decodes the jobs with beams up to `beam`, longest first, in batches of at most
    /// `max_batch_size` examples or tokens as `batch_type` says (0: examples,
    /// [`BatchShape::default_batch`] of them), on up to the pool's sessions at once: each
    /// job's result, in input order.
    pub fn run(
        &self,
        jobs: &[Job<'_>],
        beam: usize,
        (max_batch_size, batch_type): (usize, BatchType),
    ) -> PyResult<Vec<IdsResult>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(jobs[i].0.len()));
        let batches = match (max_batch_size, batch_type) {
            (0, _) => {
                let config = self.model.config();
                let size = BatchShape::default_batch(config, self.threads, beam, jobs.len())
                    .map_err(errors::translate)?;
                order.chunks(size).collect()
            }
            (n, BatchType::Examples) => order.chunks(n).collect(),
            (n, BatchType::Tokens) => token_batches(&order, |i| jobs[i].0.len(), n),
        };
        let longest = jobs.iter().map(|job| job.0.len()).max().unwrap_or(1);
        let shape = BatchShape {
            threads: self.threads,
            max_batch: batches.iter().map(|b| b.len()).max().unwrap_or(1),
            max_beam: beam,
            max_src_len: Some(planned_source_len(longest)),
            global_tokens: None,
        };
        let groups = deal(&batches, self.pool.capacity());
        let outcomes = std::thread::scope(|scope| {
            let handles: Vec<_> = groups
                .iter()
                .map(|group| scope.spawn(move || self.run_group(jobs, group, shape)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect::<Vec<_>>()
        });
        let mut results: Vec<Option<IdsResult>> = jobs.iter().map(|_| None).collect();
        for (group, outcome) in groups.iter().zip(outcomes) {
            let indices = group.iter().flat_map(|batch| batch.iter());
            for (&index, result) in indices.zip(outcome?) {
                results[index] = Some(result);
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every job is in one batch"))
            .collect())
    }

    /// The batches of `group`, one after the other, on one pooled session of `shape`.
    fn run_group(
        &self,
        jobs: &[Job<'_>],
        group: &[&[usize]],
        shape: BatchShape,
    ) -> PyResult<Vec<IdsResult>> {
        let mut session = self.pool.take(shape, || {
            IdsBatch::new(Arc::clone(&self.model), self.isa, shape).map_err(errors::translate)
        })?;
        let mut out = Vec::new();
        for batch in group {
            let batch_jobs: Vec<Job<'_>> = batch.iter().map(|&i| jobs[i]).collect();
            out.extend(session.translate_ids(&batch_jobs));
        }
        self.pool.put(shape, session);
        Ok(out)
    }
}

/// The source length a call's sessions are planned for: its longest source rounded up to a
/// power of two (at least 64), so that calls of similar lengths share pooled sessions while a
/// batch of many short sources (a token budget of thousands) does not plan every slot for
/// the model's longest source.
fn planned_source_len(longest: usize) -> usize {
    longest.max(64).next_power_of_two()
}

/// The batches dealt in turn to at most `workers` groups.
fn deal<'a>(batches: &[&'a [usize]], workers: usize) -> Vec<Vec<&'a [usize]>> {
    let count = workers.min(batches.len()).max(1);
    let mut groups = vec![Vec::new(); count];
    for (n, batch) in batches.iter().enumerate() {
        groups[n % count].push(*batch);
    }
    groups
}
