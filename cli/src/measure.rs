//! `tessel run` and `tessel bench`: encode a deterministic source and search, a number of
//! times after one warm-up, and report times, memory and the heap allocations counted meanwhile.
//!
//! Times are wall-clock per run: the encode, every decoder step (from the end of the previous
//! step, or of the encode, to the step callback), and encode + search. The per-token figures
//! are the median and the 99th percentile (nearest rank) over every step of every measured
//! run.

use std::io::Write;
use std::time::{Duration, Instant};

use tessel_model::isa_env::isa_from_env;
use tessel_model::{Limits, LoadSettings, Request, SearchOptions, Session, WeightType};

use crate::args::{defaults, BenchArgs, RunArgs};
use crate::counting;
use crate::error::CliError;
use crate::source::Source;

/// What to measure.
#[derive(Clone, Debug)]
pub struct Measure {
    /// The model.
    pub source: Source,
    /// Beam width.
    pub beam: usize,
    /// Source tokens.
    pub src_len: usize,
    /// Most decoder steps.
    pub steps: usize,
    /// Measured runs.
    pub runs: usize,
    /// Seed of random weights and source ids.
    pub seed: u64,
    /// GEMM threads.
    pub threads: usize,
    /// Linear weight storage, or `None` for the stored types.
    pub weights: Option<WeightType>,
    /// Whether search stops at EOS.
    pub stop_at_eos: bool,
}

impl Measure {
    /// `tessel run`: EOS honoured for a model directory, ignored for random weights unless
    /// the flags say otherwise.
    pub fn run(args: &RunArgs) -> Result<Measure, CliError> {
        let source = Source::of(&args.model)?;
        let stop_at_eos = if args.stop_at_eos || args.ignore_eos {
            args.stop_at_eos
        } else {
            !source.is_random()
        };
        Ok(Measure {
            beam: args.beam,
            src_len: args.src_len,
            steps: args.steps,
            runs: args.common.runs,
            seed: args.common.seed,
            threads: args.common.threads,
            weights: args.common.weights,
            stop_at_eos,
            source,
        })
    }

    /// `tessel bench`: Transformer-base, 32 -> 32 greedy, EOS ignored.
    pub fn bench(args: &BenchArgs) -> Measure {
        Measure {
            source: Source::transformer_base(),
            beam: 1,
            src_len: defaults::SRC_LEN,
            steps: defaults::STEPS,
            runs: args.common.runs,
            seed: args.common.seed,
            threads: args.common.threads,
            weights: args.common.weights,
            stop_at_eos: false,
        }
    }
}

/// The time at fraction `p` of `sorted` (nearest rank), in milliseconds.
fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1e3
}

/// Megabytes (10^6 bytes).
fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

/// `len` source ids from `seed`, spread over the vocabulary above the three special ids.
fn source_ids(len: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let span = vocab.saturating_sub(3).max(1) as u64;
    (0..len as u64)
        .map(|i| {
            let offset = i
                .wrapping_mul(7919)
                .wrapping_add(seed.wrapping_mul(104_729))
                % span;
            // `offset < span <= vocab`, which the config keeps within `u32`.
            u32::try_from(3 + offset).unwrap_or(u32::MAX)
        })
        .collect()
}

