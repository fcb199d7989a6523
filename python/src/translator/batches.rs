//! The batched sessions of a translator: jobs sorted by length, dealt batch by batch to up to
//! `inter_threads` sessions at once, each session planned for a (batch size, beam) shape and
//! kept in a bounded pool for later calls of that shape.

use std::sync::Arc;

use pyo3::PyResult;
use tessel_kernels::Isa;
use tessel_model::{DecodeOptions, Model};
use tessel_pipeline::{BatchShape, IdsBatch, IdsResult};

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

impl Batches {
    /// Decodes the jobs with beams up to `beam`, longest first, in batches of
    /// `max_batch_size` (0: [`BatchShape::default_batch`]) on up to the pool's sessions at
    /// once: each job's result, in input order.
    pub fn run(
        &self,
        jobs: &[Job<'_>],
        beam: usize,
        max_batch_size: usize,
    ) -> PyResult<Vec<IdsResult>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let slots = match max_batch_size {
            0 => BatchShape::default_batch(self.model.config(), self.threads, beam, jobs.len())
                .map_err(errors::translate)?,
            n => n.min(jobs.len()),
        };
        let shape = BatchShape {
            threads: self.threads,
            max_batch: slots,
            max_beam: beam,
        };
        let groups = groups(jobs, slots, self.pool.capacity());
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
            for (&index, result) in group.iter().zip(outcome?) {
                results[index] = Some(result);
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every job is in one group"))
            .collect())
    }

    /// The jobs of `group` on one pooled session of `shape`.
    fn run_group(
        &self,
        jobs: &[Job<'_>],
        group: &[usize],
        shape: BatchShape,
    ) -> PyResult<Vec<IdsResult>> {
        let mut session = self.pool.take(shape, || {
            IdsBatch::new(Arc::clone(&self.model), self.isa, shape).map_err(errors::translate)
        })?;
        let group_jobs: Vec<Job<'_>> = group.iter().map(|&i| jobs[i]).collect();
        let out = session.translate_ids(&group_jobs);
        self.pool.put(shape, session);
        Ok(out)
    }
}

/// The jobs' indices, longest source first, dealt batch by batch to at most `workers` groups
/// (each group's batches are then the ones one session would form from it).
fn groups(jobs: &[Job<'_>], slots: usize, workers: usize) -> Vec<Vec<usize>> {
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
