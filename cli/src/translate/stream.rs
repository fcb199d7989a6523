//! The inputs of `tessel translate` through its sessions: one thread reads the inputs, one
//! thread per session translates them as they come, and the calling thread writes each output
//! (and flushes it) as soon as it and every one before it are done. The output keeps the
//! input's order, and an interrupted run keeps every line written.
//!
//! A line that fails (its text is not UTF-8, too long, or the tokenizer or the search refuses
//! it) prints an empty output — with `--nbest K`, `K` lines `index<TAB><TAB>` — and its error on
//! standard error as `tessel: line N: reason`; the other lines go on. An output's newline,
//! carriage return, tab and backslash are written `\n`, `\r`, `\t` and `\\` ([`escape`]), so
//! one input is always one output line (or `K`).

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use tessel_model::DecodeOptions;
use tessel_pipeline::{
    token_batches, BatchTranslating, IdsResult, TranslateError, TranslateOptions, Translating,
    Translation,
};

use crate::error::CliError;

/// Stack of each translating thread: the main thread's size, since unoptimised builds need
/// more than the 2 MiB a spawned thread gets by default.
const STACK_BYTES: usize = 8 << 20;

/// Inputs waiting for a session, per session.
const QUEUED_PER_SESSION: usize = 2;

/// What a run did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Report {
    /// Inputs read.
    pub lines: usize,
    /// Inputs that failed.
    pub failed: usize,
}

/// One input to translate: its number (from 1) and its text.
struct Job {
    number: usize,
    text: String,
}

/// What the writing thread hears.
enum Event {
    /// Input `number` is done: its hypotheses, or why it failed.
    Done {
        number: usize,
        result: Result<Vec<Translation>, String>,
    },
    /// The reader is done after `lines` inputs, stopped by `error` if reading failed.
    Read {
        lines: usize,
        error: Option<std::io::Error>,
    },
}

/// What a translating thread runs: a session, one input at a time, or a batched session,
/// several.
pub trait Translates: Send {
    /// Inputs it takes at a time.
    fn capacity(&self) -> usize;

    /// Each of `texts`' hypotheses or why it failed, in order.
    fn translate_all(
        &mut self,
        texts: &[String],
        options: &TranslateOptions,
    ) -> Vec<Result<Vec<Translation>, String>>;
}

impl Translates for Translating {
    fn capacity(&self) -> usize {
        1
    }

    fn translate_all(
        &mut self,
        texts: &[String],
        options: &TranslateOptions,
    ) -> Vec<Result<Vec<Translation>, String>> {
        texts
            .iter()
            .map(|text| {
                self.translate_with(text, options)
                    .map_err(|e| e.to_string())
            })
            .collect()
    }
}

/// Batches read per batched session at a time, sorted by length together.
const READ_BATCHES: usize = 8;

impl Translates for BatchTranslating {
    fn capacity(&self) -> usize {
        READ_BATCHES * self.max_batch()
    }

    fn translate_all(
        &mut self,
        texts: &[String],
        options: &TranslateOptions,
    ) -> Vec<Result<Vec<Translation>, String>> {
        self.translate_lines(texts, options)
            .into_iter()
            .map(|result| result.map_err(|e| e.to_string()))
            .collect()
    }
}

/// A batched session whose batches are cut by tokens (`--batch-type tokens`, CTranslate2's
/// `batch_type="tokens"`): the inputs it takes are sorted by length, longest first, and cut
/// into batches of at most `budget` source tokens, each input counted as long as its batch's
/// longest ([`token_batches`]; a longer input is a batch of its own). A batch holding more
/// inputs than the session has slots is decoded in turns of that many. Each input's
/// hypotheses are still the ones it gets alone.
pub struct TokenBatches {
    session: BatchTranslating,
    budget: usize,
}

impl TokenBatches {
    /// `session`'s batches cut at `budget` tokens.
    pub fn new(session: BatchTranslating, budget: usize) -> TokenBatches {
        TokenBatches { session, budget }
    }
}

impl Translates for TokenBatches {
    fn capacity(&self) -> usize {
        READ_BATCHES * self.session.max_batch()
    }

