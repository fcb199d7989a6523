//! `tessel translate --model DIR [TEXT]...`: text in, text out, through
//! [`tessel_pipeline::Translator`].
//!
//! The texts given as arguments, or else every line of standard input, are translated and
//! printed one output line per input line, in order. `--threads N` splits the lines over `N`
//! sessions sharing one model, each on its own thread (contiguous chunks, so the output order
//! is the input order); each session runs its GEMMs on one thread. `--nbest K` prints `K`
//! hypotheses per input, tab-separated as `index<TAB>score<TAB>text`.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::Args;
use tessel_model::WeightType;
use tessel_pipeline::{LoadSettings, TranslateOptions, Translation, Translator};

use crate::args::{positive, weight_type_parser};
use crate::error::CliError;

/// Stack of each translating thread.
const STACK_BYTES: usize = 8 << 20;

/// `tessel translate`'s options.
#[derive(Debug, Args)]
pub struct TranslateArgs {
    /// The model directory: Hugging Face (config.json, model.safetensors, tokenizer files,
    /// generation_config.json) of a Marian, BART, mBART, M2M100/NLLB or T5 model, or its
    /// CTranslate2 conversion with the tokenizer files copied in.
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Texts to translate; without them, each line of standard input is one text.
    #[arg(value_name = "TEXT")]
    pub text: Vec<String>,
    /// Source language code, for the models that need one (NLLB `eng_Latn`, M2M100 `en`,
    /// mBART-50 `en_XX`); default: the tokenizer config's.
    #[arg(long, value_name = "CODE")]
    pub src_lang: Option<String>,
    /// Target language code (forced as the first generated token by NLLB, M2M100, mBART-50).
    #[arg(long, value_name = "CODE")]
    pub tgt_lang: Option<String>,
    /// Beam width (default: the generation config's `num_beams`).
    #[arg(long, value_name = "N", value_parser = positive)]
    pub beam: Option<usize>,
    /// Most tokens to generate per text (default: the generation config's length).
    #[arg(long, value_name = "N", value_parser = positive)]
    pub max_length: Option<usize>,
    /// Hypotheses to print per text (at most the beam width).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = positive)]
    pub nbest: usize,
    /// Sessions translating in parallel, sharing the model.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = positive)]
    pub threads: usize,
    /// Cut texts longer than the model reads instead of refusing them.
    #[arg(long)]
    pub truncate: bool,
    /// How the linear layers' weights are stored in memory (default: as the file stores them).
    #[arg(long, value_name = "TYPE", value_parser = weight_type_parser())]
    pub weights: Option<WeightType>,
}

/// Runs `tessel translate`: texts from `args` or `input`, one output line each to `out`.
pub fn translate(
    args: &TranslateArgs,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let isa = tessel_model::isa_env::isa_from_env()?;
    let mut lines = args.text.clone();
    if lines.is_empty() {
        for line in input.lines() {
            lines.push(line.map_err(|source| CliError::Read {
                path: PathBuf::from("<stdin>"),
                source,
            })?);
        }
    }
    let settings = LoadSettings {
        // Without --beam the generation config decides; 8 covers the published ones.
        max_beam: args.beam.unwrap_or(8).max(args.nbest),
        weights: args.weights,
        ..LoadSettings::default()
    };
    let translator = Translator::load(
        &args.model,
        settings,
        args.src_lang.as_deref(),
        args.tgt_lang.as_deref(),
    )?;
    let mut options: TranslateOptions = translator.defaults().clone();
    if let Some(beam) = args.beam {
        options.decode.search.beam = beam;
    }
    if let Some(n) = args.max_length {
        options.decode.max_new_tokens = Some(n);
    }
    options.decode.num_hypotheses = args.nbest;
    options.decode.search.beam = options.decode.search.beam.max(args.nbest);
    options.truncate = args.truncate;

    let threads = args.threads.min(lines.len()).max(1);
    let chunk = lines.len().div_ceil(threads).max(1);
    let results: Vec<Result<Vec<Vec<Translation>>, CliError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|part| {
                let (translator, options) = (&translator, &options);
                // The main thread's stack size: unoptimised builds need more than the 2 MiB
                // a spawned thread gets by default.
                std::thread::Builder::new()
                    .stack_size(STACK_BYTES)
                    .spawn_scoped(scope, move || -> Result<_, CliError> {
                        let mut session = translator.session(isa, 1)?;
                        Ok(session.translate_lines(part, options)?)
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or(Err(CliError::WorkerPanicked)),
                Err(e) => Err(CliError::ThreadSpawn(e)),
            })
            .collect()
    });
    for part in results {
        for hyps in part? {
            if args.nbest == 1 {
                let text = hyps.first().map_or("", |h| h.text.as_str());
                writeln!(out, "{text}")?;
            } else {
                for (i, h) in hyps.iter().enumerate() {
                    writeln!(out, "{i}\t{:.4}\t{}", h.score, h.text)?;
                }
            }
        }
    }
    Ok(())
}
