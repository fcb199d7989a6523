//! `tessel`: the command-line face of the tessel inference engine.
//!
//! - `tessel` / `tessel --text TEXT`: the embedded numbers model (English number words to
//!   digits) reads built-in examples or the given texts.
//! - `tessel run`: a model directory or seeded random weights, measured.
//! - `tessel bench`: the Transformer-base benchmark.
//! - `tessel plan`: the arena of a model and limits, region by region.
//! - `tessel pack`: a model as one packed image file.
//!
//! `tessel --help` and `tessel <command> --help` explain every option. The process runs under
//! a counting global allocator so every report states the heap allocations made while the
//! model ran. Errors are printed as `tessel: <message>` with exit status 1; a command line clap
//! rejects exits with status 2.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use tessel_cli::args::Cli;
use tessel_cli::counting::Counting;
use tessel_cli::error::CliError;

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut out = std::io::stdout().lock();
    let done = tessel_cli::dispatch(&cli, &mut out);
    match done.and_then(|()| out.flush().map_err(CliError::from)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Nothing more can be reported if stderr is closed too.
            let _ = writeln!(std::io::stderr(), "tessel: {e}");
            ExitCode::FAILURE
        }
    }
}