    fn translate_all(
        &mut self,
        texts: &[String],
        options: &TranslateOptions,
    ) -> Vec<Result<Vec<Translation>, String>> {
        let sources: Vec<Result<Vec<u32>, TranslateError>> = {
            let translator = self.session.translator();
            let max = translator.max_src_len();
            texts
                .iter()
                .map(|text| translator.source_ids(text, max, options))
                .collect()
        };
        let len = |i: usize| sources[i].as_ref().map_or(0, Vec::len);
        let mut order: Vec<usize> = (0..texts.len()).filter(|&i| sources[i].is_ok()).collect();
        order.sort_by_key(|&i| Reverse(len(i)));
        let mut outcomes: Vec<Option<IdsResult>> = texts.iter().map(|_| None).collect();
        for batch in token_batches(&order, len, self.budget) {
            let jobs: Vec<(&[u32], &DecodeOptions)> = batch
                .iter()
                .map(|&i| (sources[i].as_deref().unwrap_or_default(), &options.decode))
                .collect();
            for (&i, outcome) in batch.iter().zip(self.session.translate_ids(&jobs)) {
                outcomes[i] = Some(outcome);
            }
        }
        let translator = self.session.translator();
        sources
            .into_iter()
            .zip(outcomes)
            .map(|(ids, outcome)| {
                let hyps = match (ids, outcome) {
                    (Err(e), _) => return Err(e.to_string()),
                    (Ok(_), Some(outcome)) => outcome.map_err(|e| e.to_string())?,
                    (Ok(_), None) => return Err("the input was in no batch".to_owned()),
                };
                translator.texts(hyps).map_err(|e| e.to_string())
            })
            .collect()
    }
}

/// How long a thread that has some inputs waits for more to fill its batch.
const FILL_WAIT: Duration = Duration::from_millis(20);

/// Translates `texts` (or, when there are none, each line of `input`) with `sessions`, writing
/// each input's `nbest` outputs to `out` in input order.
pub fn run<T: Translates>(
    sessions: Vec<T>,
    options: &TranslateOptions,
    texts: &[String],
    input: &mut (dyn BufRead + Send),
    nbest: usize,
    out: &mut dyn Write,
) -> Result<Report, CliError> {
    let label = if texts.is_empty() { "line" } else { "text" };
    std::thread::scope(|scope| {
        let (events_tx, events_rx) = mpsc::channel();
        let queued: usize = sessions.iter().map(Translates::capacity).sum();
        let (jobs_tx, jobs_rx) = mpsc::sync_channel(QUEUED_PER_SESSION * queued);
        let jobs_rx = Arc::new(Mutex::new(jobs_rx));
        let mut workers = Vec::with_capacity(sessions.len());
        for session in sessions {
            let (jobs, events) = (Arc::clone(&jobs_rx), events_tx.clone());
            let worker = std::thread::Builder::new()
                .stack_size(STACK_BYTES)
                .spawn_scoped(scope, move || work(session, options, &jobs, &events))
                .map_err(CliError::ThreadSpawn)?;
            workers.push(worker);
        }
        // The workers hold the only receivers: once they are gone, the reader stops.
        drop(jobs_rx);
        let reader = std::thread::Builder::new()
            .spawn_scoped(scope, move || read(texts, input, &jobs_tx, &events_tx))
            .map_err(CliError::ThreadSpawn)?;
        let report = write_in_order(&events_rx, nbest, label, out);
        drop(events_rx);
        let stopped = workers
            .into_iter()
            .map(|w| w.join().is_err())
            .chain([reader.join().is_err()])
            .fold(false, |a, b| a | b);
        match report {
            Ok(_) if stopped => Err(CliError::WorkerPanicked),
            report => report,
        }
    })
}

/// A session's thread: translates inputs until there are none left or no one listens.
fn work<T: Translates>(
    mut session: T,
    options: &TranslateOptions,
    jobs: &Mutex<Receiver<Job>>,
    events: &Sender<Event>,
) {
    let mut numbers = Vec::with_capacity(session.capacity());
    let mut texts = Vec::with_capacity(session.capacity());
    while take(jobs, session.capacity(), (&mut numbers, &mut texts)) {
        let results = session.translate_all(&texts, options);
        for (&number, result) in numbers.iter().zip(results) {
            if events.send(Event::Done { number, result }).is_err() {
                return;
            }
        }
    }
}

/// Takes up to `most` inputs into `numbers` and `texts`: waits for the first, then for more
/// while they come within [`FILL_WAIT`]. False when no input is left.
fn take(
    jobs: &Mutex<Receiver<Job>>,
    most: usize,
    (numbers, texts): (&mut Vec<usize>, &mut Vec<String>),
) -> bool {
    numbers.clear();
    texts.clear();
    let Ok(jobs) = jobs.lock() else {
        return false;
    };
    let mut next = jobs.recv().ok();
    while let Some(job) = next {
        numbers.push(job.number);
        texts.push(job.text);
        if numbers.len() == most {
            break;
        }
        next = jobs.recv_timeout(FILL_WAIT).ok();
    }
    !numbers.is_empty()
}

