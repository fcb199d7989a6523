//! `ct2_peer`: runs one CTranslate2 model directory through tessel, for the side-by-side
//! comparison of `bench/peers/run.sh`.
//!
//! `ct2_peer MODEL_DIR --src 5,17,3,... --steps N [--beam N] [--runs N] [--threads N]
//! [--weights f32|f16|bf16|bf16-dot] [--stream-read] [--serve]` loads the directory with
//! `tessel_model::load::ct2` (any family it supports; the decoder start token is the one of the
//! directory's `config.json`), then encodes the source and searches exactly `--steps` tokens
//! (EOS treated as an ordinary token) `--runs` times after one warm-up run, then the same with
//! a single step, and prints one JSON line:
//! `{"tokens": [...], "median_ms": x, "min_ms": x, "one_step_ms": x, "runs": n, "isa": "...",
//! "step_bytes": n}`, the times covering encode + search (`one_step_ms`: encode + one step, so
//! `(median_ms - one_step_ms) / (steps - 1)` is the time of one decode step, computed the same
//! way for CTranslate2). `step_bytes` is the weight bytes one decode step reads; with
//! `--stream-read` the line also has `stream_ms`, the median time to merely read that many
//! bytes once on one thread (the `e2e` suite's `stream-read` record). `TESSEL_ISA` forces an
//! ISA level.
//!
//! With `--serve` the model is loaded once (planned for beams up to `--beam`) and every line
//! read from stdin is a request of the same form without the directory and `--src`
//! (`--beam 4 --threads 2 --runs 1 [--stream-read]`), answered by one JSON line; a session per
//! (beam, threads) is kept, warmed up once when first made. Large models (NLLB-600M takes
//! tens of seconds to load) are so measured run by run, interleaved with CTranslate2, without
//! reloading.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tessel_bench::suites::e2e::stream_record;
use tessel_bench::Budget;
use tessel_kernels::Isa;
use tessel_model::isa_env::isa_from_env;
use tessel_model::load::ct2::{self, Ct2Options};
use tessel_model::{Limits, Model, SearchOptions, Session, WeightType};

/// What one measurement asks for.
#[derive(Clone, Copy)]
struct Request {
    steps: usize,
    beam: usize,
    runs: usize,
    threads: usize,
    stream_read: bool,
}

struct Args {
    dir: PathBuf,
    src: Vec<u32>,
    weights: WeightType,
    serve: bool,
    request: Request,
}

/// Applies the flags of `words` to `request` (and, when given, to the other settings).
fn parse_flags(
    words: &mut dyn Iterator<Item = String>,
    request: &mut Request,
    mut rest: Option<(&mut Vec<u32>, &mut WeightType, &mut bool)>,
) -> Result<(), String> {
    while let Some(flag) = words.next() {
        match (flag.as_str(), rest.as_mut()) {
            ("--stream-read", _) => {
                request.stream_read = true;
                continue;
            }
            ("--serve", Some((_, _, serve))) => {
                **serve = true;
                continue;
            }
            _ => {}
        }
        let value = words.next().ok_or(format!("{flag} needs a value"))?;
        let number = |v: &str| {
            v.parse::<usize>()
                .map_err(|_| format!("{flag}: `{v}` is not a number"))
        };
        match (flag.as_str(), rest.as_mut()) {
            ("--steps", _) => request.steps = number(&value)?,
            ("--beam", _) => request.beam = number(&value)?,
            ("--runs", _) => request.runs = number(&value)?.max(1),
            ("--threads", _) => request.threads = number(&value)?,
            ("--src", Some((src, _, _))) => {
                **src = value
                    .split(',')
                    .map(|v| {
                        v.parse::<u32>()
                            .map_err(|_| format!("--src: `{v}` is not an id"))
                    })
                    .collect::<Result<_, _>>()?
            }
            ("--weights", Some((_, weights, _))) => {
                **weights = value.parse().map_err(|e| format!("{e}"))?
            }
            (other, _) => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(())
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let dir = PathBuf::from(
        it.next()
            .ok_or("usage: ct2_peer MODEL_DIR --src IDS --steps N [--beam N] [--runs N]")?,
    );
    let mut request = Request {
        steps: 32,
        beam: 1,
        runs: 5,
        threads: 1,
        stream_read: false,
    };
    let (mut src, mut weights, mut serve) = (Vec::new(), WeightType::F32, false);
    parse_flags(
        &mut it,
        &mut request,
        Some((&mut src, &mut weights, &mut serve)),
    )?;
    Ok(Args {
        dir,
        src,
        weights,
        serve,
        request,
    })
}

/// Sorted times (ms) of `runs` encode + search runs of `src`, and the best hypothesis' tokens.
fn time_runs(
    session: &mut Session<&Model>,
    src: &[u32],
    search: &SearchOptions,
    runs: usize,
) -> Result<(Vec<f64>, Vec<u32>), String> {
    let mut times = Vec::with_capacity(runs);
    let mut tokens = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        session.encode(src).map_err(|e| e.to_string())?;
        let hyps = session
            .generate(tessel_model::Request::new(*search))
            .map_err(|e| e.to_string())?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
        tokens = hyps.best().map(|h| h.tokens.to_vec()).unwrap_or_default();
    }
    times.sort_by(f64::total_cmp);
    Ok((times, tokens))
}

/// The search of `steps` tokens (EOS an ordinary token) with `beam` hypotheses.
fn search(steps: usize, beam: usize) -> SearchOptions {
    SearchOptions {
        beam,
        max_steps: steps,
        length_penalty: 1.0,
        stop_at_eos: false,
        sampling: None,
    }
}

/// A session for `request`, warmed up by one run of each search [`measure`] times.
fn warm_session<'m>(
    model: &'m Model<'static>,
    isa: Isa,
    src: &[u32],
    request: Request,
) -> Result<Session<&'m Model<'static>>, String> {
    let limits = Limits::of(model.config()).with_threads(request.threads);
    let mut session = Session::with_limits(model, isa, limits).map_err(|e| e.to_string())?;
    time_runs(&mut session, src, &search(request.steps, request.beam), 1)?;
    time_runs(&mut session, src, &search(1, request.beam), 1)?;
    Ok(session)
}

