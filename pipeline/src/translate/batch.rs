//! Many lines through one [`Batch`], as CTranslate2's `translate_batch` runs them: the lines
//! are tokenised, sorted by length (longest first, so each batch holds sources of similar
//! length) and decoded up to `max_batch` at a time, every decoder step reading each weight
//! once for all of them, and as many sources as fit encoded in one pass ([`ENCODE_ROWS`]); the
//! results come back in input order. Each line's hypotheses are the
//! ones [`Translating::translate_with`](super::Translating::translate_with) gives it (the
//! batch computes every sequence as a session alone does).

use std::cmp::Reverse;
use std::sync::Arc;

use tessel_kernels::Isa;
use tessel_model::{ArenaPlan, Batch, Limits, Model, RunError, SessionError, ENCODE_ROWS};

use super::{TranslateError, TranslateOptions, Translation, Translator};

/// Per line: its hypotheses, best first, or why it failed.
pub type LineResult = Result<Vec<Translation>, TranslateError>;

/// One user's batched translating session.
pub struct BatchTranslating {
    translator: Translator,
    batch: Batch<Arc<Model<'static>>>,
}

impl Translator {
    /// A batched session of `max_batch` slots planned for the model's limits with `threads`
    /// GEMM threads, at `isa`.
    pub fn batch(
        &self,
        isa: Isa,
        threads: usize,
        max_batch: usize,
    ) -> Result<BatchTranslating, TranslateError> {
        Ok(BatchTranslating {
            translator: self.clone(),
            batch: self.new_batch(isa, threads, max_batch)?,
        })
    }

    /// The batched session of [`Translator::batch`] and [`Translator::queue`].
    pub(super) fn new_batch(
        &self,
        isa: Isa,
        threads: usize,
        max_batch: usize,
    ) -> Result<Batch<Arc<Model<'static>>>, TranslateError> {
        let limits = self.batch_limits(threads, max_batch);
        Ok(Batch::new(Arc::clone(&self.model), isa, limits)?)
    }
}

impl Translator {
    /// The limits of [`Translator::batch`]'s session: the model's, `max_batch` sequences,
    /// encoder passes of about [`ENCODE_ROWS`] rows.
    fn batch_limits(&self, threads: usize, max_batch: usize) -> Limits {
        self.limits(threads)
            .with_batch(max_batch)
            .with_encode_rows(ENCODE_ROWS)
    }

    /// Bytes of the arena of [`Translator::batch`]'s session, planned without allocating it.
    pub fn batch_bytes(&self, threads: usize, max_batch: usize) -> Result<usize, TranslateError> {
        let limits = self.batch_limits(threads, max_batch);
        let plan =
            ArenaPlan::with_limits(self.model.config(), limits).map_err(SessionError::from)?;
        Ok(plan.total_bytes())
    }
}

impl BatchTranslating {
    /// Translates each line: in input order, each line's hypotheses or why that line failed
    /// (a failing line does not stop the others).
    pub fn translate_lines<S: AsRef<str>>(
        &mut self,
        lines: &[S],
        options: &TranslateOptions,
    ) -> Vec<LineResult> {
        let max = self.batch.limits().max_src_len;
        let mut results: Vec<LineResult> = Vec::with_capacity(lines.len());
        let mut sources = Vec::new();
        for (index, line) in lines.iter().enumerate() {
            match self.translator.source_ids(line.as_ref(), max, options) {
                Ok(ids) if !ids.is_empty() => sources.push((index, ids)),
                Ok(_) => {}
                Err(error) => {
                    results.push(Err(error));
                    continue;
                }
            }
            results.push(Ok(Vec::new()));
        }
        sources.sort_by_key(|(_, ids)| Reverse(ids.len()));
        for chunk in sources.chunks(self.batch.slots()) {
            match self.run(chunk, options) {
                Ok(outcomes) => {
                    for ((index, _), outcome) in chunk.iter().zip(outcomes) {
                        results[*index] = outcome;
                    }
                }
                Err(error) => {
                    for (index, _) in chunk {
                        results[*index] = Err(TranslateError::Run(error.clone()));
                    }
                }
            }
        }
        results
    }

    /// Encodes the sources of `chunk` (at most one per slot) and decodes them together.
    fn run(
        &mut self,
        chunk: &[(usize, Vec<u32>)],
        options: &TranslateOptions,
    ) -> Result<Vec<LineResult>, RunError> {
        let sources: Vec<(usize, &[u32])> = chunk
            .iter()
            .enumerate()
            .map(|(slot, (_, ids))| (slot, ids.as_slice()))
            .collect();
        self.batch.encode_all(&sources)?;
        let mut requests = {
            let batch = &self.batch;
            let planned = (batch.model().config(), batch.limits(), batch.isa());
            chunk
                .iter()
                .map(|(_, ids)| options.decode.request_for(ids.len(), planned))
                .collect::<Result<Vec<_>, _>>()?
        };
        self.batch.generate(&mut requests)?;
        Ok((0..chunk.len())
            .map(|slot| {
                let hyps = self.batch.hypotheses(slot)?;
                self.translator.translations(hyps, options)
            })
            .collect())
    }

    /// The translator this session belongs to.
    pub fn translator(&self) -> &Translator {
        &self.translator
    }

    /// Sources decoded together at the most.
    pub fn max_batch(&self) -> usize {
        self.batch.slots()
    }
}
