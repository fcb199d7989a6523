//! Sources of ids through one [`Batch`], as CTranslate2's `translate_batch` runs them: sorted
//! by length (longest first, so each batch holds sources of similar length), decoded up to
//! the batch's slots at a time, every decoder step reading each weight once for all of them,
//! and as many sources as fit encoded in one pass ([`ENCODE_ROWS`]); the results come back in
//! input order. Each source's hypotheses are the ones a session alone gives it (the batch
//! computes every sequence as a session alone does). No tokenizer is involved: a host that
//! tokenizes itself (or a CTranslate2 directory without tokenizer files) translates here.

use std::cmp::Reverse;
use std::sync::Arc;

use tessel_kernels::Isa;
use tessel_model::{
    ArenaPlan, Batch, Config, DecodeOptions, Limits, Model, RunError, SessionError, ENCODE_ROWS,
};

use super::TranslateError;

/// One hypothesis as ids.
#[derive(Clone, Debug, PartialEq)]
pub struct Hypothesis {
    /// The generated ids (forced tokens and EOS included).
    pub tokens: Vec<u32>,
    /// Its score: summed log-probabilities over `length^length_penalty`.
    pub score: f32,
}

/// Per source of [`IdsBatch::translate_ids`]: its hypotheses, best first, or why it failed.
pub type IdsResult = Result<Vec<Hypothesis>, TranslateError>;

/// The batch size [`BatchShape::default_batch`] starts from: on a Marian-base file it gives
/// 0.86 (greedy) and 0.93 (beam 4) of 64 lines' throughput with half the arena
/// (bench/RESULTS.md, 2026-11-28).
pub const DEFAULT_BATCH: usize = 32;

/// The arena [`BatchShape::default_batch`] keeps a batched session within.
pub const DEFAULT_BATCH_ARENA: usize = 1 << 30;

/// What a batched session is planned for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchShape {
    /// Threads its GEMMs run on.
    pub threads: usize,
    /// Sequences decoded together.
    pub max_batch: usize,
    /// Widest beam of each (at most the model's).
    pub max_beam: usize,
    /// Longest source (`None`: the model's).
    pub max_src_len: Option<usize>,
    /// Leading source tokens with global attention (`None`: the model's default).
    pub global_tokens: Option<usize>,
}

impl BatchShape {
    /// The model's limits with this shape, and encoder passes of about [`ENCODE_ROWS`] rows.
    pub fn limits(self, config: &Config) -> Limits {
        let limits = Limits::of(config)
            .with_threads(self.threads)
            .with_batch(self.max_batch)
            .with_encode_rows(ENCODE_ROWS);
        Limits {
            max_beam: self.max_beam,
            max_src_len: self
                .max_src_len
                .map_or(limits.max_src_len, |n| n.min(limits.max_src_len)),
            ..limits
        }
    }

    /// Bytes of the arena of a session of this shape, planned without allocating it.
    pub fn bytes(self, config: &Config) -> Result<usize, TranslateError> {
        let plan =
            ArenaPlan::with_limits(config, self.limits(config)).map_err(SessionError::from)?;
        Ok(plan.total_bytes())
    }

    /// The batch size for `texts` texts (0: not known) with beams up to `max_beam` on
    /// `threads` threads: [`DEFAULT_BATCH`], no more than the texts, halved while the batch's
    /// arena would pass [`DEFAULT_BATCH_ARENA`] (at least 1).
    pub fn default_batch(
        config: &Config,
        threads: usize,
        max_beam: usize,
        texts: usize,
    ) -> Result<usize, TranslateError> {
        let size = match texts {
            0 => DEFAULT_BATCH,
            n => n.min(DEFAULT_BATCH),
        };
        let bytes = |max_batch| {
            BatchShape {
                threads,
                max_batch,
                max_beam,
                max_src_len: None,
                global_tokens: None,
            }
            .bytes(config)
        };
        largest_within(size, DEFAULT_BATCH_ARENA, bytes)
    }
}

/// `size` halved while `bytes` of it passes `budget` (at least 1).
fn largest_within<E>(
    mut size: usize,
    budget: usize,
    bytes: impl Fn(usize) -> Result<usize, E>,
) -> Result<usize, E> {
    while size > 1 && bytes(size)? > budget {
        size /= 2;
    }
    Ok(size.max(1))
}

/// A batched session over ids.
pub struct IdsBatch {
    batch: Batch<Arc<Model<'static>>>,
}

impl IdsBatch {
    /// A batched session of `shape` over `model`, at `isa`.
    pub fn new(
        model: Arc<Model<'static>>,
        isa: Isa,
        shape: BatchShape,
    ) -> Result<IdsBatch, TranslateError> {
        let limits = shape.limits(model.config());
        let mut batch = Batch::new(model, isa, limits)?;
        if let Some(tokens) = shape.global_tokens {
            batch.set_global_tokens(tokens);
        }
        Ok(IdsBatch { batch })
    }

