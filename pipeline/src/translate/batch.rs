//! Many lines through one batched session ([`IdsBatch`]), as CTranslate2's `translate_batch`
//! runs them: the lines are tokenised, decoded up to `max_batch` at a time longest first, and
//! their hypotheses come back as text in input order. Each line's hypotheses are the ones
//! [`Translating::translate_with`](super::Translating::translate_with) gives it.

use std::sync::Arc;

use tessel_kernels::Isa;
use tessel_model::{Batch, Config, DecodeOptions, Model};

use super::ids::{BatchShape, IdsBatch, IdsResult};
use super::{TranslateError, TranslateOptions, Translation, Translator};

/// Per line: its hypotheses, best first, or why it failed.
pub type LineResult = Result<Vec<Translation>, TranslateError>;

/// One user's batched translating session.
pub struct BatchTranslating {
    translator: Translator,
    ids: IdsBatch,
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
        let ids = IdsBatch::new(Arc::clone(&self.model), isa, self.shape(threads, max_batch))?;
        Ok(BatchTranslating {
            translator: self.clone(),
            ids,
        })
    }

    /// The batched session of [`Translator::queue`].
    pub(super) fn new_batch(
        &self,
        isa: Isa,
        threads: usize,
        max_batch: usize,
    ) -> Result<Batch<Arc<Model<'static>>>, TranslateError> {
        let limits = self.shape(threads, max_batch).limits(self.model.config());
        let mut batch = Batch::new(Arc::clone(&self.model), isa, limits)?;
        if let Some(tokens) = self.global_tokens() {
            batch.set_global_tokens(tokens);
        }
        Ok(batch)
    }

    /// Bytes of the arena of [`Translator::batch`]'s session, planned without allocating it.
    pub fn batch_bytes(&self, threads: usize, max_batch: usize) -> Result<usize, TranslateError> {
        self.shape(threads, max_batch).bytes(self.model.config())
    }

    /// The batch size for `texts` texts (0: not known) on `threads` threads
    /// ([`BatchShape::default_batch`]).
    pub fn default_batch(&self, threads: usize, texts: usize) -> Result<usize, TranslateError> {
        let max_beam = self.limits(threads).max_beam;
        let config = Config {
            max_src_len: self.max_src_len(),
            ..self.model.config().clone()
        };
        BatchShape::default_batch(&config, threads, max_beam, texts)
    }

    fn shape(&self, threads: usize, max_batch: usize) -> BatchShape {
        BatchShape {
            threads,
            max_batch,
            max_beam: self.limits(threads).max_beam,
            max_src_len: Some(self.max_src_len()),
            global_tokens: self.global_tokens(),
        }
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
        let max = self.ids.max_src_len();
        let sources: Vec<Result<Vec<u32>, TranslateError>> = lines
            .iter()
            .map(|line| self.translator.source_ids(line.as_ref(), max, options))
            .collect();
        let jobs: Vec<(&[u32], &DecodeOptions)> = sources
            .iter()
            .filter_map(|ids| ids.as_ref().ok())
            .map(|ids| (ids.as_slice(), &options.decode))
            .collect();
        let mut outcomes = self.ids.translate_ids(&jobs).into_iter();
        sources
            .into_iter()
            .map(|ids| {
                let hyps = ids.and_then(|_| outcomes.next().expect("one outcome a job"))?;
                self.translator.texts(hyps)
            })
            .collect()
    }

    /// Decodes each `(source ids, options)` job ([`IdsBatch::translate_ids`]).
    pub fn translate_ids(&mut self, jobs: &[(&[u32], &DecodeOptions)]) -> Vec<IdsResult> {
        self.ids.translate_ids(jobs)
    }

    /// The translator this session belongs to.
    pub fn translator(&self) -> &Translator {
        &self.translator
    }

    /// Sources decoded together at the most.
    pub fn max_batch(&self) -> usize {
        self.ids.slots()
    }
}
