//! `tessel translate --model DIR [TEXT]...`: text in, text out, through
//! [`tessel_pipeline::Translator`].
//!
//! The texts given as arguments, or else every line of standard input, are translated and
//! printed one output line per input line, in order, each as soon as it is done ([`stream`]:
//! a failing line gets an empty output and its error on stderr, line breaks in an output are
//! escaped). One batched session decodes up to `--batch-size` lines together (by default up
//! to 32: [`Translator::default_batch`]), its products on `--threads` threads; with
//! `--batch-type tokens` its batches hold up to `--batch-size` source tokens instead
//! ([`stream::TokenBatches`], its slots from [`token_slots`]); at batch size 1,
//! `--threads N` spreads the lines over `N` sessions sharing one model, each on its own thread
//! and running its GEMMs on that thread. `--nbest K` prints `K` hypotheses per input,
//! tab-separated as `index<TAB>score<TAB>text`.
//!
//! Before the model loads: the flags' bounds (the value parsers of [`crate::bounds`]) and the
//! flags against each other ([`check_flags`]), and the directory is a translation model
//! ([`checks::model_kind`]); before the sessions are made, their arenas fit in memory.
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

use clap::{Args, ValueEnum};
use tessel_model::{EarlyStopping, WeightType};
use tessel_pipeline::translate::DEFAULT_BATCH_ARENA;
use tessel_pipeline::{LoadSettings, ModelDir, TranslateOptions, Translator};

use crate::bounds::{
    beam, early_stopping, finite, length_ratio, non_negative_float, positive, positive_float,
    probability, threads, weight_type_parser, MAX_BATCH_SIZE, MAX_BEAM,
};
use crate::checks::{self, Needs};
use crate::error::CliError;

pub mod stream;

/// Most source tokens `--batch-size` takes with `--batch-type tokens`.
pub const MAX_BATCH_TOKENS: usize = 1 << 20;

/// What `--batch-size` counts (CTranslate2's `batch_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum BatchType {
    /// Texts per batch.
    #[default]
    Examples,
    /// Source tokens per batch, each text counted as long as its batch's longest.
    Tokens,
}

/// A `--batch-size`: at least 1, at most [`MAX_BATCH_TOKENS`] (texts are held to
/// [`MAX_BATCH_SIZE`] by [`check_flags`], which knows the batch type).
fn batch_size_or_tokens(text: &str) -> Result<usize, String> {
    match positive(text)? {
        n if n <= MAX_BATCH_TOKENS => Ok(n),
        n => Err(format!("{n} is more than {MAX_BATCH_TOKENS}")),
    }
}

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
    /// Beam width, 1 to 64 (default: the generation config's `num_beams`).
    #[arg(long, value_name = "N", value_parser = beam)]
    pub beam: Option<usize>,
    /// Most tokens to generate per text, at least 1 (default: the generation config's
    /// length); the model's own target length caps it.
    #[arg(long, value_name = "N", value_parser = positive)]
    pub max_length: Option<usize>,
    /// Hypotheses to print per text, at most the beam width (--beam, else the generation
    /// config's `num_beams`); more is an error.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = positive)]
    pub nbest: usize,
    /// Sessions translating in parallel, sharing the model: at most 4 × the cores available,
    /// and all their arenas must fit in the memory available (checked before they are made).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = threads)]
    pub threads: usize,
    /// Texts decoded together in one session, every decoder step reading the weights once
    /// for all of them (CTranslate2's `max_batch_size`); each text's output is the one it gets
    /// alone. With N > 1 the inputs are read 8·N at a time, sorted by length and decoded in
    /// batches of up to N, and `--threads` sets the threads of that one session's products;
    /// with 1, `--threads` sessions translate one text each. Default: 32 (more gains little:
    /// bench/RESULTS.md), fewer when the texts given are fewer or when 32 sequences' arena
    /// would pass 1 GiB (the caches are planned for the model's longest texts: see `tessel
    /// plan --batch`). At most 256 texts; with `--batch-type tokens`, N counts source tokens
    /// (at most 1048576, and it must be given).
    #[arg(long, value_name = "N", value_parser = batch_size_or_tokens)]
    pub batch_size: Option<usize>,
    /// What --batch-size counts (CTranslate2's `batch_type`): `examples`, texts per batch, or
    /// `tokens`, source tokens per batch. With `tokens` the texts read are sorted by length
    /// and cut into batches whose text count times their longest text's tokens stays within
    /// --batch-size (a longer text is a batch of its own); the session is planned for as many
    /// texts as a batch can hold (one per token, at most 256), fewer when their arena would
    /// pass 1 GiB (each text's caches are planned for the longest source: --max-source-len
    /// makes room for more), a batch with more texts decoded in turns. Each text's output is
    /// still the one it gets alone, in input order.
    #[arg(long, value_name = "TYPE", value_enum, default_value_t = BatchType::Examples)]
    pub batch_type: BatchType,
    /// Cut texts longer than the model reads instead of refusing them.
    #[arg(long)]
    pub truncate: bool,
    /// Longest source to plan sessions for, in tokens (default: the model's, 16384 for LED);
    /// a smaller arena when the texts are known to be shorter.
    #[arg(long, value_name = "N", value_parser = positive)]
    pub max_source_len: Option<usize>,
    /// Source tokens given global attention, from the first, in a Longformer encoder (LED):
    /// they attend to and are attended by every position (default: 1, the first token, as
    /// LED's model cards use it; 0 for none). Other models ignore it.
    #[arg(long, value_name = "N")]
    pub global_tokens: Option<usize>,
    /// How the linear layers' weights are stored in memory (default: as the file stores them).
    #[arg(long, value_name = "TYPE", value_parser = weight_type_parser())]
    pub weights: Option<WeightType>,
    /// Exponent α of the length normalisation: a hypothesis scores its summed
    /// log-probabilities over length^α (default: the generation config's `length_penalty`,
    /// else 1; 0 ranks by the plain sum, larger values favour longer outputs).
    #[arg(long, value_name = "F", value_parser = finite, allow_negative_numbers = true)]
    pub length_penalty: Option<f32>,
    /// No EOS before the output has N positions, the decoder start token counted, as
    /// `transformers`' `min_length` counts them (default: the generation config's); at most
    /// the positions the maximum length allows (--max-length + 1).
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