    /// Decodes each `(source ids, options)` job: in input order, each job's hypotheses (at
    /// most its `num_hypotheses`, best first) or why it failed (a failing job does not stop
    /// the others). The ids go to the encoder as they are (the family's special tokens
    /// included); an empty source has no hypotheses.
    pub fn translate_ids(&mut self, jobs: &[(&[u32], &DecodeOptions)]) -> Vec<IdsResult> {
        let max = self.max_src_len();
        let mut results: Vec<IdsResult> = Vec::with_capacity(jobs.len());
        let mut order = Vec::with_capacity(jobs.len());
        for (index, (ids, _)) in jobs.iter().enumerate() {
            if ids.len() > max {
                results.push(Err(TranslateError::SourceTooLong {
                    len: ids.len(),
                    max,
                }));
                continue;
            }
            if !ids.is_empty() {
                order.push(index);
            }
            results.push(Ok(Vec::new()));
        }
        order.sort_by_key(|&index| Reverse(jobs[index].0.len()));
        for chunk in order.chunks(self.batch.slots()) {
            match self.run(jobs, chunk) {
                Ok(outcomes) => {
                    for (&index, outcome) in chunk.iter().zip(outcomes) {
                        results[index] = outcome;
                    }
                }
                Err(error) => {
                    for &index in chunk {
                        results[index] = Err(TranslateError::Run(error.clone()));
                    }
                }
            }
        }
        results
    }

    /// Encodes the sources of the jobs `chunk` names (at most one per slot) and decodes them
    /// together.
    fn run(
        &mut self,
        jobs: &[(&[u32], &DecodeOptions)],
        chunk: &[usize],
    ) -> Result<Vec<IdsResult>, RunError> {
        let sources: Vec<(usize, &[u32])> = chunk
            .iter()
            .enumerate()
            .map(|(slot, &index)| (slot, jobs[index].0))
            .collect();
        self.batch.encode_all(&sources)?;
        let mut requests = {
            let batch = &self.batch;
            let planned = (batch.model().config(), batch.limits(), batch.isa());
            chunk
                .iter()
                .map(|&index| {
                    let (ids, options) = jobs[index];
                    options.request_for(ids.len(), planned)
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        self.batch.generate(&mut requests)?;
        Ok(chunk
            .iter()
            .enumerate()
            .map(|(slot, &index)| {
                let hyps = self.batch.hypotheses(slot)?;
                Ok(hyps
                    .iter()
                    .take(jobs[index].1.num_hypotheses)
                    .map(|h| Hypothesis {
                        tokens: h.tokens.to_vec(),
                        score: h.score,
                    })
                    .collect())
            })
            .collect())
    }

    /// Longest source the session reads.
    pub fn max_src_len(&self) -> usize {
        self.batch.limits().max_src_len
    }

    /// Sources decoded together at the most.
    pub fn slots(&self) -> usize {
        self.batch.slots()
    }
}

/// `order` (indices of examples, longest first, `len` giving their lengths) cut into
/// batches whose example count times their longest length (their first's) stays within
/// `budget` tokens, as CTranslate2's `batch_type="tokens"` cuts them; an example longer than
/// `budget` is a batch of its own.
pub fn token_batches(
    order: &[usize],
    len: impl Fn(usize) -> usize,
    budget: usize,
) -> Vec<&[usize]> {
    let mut batches = Vec::new();
    let mut start = 0;
    for end in 1..=order.len() {
        let longest = len(order[start]).max(1);
        let next_fits = end < order.len() && (end + 1 - start) * longest <= budget;
        if !next_fits {
            batches.push(&order[start..end]);
            start = end;
        }
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::{largest_within, token_batches};

    #[test]
    fn the_default_batch_halves_until_its_arena_fits() {
        let bytes = |n: usize| Ok::<_, ()>(100 + 10 * n);
        assert_eq!(largest_within(32, 1000, bytes), Ok(32));
        assert_eq!(largest_within(32, 300, bytes), Ok(16));
        assert_eq!(largest_within(32, 150, bytes), Ok(4));
        assert_eq!(largest_within(32, 10, bytes), Ok(1));
        assert_eq!(largest_within(0, 10, bytes), Ok(1));
        assert_eq!(largest_within(8, 10, |_| Err::<usize, _>("no")), Err("no"));
    }

    #[test]
    fn token_batches_count_each_example_as_the_longest() {
        let lens = [9, 5, 5, 4, 2, 1];
        let order: Vec<usize> = (0..lens.len()).collect();
        let cut = |budget| token_batches(&order, |i| lens[i], budget);
        assert_eq!(cut(12), vec![&[0][..], &[1, 2], &[3, 4, 5]]);
        assert_eq!(cut(4), vec![&[0][..], &[1], &[2], &[3], &[4, 5]]);
        assert_eq!(cut(100), vec![&[0, 1, 2, 3, 4, 5][..]]);
        assert!(token_batches(&[], |i| lens[i], 4).is_empty());
    }
}
