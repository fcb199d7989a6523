//! `ct2_peer`: runs one CTranslate2 model directory through tessel, for the side-by-side
//! comparison of `bench/peers/run.sh`.
//!
//! `ct2_peer MODEL_DIR --src 5,17,3,... --steps N [--beam N] [--runs N] [--threads N]
//! [--weights f32|f16|bf16|bf16-dot]` loads
//! the directory with `tessel_model::ct2`, then encodes the source and searches exactly
//! `--steps` tokens (EOS treated as an ordinary token) `--runs` times after one warm-up run,
//! and prints one JSON line: `{"tokens": [...], "median_ms": x, "min_ms": x, "runs": n, "isa": "..."}`, the time
//! covering encode + search. `TESSEL_ISA` forces an ISA level.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use tessel_model::ct2::{self, Ct2Options};
use tessel_model::isa_env::isa_from_env;
use tessel_model::{Limits, SearchOptions, Session, WeightType};

struct Args {
    dir: PathBuf,
    src: Vec<u32>,
    steps: usize,
    beam: usize,
    runs: usize,
    threads: usize,
    weights: WeightType,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let dir = PathBuf::from(
        it.next()
            .ok_or("usage: ct2_peer MODEL_DIR --src IDS --steps N [--beam N] [--runs N]")?,
    );
    let (mut src, mut steps, mut beam, mut runs, mut threads) = (Vec::new(), 32, 1, 5, 1);
    let mut weights = WeightType::F32;
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let number = |v: &str| {
            v.parse::<usize>()
                .map_err(|_| format!("{flag}: `{v}` is not a number"))
        };
        match flag.as_str() {
            "--src" => {
                src = value
                    .split(',')
                    .map(|v| {
                        v.parse::<u32>()
                            .map_err(|_| format!("--src: `{v}` is not an id"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--steps" => steps = number(&value)?,
            "--beam" => beam = number(&value)?,
            "--runs" => runs = number(&value)?.max(1),
            "--threads" => threads = number(&value)?,
            "--weights" => weights = value.parse().map_err(|e| format!("{e}"))?,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Args {
        dir,
        src,
        steps,
        beam,
        runs,
        threads,
        weights,
    })
}

fn run(args: Args) -> Result<(), String> {
    let isa = isa_from_env().map_err(|e| e.to_string())?;
    let options = Ct2Options {
        max_src_len: args.src.len().max(1),
        max_tgt_len: args.steps + 1,
        max_beam: args.beam.max(1),
        weights: Some(args.weights),
    };
    let loaded = ct2::load_dir(&args.dir, options).map_err(|e| e.to_string())?;
    let limits = Limits::of(loaded.model.config()).with_threads(args.threads);
    let mut session =
        Session::with_limits(&loaded.model, isa, limits).map_err(|e| e.to_string())?;
    let search = SearchOptions {
        beam: args.beam,
        max_steps: args.steps,
        length_penalty: 1.0,
        stop_at_eos: false,
        sampling: None,
    };
    let mut times = Vec::with_capacity(args.runs);
    let mut tokens = Vec::new();
    for run in 0..=args.runs {
        let start = Instant::now();
        session.encode(&args.src).map_err(|e| e.to_string())?;
        let hyps = session
            .generate(&search, |_| {})
            .map_err(|e| e.to_string())?;
        let elapsed = start.elapsed().as_secs_f64() * 1e3;
        if run > 0 {
            times.push(elapsed);
        }
        tokens = hyps.best().map(|h| h.tokens.to_vec()).unwrap_or_default();
    }
    times.sort_by(f64::total_cmp);
    let json = serde_json::json!({
        "tokens": tokens,
        "median_ms": times[times.len() / 2],
        "min_ms": times[0],
        "runs": times.len(),
        "isa": format!("{:?}", isa.level()),
    });
    println!("{json}");
    Ok(())
}

fn main() -> ExitCode {
    match parse_args().and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("ct2_peer: {message}");
            ExitCode::FAILURE
        }
    }
}
