//! tessel-numbers: the embedded default model, English numbers in words to their digits, for
//! the `tessel` command and the C library.
//!
//! A small encoder-decoder (`assets/numbers/`, trained by `tools/train_numbers.py`) is compiled
//! into the crate: its `config.json`, `model.safetensors` (loaded from the binary's bytes,
//! each linear layer keeping the type the file stores) and `vocab.json`. A text is tokenised
//! as [`vocab`] says, encoded, and greedy-decoded from BOS for at most the target's length;
//! the digits before EOS are the answer.

pub mod vocab;

use std::time::{Duration, Instant};

use tessel_kernels::Isa;
use tessel_model::{
    Config, ConfigError, Limits, LoadError, Model, Request, RunError, SearchOptions,
};
use tessel_model::{Session, SessionError};
use thiserror::Error;

pub use vocab::{TextError, Vocab, VocabError};

/// A running count of the heap allocations the process has made (a counting global
/// allocator's), read before and after each reading's encode and search.
pub type AllocationCount = fn() -> usize;

/// The count of a process without a counting allocator.
fn uncounted() -> usize {
    0
}

/// The embedded `config.json`.
const CONFIG_JSON: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../assets/numbers/config.json"
));

/// The embedded `model.safetensors`.
const WEIGHTS: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../assets/numbers/model.safetensors"
));

/// The embedded `vocab.json`.
const VOCAB_JSON: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../assets/numbers/vocab.json"
));

/// What `tessel` reads when given no text.
pub const EXAMPLES: [&str; 6] = [
    "four hundred and twelve thousand and seven",
    "nineteen",
    "one thousand nine hundred and eighty-four",
    "two million, three hundred thousand",
    "ninety-nine thousand nine hundred ninety-nine",
    "seven hundred five million and sixty",
];

/// Why the embedded model failed.
#[derive(Debug, Error)]
pub enum NumbersError {
    /// The embedded config is invalid.
    #[error("embedded config.json: {0}")]
    Config(#[from] ConfigError),
    /// The embedded weights do not load.
    #[error("embedded model.safetensors: {0}")]
    Load(#[from] LoadError),
    /// The embedded vocabulary does not fit the model.
    #[error("embedded {0}")]
    Vocab(#[from] VocabError),
    /// The session could not be set up.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The text is not one the model reads.
    #[error(transparent)]
    Text(#[from] TextError),
    /// Encoding or search failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// The numbers model and its vocabulary.
pub struct Numbers {
    model: Model<'static>,
    vocab: Vocab,
}

impl Numbers {
    /// The model compiled into the binary.
    pub fn embedded() -> Result<Numbers, NumbersError> {
        Numbers::from_parts(CONFIG_JSON, WEIGHTS, VOCAB_JSON)
    }

    /// The model from the bytes of its three files.
    pub fn from_parts(
        config_json: &str,
        weights: &[u8],
        vocab_json: &str,
    ) -> Result<Numbers, NumbersError> {
        let config = Config::from_json(config_json)?;
        let vocab = Vocab::from_json(vocab_json, &config)?;
        let model = Model::from_safetensors_bytes(config, weights)?;
        Ok(Numbers { model, vocab })
    }

    /// The model.
    pub fn model(&self) -> &Model<'static> {
        &self.model
    }

    /// The model and its vocabulary, for hosts that hold the model themselves (shared in an
    /// `Arc`, as the C API does).
    pub fn into_parts(self) -> (Model<'static>, Vocab) {
        (self.model, self.vocab)
    }

    /// The most decoder steps a reading runs (the target's length limit, BOS included).
    pub fn max_steps(&self) -> usize {
        self.vocab.max_target()
    }

    /// Whether the model reads `text` (its characters and length).
    pub fn check(&self, text: &str) -> Result<(), TextError> {
        self.vocab.encode_into(text, &mut Vec::new())
    }

    /// A greedy reader at `isa`, its arena planned for one beam and the vocabulary's lengths,
    /// counting no allocations ([`Reader::counting`] sets a count).
    pub fn reader(&self, isa: Isa) -> Result<Reader<'_>, NumbersError> {
        let limits = Limits {
            max_src_len: self.vocab.max_source(),
            max_tgt_len: self.vocab.max_target(),
            max_beam: 1,
            max_batch: 1,
            encode_sources: 1,
            threads: 1,
            cross_kv: tessel_model::MemoryType::F32,
        };
        let session = Session::with_limits(&self.model, isa, limits)?;
        Ok(Reader {
            session,
            vocab: &self.vocab,
            ids: Vec::with_capacity(self.vocab.max_source()),
            best: Vec::with_capacity(self.vocab.max_target()),
            options: SearchOptions::greedy(self.vocab.max_target()),
            allocations: uncounted,
        })
    }
}

/// A session over the numbers model with its token buffer.
pub struct Reader<'a> {
    session: Session<&'a Model<'static>>,
    vocab: &'a Vocab,
    ids: Vec<u32>,
    best: Vec<u32>,
    options: SearchOptions,
    allocations: AllocationCount,
}

/// One text read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reading {
    /// The digits.
    pub digits: String,
    /// Whether the model ended its answer (EOS) within the step limit.
    pub finished: bool,
    /// Encoder time.
    pub encode: Duration,
    /// Encode and greedy search.
    pub total: Duration,
    /// Decoder steps run.
    pub steps: usize,
    /// Heap allocations during encode and search, as the reader's count sees them (0 without
    /// one: [`Reader::counting`]).
    pub allocations: usize,
}

impl Reader<'_> {
    /// The reader, reporting the heap allocations of each reading's encode and search by
    /// `allocations`.
    pub fn counting(self, allocations: AllocationCount) -> Self {
        Reader {
            allocations,
            ..self
        }
    }

