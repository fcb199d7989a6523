//! `tessel summarize --model DIR [< document.txt]`: a document in, its summary out, with the
//! engine and options of `tessel translate` ([`crate::translate`]) and the model's generation
//! config as defaults (BART-large-CNN's: beam 4, length penalty 2, 56 to 142 tokens, no
//! repeated 3-gram).
//!
//! A document is one input, not one line: the whole of standard input, or of `--input FILE`,
//! or each TEXT argument, with its surrounding whitespace removed (inner line breaks are part
//! of the text). The summary is printed once decoded, line breaks and all, then on standard
//! error a report: the source tokens, the encoder's time, the time per generated token and
//! the session's arena bytes. With `--progress` (or a terminal), a line on standard error
//! shows the encoding and the tokens decoded so far.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use crate::checks;
use crate::error::CliError;
use crate::translate::{load, TranslateArgs};

/// `tessel summarize`'s options: `tessel translate`'s, and the file to read.
#[derive(Debug, Args)]
pub struct SummarizeArgs {
    /// The model and decoding options, as `tessel translate` takes them (TEXT arguments are
    /// whole documents).
    #[command(flatten)]
    pub translate: TranslateArgs,
    /// Reads the document from FILE instead of standard input.
    #[arg(long, value_name = "FILE", conflicts_with = "text")]
    pub input: Option<PathBuf>,
    /// Shows the encoding and the tokens decoded so far on standard error as they happen
    /// (the default when standard error is a terminal).
    #[arg(long)]
    pub progress: bool,
}

/// What summarizing one document took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// Source tokens the encoder read.
    pub source_tokens: usize,
    /// Seconds the encoder took.
    pub encode: f64,
    /// Tokens generated (forced ones and EOS included).
    pub generated: usize,
    /// Seconds the decoder took.
    pub decode: f64,
}

/// Runs `tessel summarize`: each document of `args` or `input` summarized to `out`, a report
/// per document on standard error.
pub fn summarize(
    args: &SummarizeArgs,
    input: &mut dyn Read,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let isa = tessel_model::isa_env::isa_from_env()?;
    let documents = documents(args, input)?;
    let options = &args.translate;
    let (translator, decode) = load(options, "summarize")?;
    let bytes = translator.session_bytes(options.threads)?;
    checks::fits_in_memory(bytes, 1)?;
    let mut session = translator.session(isa, options.threads)?;
    let mut progress = Progress::new(args.progress || std::io::stderr().is_terminal());
    for document in &documents {
        let start = Instant::now();
        progress.show(format_args!("summarize: encoding"));
        let source_tokens = session.encode_text(document, &decode)?;
        let encoded = Instant::now();
        let best = match source_tokens {
            0 => Vec::new(),
            _ => session.generate_watched(&decode, |step| {
                progress.show(format_args!(
                    "summarize: {source_tokens} source tokens encoded, {} tokens decoded",
                    step + 1
                ));
            })?,
        };
        progress.clear();
        let report = Report {
            source_tokens,
            encode: (encoded - start).as_secs_f64(),
            generated: best.first().map_or(0, |t| t.tokens.len()),
            decode: encoded.elapsed().as_secs_f64(),
        };
        let text = best.first().map_or("", |t| t.text.as_str());
        writeln!(out, "{text}")?;
        out.flush()?;
        eprintln!("{}", summary_line(&report, bytes));
    }
    Ok(())
}

/// A progress line on standard error, rewritten in place (`\r`) and erased before other
/// output; a closed standard error only loses it.
struct Progress {
    on: bool,
    /// Characters of the line on screen.
    shown: usize,
}

impl Progress {
    fn new(on: bool) -> Progress {
        Progress { on, shown: 0 }
    }

    fn show(&mut self, line: std::fmt::Arguments<'_>) {
        if self.on {
            let line = line.to_string();
            let pad = self.shown.saturating_sub(line.chars().count());
            let _ = write!(std::io::stderr(), "\r{line}{:pad$}", "");
            self.shown = line.chars().count() + pad;
        }
    }

    fn clear(&mut self) {
        if self.on && self.shown > 0 {
            let _ = write!(std::io::stderr(), "\r{:1$}\r", "", self.shown);
            self.shown = 0;
        }
    }
}

/// The documents: `--input`'s file, else the TEXT arguments, else all of `input`; each
/// trimmed.
fn documents(args: &SummarizeArgs, input: &mut dyn Read) -> Result<Vec<String>, CliError> {
    let unreadable = |path: &str, source| CliError::InputFile {
        path: path.into(),
        source,
    };
    let mut text = String::new();
    if let Some(path) = &args.input {
        checks::readable_file(path)?;
        text = std::fs::read_to_string(path)
            .map_err(|e| unreadable(&path.display().to_string(), e))?;
    } else if !args.translate.text.is_empty() {
        return Ok(args
            .translate
            .text
            .iter()
            .map(|t| t.trim().to_owned())
            .collect());
    } else {
        input
            .read_to_string(&mut text)
            .map_err(|e| unreadable("standard input", e))?;
    }
    Ok(vec![text.trim().to_owned()])
}

/// The report line: `summarize: N source tokens, encoder X ms, Y ms/token over K tokens,
/// arena B bytes`.
pub fn summary_line(report: &Report, arena_bytes: usize) -> String {
    let per_token = match report.generated {
        0 => 0.0,
        n => report.decode * 1e3 / n as f64,
    };
    format!(
        "summarize: {} source tokens, encoder {:.1} ms, {:.2} ms/token over {} tokens, \
         arena {} bytes",
        report.source_tokens,
        report.encode * 1e3,
        per_token,
        report.generated,
        arena_bytes
    )
}
