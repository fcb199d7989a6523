//! `tessel translate --model DIR [TEXT]...`: text in, text out, through
//! [`tessel_pipeline::Translator`].
//!
//! The texts given as arguments, or else every line of standard input, are translated and
//! printed one output line per input line, in order. `--threads N` splits the lines over `N`
//! sessions sharing one model, each on its own thread (contiguous chunks, so the output order
//! is the input order); each session runs its GEMMs on one thread. `--nbest K` prints `K`
//! hypotheses per input, tab-separated as `index<TAB>score<TAB>text`.
//!
//! Decoding options start from the model's defaults ([`Translator::defaults`]: its
//! `generation_config.json`, the target language as forced BOS) and each flag given replaces
//! one of them ([`options`]). Sampling is on with `--sample`, with any of `--temperature`,
//! `--top-k`, `--top-p`, or when the generation config sets `do_sample` (unless
//! `--no-sample`); the settings not given come from the generation config, else from
//! `transformers`' defaults. Every line's search starts from the same seed (`--seed`, else one
//! drawn per run), so a line's output depends on its text and the seed only, not on
//! `--threads` or on the other lines.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::Args;
use tessel_model::{EarlyStopping, WeightType};
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
    /// Source language code, for the models that have them (NLLB `eng_Latn`, M2M100 `en`,
    /// mBART-50 `en_XX`; an error for the others); default: the tokenizer config's.
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
    /// Exponent α of the length normalisation: a hypothesis scores its summed
    /// log-probabilities over length^α (default: the generation config's `length_penalty`,
    /// else 1; 0 ranks by the plain sum, larger values favour longer outputs).
    #[arg(long, value_name = "F", value_parser = finite, allow_negative_numbers = true)]
    pub length_penalty: Option<f32>,
    /// No EOS before the output has N positions, the decoder start token counted, as
    /// `transformers`' `min_length` counts them (default: the generation config's).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub min_length: Option<usize>,
    /// `A,B`: at most ⌈A · source tokens⌉ + B tokens generated (fairseq's max_len_a,
    /// max_len_b; `A` alone is `A,0`); the smallest of this and the other length limits wins.
    #[arg(long, value_name = "A,B", value_parser = length_ratio, allow_negative_numbers = true)]
    pub max_length_ratio: Option<(f32, usize)>,
    /// Repetition penalty θ > 0: each token already generated has a positive score divided and
    /// a negative one multiplied by θ (1 is off; default: the generation config's).
    #[arg(long, value_name = "F", value_parser = positive_float, allow_negative_numbers = true)]
    pub repetition_penalty: Option<f32>,
    /// Never generate an n-gram of this size twice; 0 is off (default: the generation
    /// config's).
    #[arg(long, value_name = "N")]
    pub no_repeat_ngram_size: Option<usize>,
    /// When beam search stops before the length limit (`transformers`' `early_stopping`):
    /// `true` once the beam's hypotheses have finished, `false` once the best live one cannot
    /// beat the worst finished one at its current length, `never` (with a positive length
    /// penalty) only when it cannot at the length limit (default: the generation config's,
    /// else `false`).
    #[arg(long, value_name = "WHEN", value_parser = early_stopping)]
    pub early_stopping: Option<EarlyStopping>,
    /// Target text every output starts with, tokenized with the target tokenizer and forced
    /// after the forced BOS (the target language); it is part of the output and of its score.
    #[arg(long, value_name = "TEXT")]
    pub prefix: Option<String>,
    /// Draw each token at random from the model's distribution instead of searching (one
    /// hypothesis, beam 1).
    #[arg(long, conflicts_with = "no_sample")]
    pub sample: bool,
    /// Search (greedy or beam) even when the generation config sets `do_sample`.
    #[arg(long)]
    pub no_sample: bool,
    /// Sampling temperature T ≥ 0: tokens are drawn from softmax(logits / T); 0 is greedy.
    /// Implies --sample (default: the generation config's `temperature`, else 1).
    #[arg(long, value_name = "F", value_parser = non_negative_float, conflicts_with = "no_sample", allow_negative_numbers = true)]
    pub temperature: Option<f32>,
    /// Sample only among the K most likely tokens; 0 keeps all. Implies --sample (default:
    /// the generation config's `top_k`, else 50 as in transformers).
    #[arg(long, value_name = "K", conflicts_with = "no_sample")]
    pub top_k: Option<usize>,
    /// Sample only among the most likely tokens holding this share of the probability, in
    /// (0, 1]. Implies --sample (default: the generation config's `top_p`, else 1).
    #[arg(long, value_name = "F", value_parser = probability, conflicts_with = "no_sample", allow_negative_numbers = true)]
    pub top_p: Option<f32>,
    /// Seed of the sampling generator: the same seed, text and options give the same output
    /// (default: a different seed each run).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