/// The JSON answer to `request` on a warm `session` (see the module doc).
fn measure(
    session: &mut Session<&Model>,
    isa: Isa,
    src: &[u32],
    request: Request,
) -> Result<serde_json::Value, String> {
    let full = search(request.steps, request.beam);
    let (times, tokens) = time_runs(session, src, &full, request.runs)?;
    let one_step = search(1, request.beam);
    let (one_step_times, _) = time_runs(session, src, &one_step, request.runs)?;
    let step_bytes = session.model().decode_step_weight_bytes();
    let mut json = serde_json::json!({
        "tokens": tokens,
        "median_ms": times[times.len() / 2],
        "min_ms": times[0],
        "one_step_ms": one_step_times[one_step_times.len() / 2],
        "runs": times.len(),
        "isa": format!("{:?}", isa.level()),
        "step_bytes": step_bytes,
    });
    if request.stream_read {
        let budget = Budget {
            min_samples: 5,
            time: Duration::from_millis(300),
        };
        let stream = stream_record(budget, isa, step_bytes, "stream-read-step-weights")
            .ok_or("no memory for the stream-read buffer")?;
        json["stream_ms"] = serde_json::json!(stream.median_ns / 1e6);
    }
    Ok(json)
}

/// Answers the requests on stdin, one JSON line each, until stdin ends.
fn serve(model: &Model<'static>, isa: Isa, src: &[u32], defaults: Request) -> Result<(), String> {
    let mut sessions: Vec<((usize, usize), Session<&Model<'static>>)> = Vec::new();
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        let mut request = Request {
            stream_read: false,
            ..defaults
        };
        parse_flags(
            &mut line.split_whitespace().map(str::to_owned),
            &mut request,
            None,
        )?;
        if request.beam > defaults.beam || request.steps != defaults.steps {
            return Err(format!(
                "`{line}`: the model is planned for beams up to {} and {} steps",
                defaults.beam, defaults.steps
            ));
        }
        let key = (request.beam, request.threads);
        let index = match sessions.iter().position(|(k, _)| *k == key) {
            Some(index) => index,
            None => {
                sessions.push((key, warm_session(model, isa, src, request)?));
                sessions.len() - 1
            }
        };
        let json = measure(&mut sessions[index].1, isa, src, request)?;
        writeln!(out, "{json}")
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn run(args: Args) -> Result<(), String> {
    let isa = isa_from_env().map_err(|e| e.to_string())?;
    let request = args.request;
    let options = Ct2Options {
        max_src_len: args.src.len().max(1),
        max_tgt_len: request.steps + 1,
        max_beam: request.beam.max(1),
        weights: Some(args.weights),
    };
    let loaded = ct2::load_dir(&args.dir, options).map_err(|e| e.to_string())?;
    if args.serve {
        return serve(&loaded.model, isa, &args.src, request);
    }
    let mut session = warm_session(&loaded.model, isa, &args.src, request)?;
    let json = measure(&mut session, isa, &args.src, request)?;
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