    /// Reads `text` once.
    pub fn read(&mut self, text: &str) -> Result<Reading, NumbersError> {
        let Reader {
            session,
            vocab,
            ids,
            best,
            options,
            allocations,
        } = self;
        vocab.encode_into(text, ids)?;
        let count = *allocations;
        let before = count();
        let searched = encode_and_search(session, ids, best, options);
        let allocations = count() - before;
        let (encode, total, steps) = searched?;
        let decoded = vocab.decode(best);
        Ok(Reading {
            digits: decoded.text,
            finished: decoded.finished,
            encode,
            total,
            steps,
            allocations,
        })
    }
}

/// Encodes `ids` and greedy-decodes into `best`: the encoder's time, the total time and the
/// decoder steps run.
fn encode_and_search(
    session: &mut Session<&Model<'static>>,
    ids: &[u32],
    best: &mut Vec<u32>,
    options: &SearchOptions,
) -> Result<(Duration, Duration, usize), RunError> {
    let start = Instant::now();
    session.encode(ids)?;
    let encode = start.elapsed();
    let mut steps = 0usize;
    let hyps = session.generate(Request::new(*options).on_step(|_| steps += 1))?;
    // At most `max_target` tokens: within `best`'s capacity, so no allocation.
    best.clear();
    if let Some(h) = hyps.best() {
        best.extend_from_slice(h.tokens);
    }
    Ok((encode, start.elapsed(), steps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_files_fit_each_other_and_read_every_example() {
        let numbers = Numbers::embedded().expect("the embedded model loads");
        let config = numbers.model().config();
        assert!(numbers.vocab.max_source() <= config.max_src_len);
        assert!(numbers.vocab.max_target() <= config.max_tgt_len);
        let mut reader = numbers.reader(Isa::best()).expect("a session");
        for text in EXAMPLES {
            let reading = reader.read(text).expect("an example reads");
            assert!(reading.steps >= 1 && reading.steps <= numbers.vocab.max_target());
            assert!(reading.total >= reading.encode);
        }
    }

    #[test]
    fn a_reading_reports_its_count_of_allocations() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        // A count that moves by 3 at each look: one reading looks before and after.
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        fn count() -> usize {
            COUNT.fetch_add(3, Ordering::Relaxed)
        }
        let numbers = Numbers::embedded().expect("the embedded model loads");
        let mut reader = numbers.reader(Isa::best()).expect("a session");
        assert_eq!(reader.read("nineteen").expect("reads").allocations, 0);
        let mut reader = reader.counting(count);
        assert_eq!(reader.read("nineteen").expect("reads").allocations, 3);
    }

    #[test]
    fn damaged_embedded_files_are_refused() {
        let truncated = &WEIGHTS[..WEIGHTS.len() / 2];
        assert!(matches!(
            Numbers::from_parts(CONFIG_JSON, truncated, VOCAB_JSON),
            Err(NumbersError::Load(_))
        ));
        assert!(matches!(
            Numbers::from_parts("{", WEIGHTS, VOCAB_JSON),
            Err(NumbersError::Config(_))
        ));
        assert!(matches!(
            Numbers::from_parts(CONFIG_JSON, WEIGHTS, "[]"),
            Err(NumbersError::Vocab(_))
        ));
    }
}