/// `true`, `false` or `never`.
fn early_stopping(text: &str) -> Result<EarlyStopping, String> {
    match text {
        "true" => Ok(EarlyStopping::WhenFull),
        "false" => Ok(EarlyStopping::Heuristic),
        "never" => Ok(EarlyStopping::Never),
        _ => Err("must be true, false or never".to_owned()),
    }
}

/// A finite number.
fn finite(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err("must be finite".to_owned()),
        Err(e) => Err(format!("not a number: {e}")),
    }
}

/// A finite number above 0.
fn positive_float(text: &str) -> Result<f32, String> {
    match finite(text)? {
        v if v > 0.0 => Ok(v),
        _ => Err("must be above 0".to_owned()),
    }
}

/// A finite number of at least 0.
fn non_negative_float(text: &str) -> Result<f32, String> {
    match finite(text)? {
        v if v >= 0.0 => Ok(v),
        _ => Err("must not be negative".to_owned()),
    }
}

/// A probability in (0, 1].
fn probability(text: &str) -> Result<f32, String> {
    match finite(text)? {
        v if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err("must be above 0 and at most 1".to_owned()),
    }
}

/// `A,B` (or `A`): a factor of at least 0 and a count.
fn length_ratio(text: &str) -> Result<(f32, usize), String> {
    let (a, b) = text.split_once(',').unwrap_or((text, "0"));
    let a = non_negative_float(a.trim())?;
    let b = b
        .trim()
        .parse::<usize>()
        .map_err(|e| format!("B is not a count: {e}"))?;
    Ok((a, b))
}

/// The options of one run: the model's defaults with every flag given applied.
pub fn options(
    args: &TranslateArgs,
    translator: &Translator,
) -> Result<TranslateOptions, CliError> {
    let asked =
        args.sample || args.temperature.is_some() || args.top_k.is_some() || args.top_p.is_some();
    let sampling = !args.no_sample && (asked || translator.sampling_defaults().do_sample);
    let mut options: TranslateOptions = translator.search_defaults().clone();
    let decode = &mut options.decode;
    if let Some(beam) = args.beam {
        decode.search.beam = beam;
    }
    if let Some(n) = args.max_length {
        decode.max_new_tokens = Some(n);
    }
    if let Some(alpha) = args.length_penalty {
        decode.search.length_penalty = alpha;
    }
    if let Some(n) = args.min_length {
        decode.min_length = n;
    }
    if let Some(ratio) = args.max_length_ratio {
        decode.max_length_ratio = Some(ratio);
    }
    if let Some(theta) = args.repetition_penalty {
        decode.repetition_penalty = theta;
    }
    if let Some(n) = args.no_repeat_ngram_size {
        decode.no_repeat_ngram_size = n;
    }
    if let Some(when) = args.early_stopping {
        decode.early_stopping = when;
    }
    if let Some(text) = &args.prefix {
        decode.prefix = translator.target_prefix(text)?;
    }
    if sampling {
        if args.beam.is_some_and(|b| b > 1) || args.nbest > 1 {
            return Err(CliError::BadOption(
                "sampling draws one hypothesis: --beam and --nbest must be 1",
            ));
        }
        let mut s = translator.sampling(args.seed.unwrap_or_else(random_seed));
        if let Some(t) = args.temperature {
            s.temperature = t;
        }
        if let Some(k) = args.top_k {
            s.top_k = k;
        }
        if let Some(p) = args.top_p {
            s.top_p = p;
        }
        decode.search.sampling = Some(s);
        decode.search.beam = 1;
    } else if args.seed.is_some() {
        return Err(CliError::BadOption(
            "--seed applies to sampling: add --sample (or --temperature, --top-k, --top-p)",
        ));
    }
    decode.num_hypotheses = args.nbest;
    decode.search.beam = decode.search.beam.max(args.nbest);
    options.truncate = args.truncate;
    Ok(options)
}

/// A seed that differs from run to run (the standard library's per-process random keys).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
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
    let options = options(args, &translator)?;

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
