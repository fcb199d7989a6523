//! `generate_tokens`: one source decoded greedily or by sampling on a thread of its own, each
//! token handed to Python as soon as the search has chosen it, as CTranslate2's
//! `generate_tokens` yields them: the target prefix's tokens first (log-probability 0), then
//! each generated token with its log-probability under the processed distribution, the last
//! (the end token when produced) marked `is_last`.
//!
//! The search sees a token chosen at step `t` when it processes step `t + 1`'s logits, so the
//! thread sends it from there (with the log-softmax of step `t`'s processed row, kept for it)
//! and sends the last token when the search returns. The thread runs at most [`AHEAD`] tokens
//! ahead of the reader; when the stream is dropped, the next step forces the end token, the
//! search stops and the session goes back to the pool.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use tessel_model::ops::logsumexp;
use tessel_model::{DecodeOptions, RunError, StepLogits};
use tessel_pipeline::TranslateError;

use super::score::Singles;
use super::Translator;
use crate::errors;
use crate::pool::lock;

/// Tokens the thread may run ahead of the reader.
const AHEAD: usize = 4;

/// One token as CTranslate2's `GenerationStepResult`.
#[pyclass(module = "tessel._tessel", frozen, get_all)]
pub struct GenerationStepResult {
    /// Its position in the target (the prefix's tokens included).
    step: usize,
    /// Always 0: one example.
    batch_id: usize,
    /// Its id.
    token_id: u32,
    /// Always 0: one hypothesis.
    hypothesis_id: usize,
    /// Its token.
    token: String,
    /// Its log-probability, when `return_log_prob` was set.
    log_prob: Option<f32>,
    /// Whether it is the last.
    is_last: bool,
    /// Always `None`: tessel does not return logits.
    logits: Option<Vec<f32>>,
}

#[pymethods]
impl GenerationStepResult {
    fn __repr__(&self) -> String {
        format!(
            "GenerationStepResult(step={}, token_id={}, token={:?}, log_prob={:?}, is_last={})",
            self.step, self.token_id, self.token, self.log_prob, self.is_last
        )
    }
}

/// A chosen token: its step, id and log-probability, and whether it is the last.
type Chosen = (usize, u32, f32, bool);

/// The tokens of a running `generate_tokens` call.
#[pyclass(module = "tessel._tessel", frozen)]
pub struct TokenStream {
    receiver: Mutex<Receiver<Result<Chosen, TranslateError>>>,
    translator: Py<Translator>,
    return_log_prob: bool,
}

#[pymethods]
impl TokenStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next token; the end of iteration after the last.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<GenerationStepResult>> {
        let next = py.detach(|| lock(&self.receiver).recv());
        match next {
            Ok(Ok((step, token_id, log_prob, is_last))) => Ok(Some(GenerationStepResult {
                step,
                batch_id: 0,
                token_id,
                hypothesis_id: 0,
                token: self.translator.get().token(token_id),
                log_prob: self.return_log_prob.then_some(log_prob),
                is_last,
                logits: None,
            })),
            Ok(Err(error)) => Err(errors::translate(error)),
            // The end, and every later call after it (the sender is gone).
            Err(_) => Ok(None),
        }
    }
}

/// Starts decoding `source` with `options` on a thread of its own.
pub fn start(
    translator: Py<Translator>,
    singles: Arc<Singles>,
    (source, options): (Vec<u32>, DecodeOptions),
    return_log_prob: bool,
) -> PyResult<TokenStream> {
    let (sender, receiver) = sync_channel(AHEAD);
    std::thread::Builder::new()
        .name("tessel-generate".into())
        .spawn(move || {
            let done = run(&singles, &source, &options, &sender);
            if let Err(error) = done {
                // The reader may be gone: nothing is left to tell.
                let _ = sender.send(Err(error));
            }
        })
        .map_err(errors::run)?;
    Ok(TokenStream {
        receiver: Mutex::new(receiver),
        translator,
        return_log_prob,
    })
}

/// Decodes on a pooled session, sending each token as it is chosen.
fn run(
    singles: &Singles,
    source: &[u32],
    options: &DecodeOptions,
    sender: &SyncSender<Result<Chosen, TranslateError>>,
) -> Result<(), TranslateError> {
    let mut session = singles
        .pool
        .take_now((), || singles.make())
        .map_err(|_| TranslateError::Run(RunError::BadOption("no session could be made")))?;
    let result = decode(&mut session, source, options, sender);
    singles.pool.put((), session);
    result
}

fn decode(
    session: &mut tessel_model::Session<Arc<tessel_model::Model<'static>>>,
    source: &[u32],
    options: &DecodeOptions,
    sender: &SyncSender<Result<Chosen, TranslateError>>,
) -> Result<(), TranslateError> {
    session.encode(source)?;
    let config = session.model().config();
    let (eos, vocab, isa) = (config.eos_id, config.tgt_vocab, session.isa());
    let planned = (config, session.limits(), isa);
    let request = options.request_for(source.len(), planned)?;
    let mut watch = Watch {
        sender,
        row: vec![0.0; vocab],
        lse: 0.0,
        sent: 0,
        gone: false,
    };
    let request = request.with_callbacks(
        |mut process| {
            let watch = &mut watch;
            move |step: &mut StepLogits<'_>| {
                watch.send_chosen(step);
                process(step);
                watch.keep_row(isa, step, eos);
            }
        },
        |on_step| on_step,
    );
    let hyps = session.generate(request)?;
    let tokens = hyps.best().map(|h| h.tokens).unwrap_or_default();
    if let Some((&last, _)) = tokens.split_last() {
        if !watch.gone && watch.sent < tokens.len() {
            let log_prob = watch.row[last as usize] - watch.lse;
            let _ = sender.send(Ok((tokens.len() - 1, last, log_prob, true)));
        }
    }
    Ok(())
}

/// What the processor wrapper keeps between steps: the last processed row's log-softmax
/// terms, how many tokens went out, and whether the reader is gone.
struct Watch<'a> {
    sender: &'a SyncSender<Result<Chosen, TranslateError>>,
    row: Vec<f32>,
    lse: f32,
    sent: usize,
    gone: bool,
}

impl Watch<'_> {
    /// Sends the token chosen at the previous step.
    fn send_chosen(&mut self, step: &StepLogits<'_>) {
        if step.step == 0 || self.gone {
            return;
        }
        let tokens = step.tokens(0);
        let token = tokens[step.step - 1];
        let log_prob = self.row[token as usize] - self.lse;
        let chosen = (step.step - 1, token, log_prob, false);
        self.gone = self.sender.send(Ok(chosen)).is_err();
        self.sent = step.step;
    }

    /// Keeps the processed row for the next step's token; forces the end token once the
    /// reader is gone.
    fn keep_row(&mut self, isa: tessel_kernels::Isa, step: &mut StepLogits<'_>, eos: u32) {
        let row = step.row_mut(0);
        if self.gone {
            row.fill(f32::NEG_INFINITY);
            row[eos as usize] = 0.0;
            return;
        }
        self.row.copy_from_slice(row);
        self.lse = logsumexp(isa, row);
    }
}