/// The reader's thread: numbers the inputs and hands them to the sessions (a line that is not
/// UTF-8 goes straight to the writer as failed), then says how many there were.
fn read(
    texts: &[String],
    input: &mut (dyn BufRead + Send),
    jobs: &SyncSender<Job>,
    events: &Sender<Event>,
) {
    let mut lines = 0;
    let mut error = None;
    let mut hand_out = |text: Result<String, String>| {
        let number = lines + 1;
        let sent = match text {
            Ok(text) => jobs.send(Job { number, text }).is_ok(),
            Err(reason) => {
                let result = Err(reason);
                events.send(Event::Done { number, result }).is_ok()
            }
        };
        lines += usize::from(sent);
        sent
    };
    if texts.is_empty() {
        let mut line = Vec::new();
        loop {
            line.clear();
            match input.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(_) => {
                    if !hand_out(utf8_line(&line)) {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
    } else {
        for text in texts {
            if !hand_out(Ok(text.clone())) {
                break;
            }
        }
    }
    let _ = events.send(Event::Read { lines, error });
}

/// A line read with its `\n` (or `\r\n`) end: its text, or why it is not one.
fn utf8_line(line: &[u8]) -> Result<String, String> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    String::from_utf8(line.to_vec()).map_err(|e| format!("the line is not valid UTF-8 ({e})"))
}

/// The writing side: each input's outputs in input order, flushed as they complete.
fn write_in_order(
    events: &Receiver<Event>,
    nbest: usize,
    label: &str,
    out: &mut dyn Write,
) -> Result<Report, CliError> {
    let mut pending = BTreeMap::new();
    let mut next = 1;
    let mut failed = 0;
    let mut read = None;
    // Ends once the reader and every session are done.
    for event in events {
        match event {
            Event::Done { number, result } => {
                pending.insert(number, result);
            }
            Event::Read { lines, error } => read = Some((lines, error)),
        }
        let before = next;
        while let Some(result) = pending.remove(&next) {
            failed += usize::from(write_output(out, nbest, label, next, result)?);
            next += 1;
        }
        if next > before {
            out.flush()?;
        }
    }
    let (lines, error) = read.unwrap_or((next - 1, None));
    // Inputs a stopped thread never finished.
    for number in next..=lines {
        let result = pending
            .remove(&number)
            .unwrap_or_else(|| Err("a translating thread stopped unexpectedly".to_owned()));
        failed += usize::from(write_output(out, nbest, label, number, result)?);
    }
    out.flush()?;
    if let Some(source) = error {
        return Err(CliError::Read {
            path: PathBuf::from("<stdin>"),
            source,
        });
    }
    Ok(Report { lines, failed })
}

/// Writes input `number`'s outputs (an empty one, and the error on stderr, when it failed);
/// returns whether it failed.
fn write_output(
    out: &mut dyn Write,
    nbest: usize,
    label: &str,
    number: usize,
    result: Result<Vec<Translation>, String>,
) -> std::io::Result<bool> {
    let (hyps, failed) = match result {
        Ok(hyps) => (hyps, false),
        Err(reason) => {
            // A closed stderr only loses the message; the empty line still keeps the count.
            let _ = writeln!(std::io::stderr(), "tessel: {label} {number}: {reason}");
            (Vec::new(), true)
        }
    };
    if nbest == 1 {
        let text = hyps.first().map_or("", |h| h.text.as_str());
        writeln!(out, "{}", escape(text))?;
    } else {
        for i in 0..nbest {
            match hyps.get(i) {
                Some(h) => writeln!(out, "{i}\t{:.4}\t{}", h.score, escape(&h.text))?,
                None => writeln!(out, "{i}\t\t")?,
            }
        }
    }
    Ok(failed)
}

/// `text` on one line: backslash, newline, carriage return and tab written as `\\`, `\n`,
/// `\r` and `\t`.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.contains(['\\', '\n', '\r', '\t']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_are_escaped_onto_one_line() {
        assert_eq!(escape("plain text"), "plain text");
        assert_eq!(
            escape("a\nb\r\nc\td\\e"),
            "a\\nb\\r\\nc\\td\\\\e",
            "every line break, tab and backslash escaped"
        );
    }

    #[test]
    fn lines_are_read_without_their_end() {
        assert_eq!(utf8_line(b"one\r\n"), Ok("one".to_owned()));
        assert_eq!(utf8_line(b"two"), Ok("two".to_owned()));
        assert!(utf8_line(b"\xff\n")
            .unwrap_err()
            .contains("not valid UTF-8"));
    }
}
