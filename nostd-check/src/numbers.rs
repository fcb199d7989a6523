//! The numbers model (English number words to digits) run from a packed image compiled into
//! the binary, over a session in a buffer on the stack: nothing is allocated.
//!
//! The text is read as the model's `vocab.json` states: lower-cased, each run of whitespace
//! one space, both ends trimmed, one source id per character; the answer is the target
//! symbols of the greedy search's tokens before EOS.

use core::fmt::Write as _;
use core::mem::MaybeUninit;

use tessel_kernels::Isa;
use tessel_model::load::image::{self, Aligned};
use tessel_model::{Limits, Model, Request, SearchOptions, Session};

use crate::out::{now_ns, Stdout};

/// Tables `build.rs` wrote from `vocab.json` and the plan.
mod vocab {
    include!(concat!(env!("OUT_DIR"), "/numbers_vocab.rs"));
}

/// The packed image, on the 64-byte boundary the reader needs.
static IMAGE: &Aligned<[u8]> =
    &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/numbers.tessel")));

/// Texts and the digits they spell (the examples `tessel` prints).
const EXAMPLES: [(&str, &str); 6] = [
    ("four hundred and twelve thousand and seven", "412007"),
    ("nineteen", "19"),
    ("one thousand nine hundred and eighty-four", "1984"),
    ("two million, three hundred thousand", "2300000"),
    ("Ninety-nine  thousand nine hundred ninety-nine", "99999"),
    ("seven hundred five million and sixty", "705000060"),
];

/// Parses the image, opens a session at `isa` and reads every example, printing each answer;
/// whether all were right.
pub fn reads_every_example(isa: Isa) -> bool {
    let mut blocks = [const { MaybeUninit::uninit() }; vocab::BLOCKS];
    let model = match image::parse(&IMAGE.0, &mut blocks) {
        Ok(model) => model,
        Err(error) => return report(format_args!("the image: {error}")),
    };
    let mut buffer = [0u8; vocab::BUFFER_BYTES];
    let limits = Limits {
        max_src_len: vocab::MAX_SOURCE,
        max_tgt_len: vocab::MAX_TARGET,
        max_beam: 1,
        max_batch: 1,
        encode_sources: 1,
        threads: 1,
        cross_kv: tessel_model::MemoryType::F32,
    };
    let mut session = match Session::in_buffer(&model, isa, limits, &mut buffer) {
        Ok(session) => session,
        Err(error) => return report(format_args!("a session: {error}")),
    };
    let _ = writeln!(
        Stdout,
        "numbers model from a packed image ({} bytes), isa {}, session buffer {} bytes:",
        IMAGE.0.len(),
        isa.level().name(),
        vocab::BUFFER_BYTES
    );
    let mut all_right = true;
    for (text, expected) in EXAMPLES {
        all_right &= read_one(&mut session, &model, text, expected);
    }
    all_right
}

/// Reads `text`, prints the answer and its time, and says whether it is `expected`.
fn read_one<'m>(
    session: &mut Session<&'m Model<'m>, &mut [f32]>,
    model: &Model<'_>,
    text: &str,
    expected: &str,
) -> bool {
    let mut ids = [0u32; vocab::MAX_SOURCE];
    let Some(len) = tokenize(text, &mut ids) else {
        return report(format_args!("{text:?} does not tokenise"));
    };
    let start = now_ns();
    if let Err(error) = session.encode(&ids[..len]) {
        return report(format_args!("encode: {error}"));
    }
    let eos = model.config().eos_id;
    let mut digits = [0u8; vocab::MAX_TARGET];
    let mut answer_len = 0;
    match session.generate(Request::new(SearchOptions::greedy(vocab::MAX_TARGET))) {
        Ok(hypotheses) => {
            let tokens = hypotheses.best().map_or(&[][..], |h| h.tokens);
            for &token in tokens.iter().take_while(|&&t| t != eos) {
                let symbol = vocab::TARGET.get(token as usize).copied().unwrap_or("?");
                for &byte in symbol.as_bytes() {
                    if answer_len < digits.len() {
                        digits[answer_len] = byte;
                        answer_len += 1;
                    }
                }
            }
        }
        Err(error) => return report(format_args!("search: {error}")),
    }
    let micros = now_ns().saturating_sub(start) / 1000;
    let answer = core::str::from_utf8(&digits[..answer_len]).unwrap_or("?");
    let right = answer == expected;
    let verdict = if right { "" } else { "  WRONG, expected " };
    let shown = if right { "" } else { expected };
    let _ = writeln!(
        Stdout,
        "  {text:<47} -> {answer:<10} {micros:>6} us{verdict}{shown}"
    );
    right
}

/// The source ids of `text` in `ids` (its length), or `None` for an empty text, one longer
/// than `ids` or a character the model has no symbol for.
fn tokenize(text: &str, ids: &mut [u32]) -> Option<usize> {
    let space = source_id(' ')?;
    let mut len = 0;
    for word in text.split_whitespace() {
        if len > 0 {
            *ids.get_mut(len)? = space;
            len += 1;
        }
        for c in word.chars().flat_map(char::to_lowercase) {
            *ids.get_mut(len)? = source_id(c)?;
            len += 1;
        }
    }
    (len > 0).then_some(len)
}

/// The id of the one-character source symbol `c`.
fn source_id(c: char) -> Option<u32> {
    vocab::SOURCE
        .iter()
        .find(|&&(symbol, _)| symbol == c)
        .map(|&(_, id)| id)
}

/// Prints a failure; always `false`.
fn report(what: core::fmt::Arguments<'_>) -> bool {
    let _ = writeln!(Stdout, "numbers model: {what}");
    false
}
