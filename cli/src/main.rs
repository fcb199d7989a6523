//! `tessel`: the command-line face of the tessel inference engine.
//!
//! - `tessel` / `tessel --text TEXT`: the embedded numbers model (English number words to
//!   digits, [`numbers`]) reads built-in examples or the given texts ([`read`]).
//! - `tessel run`: a model directory or seeded random weights, measured ([`measure`]).
//! - `tessel bench`: the Transformer-base benchmark ([`measure`]).
//! - `tessel plan`: the arena of a model and limits, region by region ([`plan`]).
//!
//! `tessel --help` and `tessel <command> --help` explain every option ([`args`]). The process
//! runs under a counting global allocator ([`counting`]) so every report states the heap
//! allocations made while the model ran. Errors are printed as `tessel: <message>` with exit
//! status 1; a command line clap rejects exits with status 2.

mod args;
mod counting;
mod error;
mod measure;
mod numbers;
mod plan;
mod read;
mod source;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};
use error::CliError;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

/// Runs what `cli` asks, writing the report to `out`.
fn dispatch(cli: &Cli, out: &mut dyn Write) -> Result<(), CliError> {
    match &cli.command {
        None => read::read(&cli.text, out),
        Some(Command::Run(args)) => measure::measure(&measure::Measure::run(args)?, out),
        Some(Command::Bench(args)) => measure::measure(&measure::Measure::bench(args), out),
        Some(Command::Plan(args)) => plan::plan(args, out),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut out = std::io::stdout().lock();
    match dispatch(&cli, &mut out).and_then(|()| out.flush().map_err(CliError::from)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Nothing more can be reported if stderr is closed too.
            let _ = writeln!(std::io::stderr(), "tessel: {e}");
            ExitCode::FAILURE
        }
    }
}
