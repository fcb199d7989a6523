//! Continuous batching: texts submitted at any time, each admitted into a free slot of one
//! [`Batch`] before the next decoder step and decoded with the texts already running, so a
//! long translation does not hold up short ones and every step reads the weights once for
//! all of them.
//!
//! The host drives it: [`TranslateQueue::submit`] tokenizes a text and queues it;
//! [`TranslateQueue::step`] encodes the queued texts that free slots can take (together, as
//! many to an encoder pass as fit), admits them, runs one decoder step over every running
//! text and returns the texts that finished. Each text's hypotheses are the ones a
//! [`Translating`](super::Translating) session gives it alone with the same options.

use std::collections::VecDeque;
use std::sync::Arc;

use tessel_kernels::Isa;
use tessel_model::{Batch, Model, RunError};

use super::batch::LineResult;
use super::{TranslateError, TranslateOptions, Translator};

/// A submitted text's ticket: [`TranslateQueue::step`] returns its result under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// A queued or running text: its ticket, source ids and options.
struct Job {
    ticket: Ticket,
    ids: Vec<u32>,
    options: TranslateOptions,
}

/// Texts decoded together as they come; see the module documentation.
pub struct TranslateQueue {
    translator: Translator,
    batch: Batch<Arc<Model<'static>>>,
    /// Submitted, waiting for a free slot.
    waiting: VecDeque<Job>,
    /// The job running in each slot.
    running: Vec<Option<Job>>,
    /// Results not yet returned by [`TranslateQueue::step`].
    finished: Vec<(Ticket, LineResult)>,
    next_ticket: u64,
}

impl Translator {
    /// A queue over one batched session of `max_batch` slots, planned as
    /// [`Translator::batch`]'s, with `threads` GEMM threads, at `isa`.
    pub fn queue(
        &self,
        isa: Isa,
        threads: usize,
        max_batch: usize,
    ) -> Result<TranslateQueue, TranslateError> {
        let batch = self.new_batch(isa, threads, max_batch)?;
        Ok(TranslateQueue {
            translator: self.clone(),
            running: (0..batch.slots()).map(|_| None).collect(),
            batch,
            waiting: VecDeque::new(),
            finished: Vec::new(),
            next_ticket: 0,
        })
    }
}

impl TranslateQueue {
    /// Queues `text` with `options` and returns its ticket. A text the tokenizer refuses, or
    /// one too long for the model without `options.truncate`, is refused here; an empty text
    /// finishes at the next step with no hypotheses.
    pub fn submit(
        &mut self,
        text: &str,
        options: &TranslateOptions,
    ) -> Result<Ticket, TranslateError> {
        let max = self.batch.limits().max_src_len;
        let ids = self.translator.source_ids(text, max, options)?;
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        if ids.is_empty() {
            self.finished.push((ticket, Ok(Vec::new())));
        } else {
            self.waiting.push_back(Job {
                ticket,
                ids,
                options: options.clone(),
            });
        }
        Ok(ticket)
    }

    /// Texts submitted and not yet returned by [`TranslateQueue::step`].
    pub fn pending(&self) -> usize {
        self.waiting.len() + self.running.iter().flatten().count() + self.finished.len()
    }

    /// Admits the waiting texts that free slots can take, runs one decoder step over every
    /// running text and returns the texts that have finished since the last call, each with
    /// its hypotheses or why it failed. An error of the batch itself (never expected: every
    /// text is checked as it is admitted) ends every running text with it.
    pub fn step(&mut self) -> Vec<(Ticket, LineResult)> {
        self.admit_waiting();
        if let Err(error) = self.step_running() {
            for slot in 0..self.running.len() {
                if let Some(job) = self.running[slot].take() {
                    let error = TranslateError::Run(error.clone());
                    self.finished.push((job.ticket, Err(error)));
                }
            }
        }
        self.collect_finished();
        std::mem::take(&mut self.finished)
    }

    /// Moves waiting texts into the free slots: encodes them together, then admits each
    /// (a text whose options the batch refuses finishes with that error).
    fn admit_waiting(&mut self) {
        let free = (0..self.running.len()).filter(|&slot| self.running[slot].is_none());
        let placed: Vec<(usize, Job)> = free
            .zip(std::iter::from_fn(|| self.waiting.pop_front()))
            .collect();
        if placed.is_empty() {
            return;
        }
        let sources: Vec<(usize, &[u32])> = placed
            .iter()
            .map(|(slot, job)| (*slot, job.ids.as_slice()))
            .collect();
        if let Err(error) = self.batch.encode_all(&sources) {
            for (_, job) in placed {
                let error = TranslateError::Run(error.clone());
                self.finished.push((job.ticket, Err(error)));
            }
            return;
        }
        for (slot, job) in placed {
            match admit(&mut self.batch, slot, &job) {
                Ok(()) => self.running[slot] = Some(job),
                Err(error) => self.finished.push((job.ticket, Err(error.into()))),
            }
        }
    }

    /// One decoder step over the running texts, each with its own options.
    fn step_running(&mut self) -> Result<(), RunError> {
        let planned = (
            self.batch.model().config(),
            self.batch.limits(),
            self.batch.isa(),
        );
        let mut requests = Vec::with_capacity(self.running.len());
        for job in &self.running {
            let request = match job {
                Some(job) => Some(job.options.decode.request_for(job.ids.len(), planned)?),
                None => None,
            };
            requests.push(request);
        }
        self.batch.step(&mut requests[..])?;
        Ok(())
    }

    /// Ends the jobs whose search has finished: their hypotheses as text, their slot freed.
    fn collect_finished(&mut self) {
        for slot in 0..self.running.len() {
            if self.running[slot].is_none() || self.batch.running(slot) {
                continue;
            }
            let Some(job) = self.running[slot].take() else {
                continue;
            };
            let result = match self.batch.hypotheses(slot) {
                Ok(hyps) => self.translator.translations(hyps, &job.options),
                Err(error) => Err(error.into()),
            };
            self.finished.push((job.ticket, result));
        }
    }

    /// The translator this queue belongs to.
    pub fn translator(&self) -> &Translator {
        &self.translator
    }

    /// Texts decoded together at the most.
    pub fn max_batch(&self) -> usize {
        self.batch.slots()
    }
}

/// Starts `job`'s search in slot `slot` (encoded).
fn admit(batch: &mut Batch<Arc<Model<'static>>>, slot: usize, job: &Job) -> Result<(), RunError> {
    let planned = (batch.model().config(), batch.limits(), batch.isa());
    let mut request = job.options.decode.request_for(job.ids.len(), planned)?;
    batch.admit(slot, &mut request)
}
