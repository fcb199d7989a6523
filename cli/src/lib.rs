//! tessel-cli: the `tessel` command's parts, as a library so tests and fuzz targets reach them.
//!
//! - [`read`]: runs the embedded numbers model ([`tessel_numbers`]: English number words to
//!   digits) on the built-in examples or `--text` inputs.
//! - [`measure`]: `tessel run` and `tessel bench`; [`plan`]: `tessel plan`; [`pack`]:
//!   `tessel pack`; [`source`]: the model those commands load; [`transcribe`]:
//!   `tessel transcribe`; [`translate`]: `tessel translate`; [`summarize`]: `tessel summarize`.
//! - [`args`]: the command line (clap); [`bounds`]: every option's bounds; [`checks`]: the
//!   checks made before a model loads or a session is allocated; [`error`]: every failure as a
//!   typed error; [`counting`]: the counting allocator the binary installs, so reports state
//!   the heap allocations made while a model ran.

pub mod args;
pub mod bounds;
pub mod checks;
pub mod counting;
pub mod error;
pub mod measure;
pub mod pack;
pub mod plan;
pub mod read;
pub mod source;
pub mod summarize;
pub mod transcribe;
pub mod translate;

use std::io::Write;

use args::{Cli, Command};
use error::CliError;

/// Runs what `cli` asks, writing the report to `out`.
pub fn dispatch(cli: &Cli, out: &mut dyn Write) -> Result<(), CliError> {
    match &cli.command {
        None => read::read(&cli.text, out),
        Some(Command::Run(args)) => measure::measure(&measure::Measure::run(args)?, out),
        Some(Command::Bench(args)) => measure::measure(&measure::Measure::bench(args), out),
        Some(Command::Plan(args)) => plan::plan(args, out),
        Some(Command::Transcribe(args)) => transcribe::transcribe(args, out),
        Some(Command::Pack(args)) => pack::pack(args, out),
        Some(Command::Translate(args)) => {
            let mut stdin = std::io::BufReader::new(std::io::stdin());
            translate::translate(args, &mut stdin, out)
        }
        Some(Command::Summarize(args)) => summarize::summarize(args, &mut std::io::stdin(), out),
    }
}