/// The options of one run: the model's defaults with every flag given applied, checked
/// against each other and against the beam the model is planned for.
pub fn options(
    args: &TranslateArgs,
    translator: &Translator,
) -> Result<TranslateOptions, CliError> {
    let asked =
        args.sample || args.temperature.is_some() || args.top_k.is_some() || args.top_p.is_some();
    let sampling = !args.no_sample && (asked || translator.sampling_defaults().do_sample);
    let mut options: TranslateOptions = translator.search_defaults().clone();
    apply_search_flags(args, &mut options);
    let decode = &mut options.decode;
    if let Some(text) = &args.prefix {
        decode.prefix = translator.target_prefix(text)?;
    }
    if sampling {
        if args.beam.is_some_and(|b| b > 1) || args.nbest > 1 {
            return Err(CliError::BadOption(
                "sampling draws one hypothesis: --beam and --nbest must be 1",
            ));
        }
        let mut s = translator.sampling(args.seed.unwrap_or_else(tessel_pipeline::random_seed));
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
    options.truncate = args.truncate;
    check_options(args, &options, translator.model().config().max_beam)?;
    Ok(options)
}

/// `options` with the search and length flags given.
fn apply_search_flags(args: &TranslateArgs, options: &mut TranslateOptions) {
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
}

/// The flags checked against each other before the model loads.
pub fn check_flags(args: &TranslateArgs) -> Result<(), CliError> {
    match (args.batch_type, args.batch_size) {
        (BatchType::Examples, Some(n)) if n > MAX_BATCH_SIZE => {
            return Err(CliError::Invalid(format!(
                "--batch-size {n} is more than {MAX_BATCH_SIZE} texts (--batch-type tokens \
                 counts tokens instead)"
            )));
        }
        (BatchType::Tokens, None) => return Err(CliError::BadOption(TOKENS_NEED_A_SIZE)),
        _ => {}
    }
    if let Some(beam) = args.beam {
        checks::nbest_within_beam(args.nbest, beam, "--beam")?;
    }
    if let (Some(min), Some(max)) = (args.min_length, args.max_length) {
        checks::min_within_max(min, max + 1, &format!("--max-length {max}"))?;
    }
    Ok(())
}

/// The refusal of `--batch-type tokens` without `--batch-size`.
const TOKENS_NEED_A_SIZE: &str =
    "--batch-type tokens needs --batch-size N, the most source tokens a batch holds";

/// The slots of the batched session of `--batch-type tokens` with batches of up to `budget`
/// tokens over `texts` texts (0: not known): as many texts as a batch can hold (one per
/// token; at most [`MAX_BATCH_SIZE`] and the texts), halved while the session's arena (every
/// slot planned for the longest source) would pass [`DEFAULT_BATCH_ARENA`], as the default
/// `--batch-size` is ([`Translator::default_batch`]); at least 1.
pub fn token_slots(
    translator: &Translator,
    threads: usize,
    budget: usize,
    texts: usize,
) -> Result<usize, CliError> {
    let bytes = |slots| translator.batch_bytes(threads, slots);
    Ok(slots_within(budget, texts, DEFAULT_BATCH_ARENA, bytes)?)
}

/// [`token_slots`] with the arena's `bytes` for a slot count, kept within `arena` bytes.
fn slots_within<E>(
    budget: usize,
    texts: usize,
    arena: usize,
    bytes: impl Fn(usize) -> Result<usize, E>,
) -> Result<usize, E> {
    let mut slots = budget.min(MAX_BATCH_SIZE);
    if texts > 0 {
        slots = slots.min(texts);
    }
    while slots > 1 && bytes(slots)? > arena {
        slots /= 2;
    }
    Ok(slots.max(1))
}

/// The merged options checked where a flag meets a generation config's default.
fn check_options(
    args: &TranslateArgs,
    options: &TranslateOptions,
    planned_beam: usize,
) -> Result<(), CliError> {
    let decode = &options.decode;
    let beam = decode.search.beam;
    let from = if args.beam.is_some() {
        "--beam"
    } else {
        "the generation config's num_beams"
    };
    checks::nbest_within_beam(args.nbest, beam, from)?;
    if beam > planned_beam {
        return Err(CliError::Invalid(format!(
            "the beam width {beam} ({from}) is more than the {planned_beam} the model is \
             planned for: give --beam {beam}"
        )));
    }
    if args.min_length.is_some() || args.max_length.is_some() {
        let (positions, from) = match decode.max_new_tokens {
            Some(n) => (n.saturating_add(1), format!("--max-length {n}")),
            None => (
                decode.max_length,
                format!("the generation config's max_length {}", decode.max_length),
            ),
        };
        checks::min_within_max(decode.min_length, positions, &from)?;
    }
    Ok(())
}

/// The flags checked, the model directory of `command` loaded and the options of the run
/// merged from its defaults and the flags.
pub fn load(
    args: &TranslateArgs,
    command: &'static str,
) -> Result<(Translator, TranslateOptions), CliError> {
    check_flags(args)?;
    let directory = checks::model_kind(&args.model, command, Needs::Text)?;
    let settings = LoadSettings {
        // Without --beam the generation config decides (a wider one than --beam allows is
        // refused once the options are merged).
        max_beam: args
            .beam
            .unwrap_or(directory.generation().options.search.beam.min(MAX_BEAM))
            .max(args.nbest),
        weights: args.weights,
        ..LoadSettings::default()
    };
    let mut translator = Translator::new(
        ModelDir::from_directory(directory, settings)?,
        args.src_lang.as_deref(),
        args.tgt_lang.as_deref(),
    )?;
    if let Some(n) = args.max_source_len {
        translator = translator.with_max_source_len(n);
    }
    if let Some(n) = args.global_tokens {
        translator = translator.with_global_tokens(n);
    }
    let options = options(args, &translator)?;
    Ok((translator, options))
}

/// Runs `tessel translate`: texts from `args` or `input`, one output line each to `out`,
/// each written (and flushed) as soon as it and every line before it are done.
pub fn translate(
    args: &TranslateArgs,
    input: &mut (dyn BufRead + Send),
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let isa = tessel_model::isa_env::isa_from_env()?;
    let (translator, options) = load(args, "translate")?;
    if args.batch_type == BatchType::Tokens {
        let budget = args
            .batch_size
            .ok_or(CliError::BadOption(TOKENS_NEED_A_SIZE))?;
        let slots = token_slots(&translator, args.threads, budget, args.text.len())?;
        checks::fits_in_memory(translator.batch_bytes(args.threads, slots)?, 1)?;
        let batch = translator.batch(isa, args.threads, slots)?;
        let sessions = vec![stream::TokenBatches::new(batch, budget)];
        let report = stream::run(sessions, &options, &args.text, input, args.nbest, out)?;
        return failed_lines(report);
    }
    let batch_size = match args.batch_size {
        Some(n) => n,
        None => translator.default_batch(args.threads, args.text.len())?,
    };
    let report = if batch_size > 1 {
        let bytes = translator.batch_bytes(args.threads, batch_size)?;
        checks::fits_in_memory(bytes, 1)?;
        let batch = translator.batch(isa, args.threads, batch_size)?;
        stream::run(vec![batch], &options, &args.text, input, args.nbest, out)?
    } else {
        let sessions = if args.text.is_empty() {
            args.threads
        } else {
            args.threads.min(args.text.len())
        };
        checks::fits_in_memory(translator.session_bytes(1)?, sessions)?;
        let sessions = (0..sessions)
            .map(|_| translator.session(isa, 1))
            .collect::<Result<Vec<_>, _>>()?;
        stream::run(sessions, &options, &args.text, input, args.nbest, out)?
    };
    failed_lines(report)
}

/// A run's end: an error when some lines failed.
fn failed_lines(report: stream::Report) -> Result<(), CliError> {
    match report.failed {
        0 => Ok(()),
        failed => Err(CliError::LinesFailed {
            failed,
            total: report.lines,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::slots_within;

    #[test]
    fn token_slots_hold_a_batch_and_keep_the_arena_bounded() {
        let bytes = |n: usize| Ok::<_, ()>(100 + 10 * n);
        // One slot per token, at most 256 and the texts.
        assert_eq!(slots_within(24, 0, usize::MAX, bytes), Ok(24));
        assert_eq!(slots_within(4096, 0, usize::MAX, bytes), Ok(256));
        assert_eq!(slots_within(4096, 7, usize::MAX, bytes), Ok(7));
        assert_eq!(slots_within(1, 7, usize::MAX, bytes), Ok(1));
        // Halved while the arena passes its bound, at least 1.
        assert_eq!(slots_within(4096, 0, 1000, bytes), Ok(64));
        assert_eq!(slots_within(4096, 0, 10, bytes), Ok(1));
        assert_eq!(slots_within(8, 0, 10, |_| Err::<usize, _>("no")), Err("no"));
    }
}
