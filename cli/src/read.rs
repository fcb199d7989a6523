//! `tessel` and `tessel --text TEXT`: the embedded numbers model reads each text (or the
//! built-in examples) and prints it with its digits, its time and the heap allocations made
//! while the model ran.
//!
//! Each text is read [`RUNS`] times after one unmeasured warm-up reading; the times printed
//! are medians over those runs.

use std::io::Write;
use std::time::{Duration, Instant};

use tessel_model::isa_env::isa_from_env;
use tessel_numbers::{Numbers, Reader, Reading, EXAMPLES};

use crate::counting;
use crate::error::CliError;

/// Measured readings of each text.
pub const RUNS: usize = 5;

/// Milliseconds.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Reads `texts` (the examples when empty) and writes one line per text to `out`.
pub fn read(texts: &[String], out: &mut dyn Write) -> Result<(), CliError> {
    let isa = isa_from_env()?;
    let start = Instant::now();
    let numbers = Numbers::embedded()?;
    let built = start.elapsed();
    let mut reader = numbers.reader(isa)?.counting(counting::allocations);
    let texts: Vec<&str> = if texts.is_empty() {
        EXAMPLES.to_vec()
    } else {
        texts.iter().map(String::as_str).collect()
    };
    for &text in &texts {
        numbers.check(text).map_err(|e| CliError::Reading {
            text: text.to_owned(),
            source: e.into(),
        })?;
    }
    let model = numbers.model();
    let config = model.config();
    writeln!(
        out,
        "tessel: the embedded numbers model (English number words -> digits)"
    )?;
    writeln!(
        out,
        "  model   {}+{} layers, d_model {}, {:.2} MB of weights (linear layers {}), built in {:.1} ms, isa {}",
        config.encoder_layers,
        config.decoder_layers,
        config.d_model,
        model.weight_bytes() as f64 / 1e6,
        model.generator().weight_type(),
        ms(built),
        isa.level()
    )?;
    let width = texts.iter().map(|t| t.chars().count()).max().unwrap_or(0);
    let mut allocations = 0;
    for &text in &texts {
        let reading = |reader: &mut Reader<'_>| {
            reader.read(text).map_err(|source| CliError::Reading {
                text: text.to_owned(),
                source,
            })
        };
        // Warm-up (and the answer: every run reads the same).
        let first = reading(&mut reader)?;
        let mut runs: Vec<Reading> = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            runs.push(reading(&mut reader)?);
        }
        allocations += runs.iter().map(|r| r.allocations).sum::<usize>();
        let median = |time: fn(&Reading) -> Duration| {
            let mut times: Vec<Duration> = runs.iter().map(time).collect();
            times.sort();
            times[times.len() / 2]
        };
        let ended = if first.finished {
            String::new()
        } else {
            format!(" (no end within {} steps)", first.steps)
        };
        writeln!(
            out,
            "  {text:<width$} -> {:<10} {:.3} ms (encode {:.3} ms, {} decoder steps){ended}",
            first.digits,
            ms(median(|r| r.total)),
            ms(median(|r| r.encode)),
            first.steps,
        )?;
    }
    writeln!(
        out,
        "  heap allocs {allocations} during inference (times: median of {RUNS} runs)"
    )?;
    Ok(())
}
