//! The command line, declared with `clap`'s derive API: the embedded model's options at the
//! top level and one subcommand per other use (`run`, `bench`, `plan`). Every option's doc
//! comment is its `--help` text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use tessel_model::WeightType;

use crate::bounds::{positive, threads, weight_type_parser};

/// Defaults of the Transformer-base measurement (`tessel bench`, and `tessel run` without
/// options).
pub mod defaults {
    /// Source tokens encoded.
    pub const SRC_LEN: usize = 32;
    /// Tokens decoded.
    pub const STEPS: usize = 32;
    /// Measured runs.
    pub const RUNS: usize = 5;
    /// Seed of the random weights and of the source tokens.
    pub const SEED: u64 = 42;
}

/// tessel: a CPU inference engine for transformer encoder-decoders.
///
/// With no subcommand, runs the small model compiled into this binary, which reads English
/// numbers written in words and answers with their digits ("four hundred and twelve thousand
/// and seven" -> 412007): a few built-in examples, or the texts given with --text, each
/// printed with its output and its time.
///
/// `TESSEL_ISA=scalar|avx2|avx512|neon` forces an instruction-set level (default: the best
/// this CPU runs).
#[derive(Debug, Parser)]
#[command(name = "tessel", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// A number in English words for the embedded model to read (repeat the option for
    /// several). Letters, spaces, commas and hyphens, at most 128 characters once runs of
    /// spaces are collapsed; case does not matter. Without it, built-in examples are read.
    #[arg(long, value_name = "TEXT")]
    pub text: Vec<String>,

    /// What to do instead of running the embedded model.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs a model on a deterministic source and reports its latency, memory and heap
    /// allocations.
    ///
    /// The model is a directory (--model), or seeded random weights for a config (--config)
    /// or for Transformer-base (neither). A source of --src-len token ids is encoded and
    /// --steps tokens are decoded, --runs times after one unmeasured warm-up run. Printed:
    /// the ISA level, weight bytes and the bytes one decode step reads, the arena's size,
    /// the encode time, the median and 99th-percentile time per decoded token, and the heap
    /// allocations counted during the measured runs (0: nothing allocates after setup).
    Run(RunArgs),
    /// The Transformer-base benchmark: 32 tokens encoded, 32 greedy-decoded, timed.
    ///
    /// `tessel run` on a Transformer-base shaped model (6+6 layers, d_model 512, 8 heads,
    /// d_ff 2048, vocabulary 32000) with seeded random weights, encoding 32 tokens and
    /// greedy-decoding 32 (EOS ignored so every run decodes them all), with the same report.
    Bench(BenchArgs),
    /// Prints the arena a session of a model allocates, region by region.
    ///
    /// Each region's name, offset and size in bytes, for the limits given (by default the
    /// model's own maxima).
    /// A tessel model directory's config.json is read without its weights; a CTranslate2
    /// directory is loaded (its config comes from model.bin).
    Plan(PlanArgs),
    /// Transcribes (or translates) a WAV file with a Whisper model directory.
    ///
    /// openai-whisper's algorithm: 30 s windows seeking by timestamps, conditioning on the
    /// previous text, temperature fallback, no-speech detection, language detection. Prints
    /// the transcript, then on stderr a summary (real-time factor, encode and per-token
    /// times, arena bytes, allocations during inference). In the txt, srt, vtt and jsonl
    /// formats each segment is printed (and flushed) as soon as it is final; json is printed
    /// at the end.
    ///
    /// Limits, checked before the model loads: --beam 1 to 64, --best-of at least 1,
    /// --threads at most 4 × the cores, temperatures ≥ 0, --no-speech-threshold in [0, 1];
    /// the audio file must be readable and the directory a Whisper model; the session's arena
    /// must fit in the memory available.
    Transcribe(crate::transcribe::TranscribeArgs),
    /// Translates text with a translation model directory: the texts given, or each line of
    /// standard input, one output line each.
    ///
    /// Outputs come in input order, each written as soon as it and the ones before it are
    /// done. An output's newline, carriage return, tab and backslash are written as `\n`,
    /// `\r`, `\t` and `\\`, so every input gets exactly one line (--nbest K: K lines
    /// `index<TAB>score<TAB>text`). An input that fails gets an empty line (--nbest K: K lines
    /// `index<TAB><TAB>`) and its error on standard error as `tessel: line N: reason`
    /// (`text N` for TEXT arguments); the others are translated, and the exit status is 1.
    ///
    /// Limits, checked before the model loads: --beam 1 to 64, --nbest at most the beam,
    /// --min-length at most --max-length + 1, --threads at most 4 × the cores, --batch-size
    /// at most 256 texts (1048576 tokens with --batch-type tokens); and the sessions' arenas
    /// must fit in the memory available (checked before they are made).
    Translate(crate::translate::TranslateArgs),
    /// Summarizes a document with a text-to-text model directory (BART-large-CNN,
    /// distilbart, T5): all of standard input (or --input FILE, or each TEXT) is one document.
    ///
    /// The same engine and options as `translate`, the defaults from the model's generation
    /// config. Prints the summary, then on stderr the source tokens, the encoder's time, the
    /// time per generated token and the arena's bytes. A document longer than the model reads
    /// is refused unless --truncate.
    #[command(mut_arg("text", |a| a.help(
        "Documents to summarize, each one whole text; without them, all of standard input \
         (or --input FILE) is one"
    )))]
    Summarize(crate::summarize::SummarizeArgs),
    /// Writes a model as one packed image file.
    ///
    /// The image holds the config and every tensor, the linear layers' weights already in
    /// the GEMM's packed layout (the same at every ISA level), each 64-byte aligned: `tessel
    /// run --model FILE` runs it, and a host without an allocator can compile it in with
    /// `include_bytes!` (see tessel-model's `image` module for the format).
    Pack(PackArgs),
}