/// Runs the measurement and writes the report to `out`.
pub fn measure(m: &Measure, out: &mut dyn Write) -> Result<(), CliError> {
    let isa = isa_from_env()?;
    let load_start = Instant::now();
    let limits = LoadSettings {
        max_len: m.src_len.max(m.steps + 1),
        max_beam: m.beam,
        weights: None,
    };
    let built = m.source.build(m.weights, m.seed, limits)?;
    let load = load_start.elapsed();
    let model = &built.model;
    let config = model.config();
    let limits = Limits::of(config).with_threads(m.threads);
    let mut session = Session::with_limits(model, isa, limits)?;
    let src = source_ids(m.src_len, config.src_vocab, m.seed);
    let options = SearchOptions {
        beam: m.beam,
        max_steps: m.steps,
        length_penalty: 1.0,
        stop_at_eos: m.stop_at_eos,
        sampling: None,
        patience: 1.0,
    };
    let mut encode_times = Vec::with_capacity(m.runs);
    let mut step_times = Vec::with_capacity(m.runs * m.steps);
    let mut total_times = Vec::with_capacity(m.runs);
    let mut tokens: Vec<u32> = Vec::with_capacity(m.steps);
    let mut score = 0.0f32;
    // Warm-up run (page faults in the arena and weights), not measured.
    session.encode(&src)?;
    session.generate(Request::new(options))?;

    let (measured, allocations) = counting::count(|| -> Result<(), CliError> {
        for _ in 0..m.runs {
            let start = Instant::now();
            session.encode(&src)?;
            let encoded = Instant::now();
            encode_times.push(encoded - start);
            let mut last = encoded;
            let hyps = session.generate(Request::new(options).on_step(|_| {
                let now = Instant::now();
                step_times.push(now - last);
                last = now;
            }))?;
            total_times.push(start.elapsed());
            if let Some(best) = hyps.best() {
                tokens.clear();
                tokens.extend_from_slice(best.tokens);
                score = best.score;
            }
        }
        Ok(())
    });
    measured?;

    encode_times.sort();
    step_times.sort();
    total_times.sort();
    writeln!(out, "tessel: {}", built.what)?;
    writeln!(
        out,
        "  config        {}+{} layers, d_model {}, heads {}, d_ff {}, vocab {}/{}, {:?}-LN",
        config.encoder_layers,
        config.decoder_layers,
        config.d_model,
        config.heads,
        config.d_ff,
        config.src_vocab,
        config.tgt_vocab,
        config.norm
    )?;
    writeln!(out, "  isa           {}", isa.level())?;
    writeln!(out, "  threads       {} (GEMM column blocks)", m.threads)?;
    let stored = match m.weights {
        Some(t) => t.to_string(),
        None => format!(
            "as stored (output projection {})",
            model.generator().weight_type()
        ),
    };
    writeln!(
        out,
        "  weights       {:.1} MB, linear layers {stored} (decode step reads {:.1} MB), built in {:.0} ms",
        mb(model.weight_bytes()),
        mb(model.decode_step_weight_bytes()),
        load.as_secs_f64() * 1e3
    )?;
    writeln!(
        out,
        "  arena         {:.2} MB (max src {}, max tgt {}, max beam {})",
        mb(session.plan().total_bytes()),
        limits.max_src_len,
        limits.max_tgt_len,
        limits.max_beam
    )?;
    writeln!(
        out,
        "  search        beam {}, {} source tokens -> {} tokens ({}), {} runs",
        m.beam,
        src.len(),
        tokens.len(),
        if m.stop_at_eos {
            "stops at EOS"
        } else {
            "EOS ignored: full length"
        },
        m.runs
    )?;
    writeln!(
        out,
        "  encode        {:.2} ms (median)",
        percentile_ms(&encode_times, 0.5)
    )?;
    writeln!(
        out,
        "  per token     {:.2} ms median, {:.2} ms p99 ({} steps)",
        percentile_ms(&step_times, 0.5),
        percentile_ms(&step_times, 0.99),
        step_times.len()
    )?;
    writeln!(
        out,
        "  total         {:.1} ms median (encode + search)",
        percentile_ms(&total_times, 0.5)
    )?;
    writeln!(out, "  heap allocs   {allocations} during inference")?;
    let shown: Vec<String> = tokens.iter().take(16).map(u32::to_string).collect();
    writeln!(
        out,
        "  output        [{}{}] score {:.3}",
        shown.join(" "),
        if tokens.len() > 16 { " ..." } else { "" },
        score
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let times: Vec<Duration> = (1..=101).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&times, 0.5), 51.0);
        assert_eq!(percentile_ms(&times, 0.99), 100.0);
        assert_eq!(percentile_ms(&times, 1.0), 101.0);
        assert_eq!(percentile_ms(&[], 0.5), 0.0);
    }

    #[test]
    fn source_ids_avoid_the_special_ids_and_stay_in_the_vocabulary() {
        for vocab in [1, 3, 4, 5, 100, 32000] {
            let ids = source_ids(50, vocab, 42);
            assert_eq!(ids.len(), 50);
            assert!(ids.iter().all(|&t| t >= 3), "{ids:?}");
            if vocab > 3 {
                assert!(ids.iter().all(|&t| (t as usize) < vocab), "{ids:?}");
            }
        }
    }
}