/// Options of `tessel pack`.
#[derive(Debug, Args)]
pub struct PackArgs {
    /// The model to pack (a directory, --config for seeded random weights, or neither for
    /// Transformer-base).
    #[command(flatten)]
    pub model: ModelArgs,

    /// The image file to write.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,

    /// How the linear layers' weights are stored in the image. Without it each keeps the
    /// type its file stores.
    #[arg(long, value_name = "TYPE", value_parser = weight_type_parser())]
    pub weights: Option<WeightType>,
}

/// Where a model comes from.
#[derive(Debug, Args)]
pub struct ModelArgs {
    /// A model directory: tessel's config.json + model.safetensors (tensor names as in
    /// tessel-model's `weights` module), or a CTranslate2 Transformer directory (model.bin,
    /// config.json, vocabularies), or a packed image file written by `tessel pack`. Without --model or --config: Transformer-base.
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    pub model: Option<PathBuf>,

    /// A tessel config.json: a model of that shape with seeded random weights.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Options of `tessel run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The model.
    #[command(flatten)]
    pub model: ModelArgs,

    /// Beam width; 1 is greedy search. At most the model's max_beam.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = positive)]
    pub beam: usize,

    /// Source length in tokens (deterministic ids from --seed, avoiding the special ids).
    #[arg(long, value_name = "N", default_value_t = defaults::SRC_LEN, value_parser = positive)]
    pub src_len: usize,

    /// Most tokens to decode (decoder steps, the step fed BOS included).
    #[arg(long, value_name = "N", default_value_t = defaults::STEPS, value_parser = positive)]
    pub steps: usize,

    /// Runs, seed, threads and weight storage.
    #[command(flatten)]
    pub common: CommonArgs,

    /// Treat EOS as an ordinary token so every run decodes all --steps tokens (the default
    /// for random weights).
    #[arg(long, conflicts_with = "stop_at_eos")]
    pub ignore_eos: bool,

    /// Finish a hypothesis when it produces EOS (the default with --model).
    #[arg(long)]
    pub stop_at_eos: bool,
}

/// Options of `tessel bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Runs, seed, threads and weight storage.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The measurement options `run` and `bench` share.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Measured runs (after one unmeasured warm-up run); times are medians over them.
    #[arg(long, value_name = "N", default_value_t = defaults::RUNS, value_parser = positive)]
    pub runs: usize,

    /// Seed of the random weights and of the source token ids.
    #[arg(long, value_name = "N", default_value_t = defaults::SEED)]
    pub seed: u64,

    /// Threads the GEMMs split their columns over, the calling one included (results are
    /// bit-identical for every count); at most 4 × the cores available.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = threads)]
    pub threads: usize,

    /// How the linear layers' weights are stored in memory. Without it each keeps the type
    /// its file stores (an f16 checkpoint stays f16, a CTranslate2 int8 one int8; random
    /// weights are f32). Activations are f32 throughout except inside bf16-dot products and
    /// int8 products (quantised per row).
    #[arg(long, value_name = "TYPE", value_parser = weight_type_parser())]
    pub weights: Option<WeightType>,
}

/// Options of `tessel plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The model.
    #[command(flatten)]
    pub model: ModelArgs,

    /// Longest source to plan for (default: the config's max_src_len; 512 for CTranslate2).
    #[arg(long, value_name = "N", value_parser = positive)]
    pub max_src_len: Option<usize>,

    /// Most target positions to plan for, BOS included (default: the config's max_tgt_len;
    /// 512 for CTranslate2).
    #[arg(long, value_name = "N", value_parser = positive)]
    pub max_tgt_len: Option<usize>,

    /// Widest beam to plan for (default: the config's max_beam; 4 for CTranslate2).
    #[arg(long, value_name = "N", value_parser = positive)]
    pub max_beam: Option<usize>,

    /// Threads the GEMMs run on (scratch is planned per thread).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = positive)]
    pub threads: usize,

    /// Sequences decoded together (`tessel translate --batch-size`), each with its own caches.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = crate::bounds::batch_size)]
    pub batch: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_weight_type_parses_by_its_name() {
        for t in WeightType::ALL {
            let cli = Cli::try_parse_from(["tessel", "bench", "--weights", t.name()])
                .expect("a weight type name parses");
            match cli.command {
                Some(Command::Bench(b)) => assert_eq!(b.common.weights, Some(t)),
                other => panic!("parsed as {other:?}"),
            }
        }
        assert!(Cli::try_parse_from(["tessel", "bench", "--weights", "f64"]).is_err());
    }
}
