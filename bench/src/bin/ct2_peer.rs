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
//!
//! With `--lines FILE` (instead of `--src`) it decodes every line of `FILE` (comma-separated
//! source ids) with exactly `--steps` tokens, `--batch B` lines together in one
//! [`tessel_model::Batch`] (longest first, in chunks of `B`), and prints
//! `{"tokens": [[...], ...], "median_ms": x, "min_ms": x, "encode_ms": x, "runs": n,
//! "isa": "...", "batch": B, "beam": n, "threads": n}`: the time of the whole file (median of
//! `--runs` after a warm-up of one chunk of at most 16 lines), the part of it spent encoding, and each line's best
//! tokens in file order. `--serve` works the same way, requests adding `--batch B`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tessel_bench::suites::e2e::stream_record;
use tessel_bench::Budget;
use tessel_kernels::Isa;
use tessel_model::isa_env::isa_from_env;
use tessel_model::load::ct2::{self, Ct2Options};
use tessel_model::{Batch, Limits, Model, SearchOptions, Session, WeightType};

/// What one measurement asks for.
#[derive(Clone, Copy)]
struct Request {
    steps: usize,
    beam: usize,
    runs: usize,
    threads: usize,
    /// Lines decoded together (batch mode).
    batch: usize,
    stream_read: bool,
}

/// The settings given once, on the command line.
#[derive(Default)]
struct Startup {
    src: Vec<u32>,
    /// The file of source lines (batch mode).
    lines: Option<PathBuf>,
    weights: WeightType,
    serve: bool,
}

struct Args {
    dir: PathBuf,
    startup: Startup,
    request: Request,
}

/// Applies the flags of `words` to `request` (and, when given, to the startup settings).
fn parse_flags(
    words: &mut dyn Iterator<Item = String>,
    request: &mut Request,
    mut startup: Option<&mut Startup>,
) -> Result<(), String> {
    while let Some(flag) = words.next() {
        match (flag.as_str(), startup.as_mut()) {
            ("--stream-read", _) => {
                request.stream_read = true;
                continue;
            }
            ("--serve", Some(startup)) => {
                startup.serve = true;
                continue;
            }
            _ => {}
        }
        let value = words.next().ok_or(format!("{flag} needs a value"))?;
        let number = |v: &str| {
            v.parse::<usize>()
                .map_err(|_| format!("{flag}: `{v}` is not a number"))
        };
        match (flag.as_str(), startup.as_mut()) {
            ("--steps", _) => request.steps = number(&value)?,
            ("--beam", _) => request.beam = number(&value)?,
            ("--runs", _) => request.runs = number(&value)?.max(1),
            ("--threads", _) => request.threads = number(&value)?,
            ("--batch", _) => request.batch = number(&value)?.max(1),
            ("--src", Some(startup)) => startup.src = parse_ids(&value, "--src")?,
            ("--lines", Some(startup)) => startup.lines = Some(PathBuf::from(value)),
            ("--weights", Some(startup)) => {
                startup.weights = value.parse().map_err(|e| format!("{e}"))?
            }
            (other, _) => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(())
}

/// The comma-separated ids of `text`; `what` names it in the error.
fn parse_ids(text: &str, what: &str) -> Result<Vec<u32>, String> {
    text.trim()
        .split(',')
        .map(|v| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| format!("{what}: `{v}` is not an id"))
        })
        .collect()
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
        batch: 1,
        stream_read: false,
    };
    let mut startup = Startup::default();
    parse_flags(&mut it, &mut request, Some(&mut startup))?;
    Ok(Args {
        dir,
        startup,
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
        patience: 1.0,
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

/// Answers the requests on stdin (the flags of `defaults` a request may change) by `answer`,
/// one JSON line each, until stdin ends.
fn serve(
    defaults: Request,
    mut answer: impl FnMut(Request) -> Result<serde_json::Value, String>,
) -> Result<(), String> {
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
        let json = answer(request)?;
        writeln!(out, "{json}")
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Measures one source (`--src`): once, or per request with a session per (beam, threads).
fn run_one(
    model: &Model<'static>,
    isa: Isa,
    src: &[u32],
    request: Request,
    serving: bool,
) -> Result<(), String> {
    if !serving {
        let mut session = warm_session(model, isa, src, request)?;
        println!("{}", measure(&mut session, isa, src, request)?);
        return Ok(());
    }
    let mut sessions: Vec<((usize, usize), Session<&Model<'static>>)> = Vec::new();
    serve(request, |request| {
        let key = (request.beam, request.threads);
        let index = match sessions.iter().position(|(k, _)| *k == key) {
            Some(index) => index,
            None => {
                sessions.push((key, warm_session(model, isa, src, request)?));
                sessions.len() - 1
            }
        };
        measure(&mut sessions[index].1, isa, src, request)
    })
}

/// The source lines of `path`: comma-separated ids, one line each (blank lines skipped).
fn read_lines(path: &Path) -> Result<Vec<Vec<u32>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let lines: Vec<Vec<u32>> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| parse_ids(line, &format!("{} line {}", path.display(), n + 1)))
        .collect::<Result<_, _>>()?;
    if lines.is_empty() {
        return Err(format!("{}: no source lines", path.display()));
    }
    Ok(lines)
}

/// The indices of `lines`, longest first (equal lengths in file order).
fn longest_first(lines: &[Vec<u32>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..lines.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(lines[i].len()));
    order
}

/// What one decode of a file gives: each line's best tokens (file order), the time spent
/// encoding and the time in all.
struct FileRun {
    tokens: Vec<Vec<u32>>,
    encode: Duration,
    total: Duration,
}

/// Decodes the lines `order` names, `batch.slots()` at a time, with `search`.
fn decode_lines(
    batch: &mut Batch<&Model<'static>>,
    lines: &[Vec<u32>],
    order: &[usize],
    search: SearchOptions,
) -> Result<FileRun, String> {
    let mut tokens = vec![Vec::new(); lines.len()];
    let mut encode = Duration::ZERO;
    let start = Instant::now();
    for chunk in order.chunks(batch.slots()) {
        let encode_start = Instant::now();
        let sources: Vec<(usize, &[u32])> = chunk
            .iter()
            .enumerate()
            .map(|(slot, &line)| (slot, lines[line].as_slice()))
            .collect();
        batch.encode_all(&sources).map_err(|e| e.to_string())?;
        encode += encode_start.elapsed();
        let mut requests: Vec<_> = chunk
            .iter()
            .map(|_| tessel_model::Request::new(search))
            .collect();
        batch.generate(&mut requests).map_err(|e| e.to_string())?;
        for (slot, &line) in chunk.iter().enumerate() {
            let hyps = batch.hypotheses(slot).map_err(|e| e.to_string())?;
            tokens[line] = hyps.best().map(|h| h.tokens.to_vec()).unwrap_or_default();
        }
    }
    Ok(FileRun {
        tokens,
        encode,
        total: start.elapsed(),
    })
}

/// Lines a warm-up decodes at the most (one chunk, capped to keep large batches' warm-up short).
const WARM_UP_LINES: usize = 16;

/// A batch of `request.batch` slots for `request`, warmed up by decoding one chunk.
fn warm_batch<'m>(
    model: &'m Model<'static>,
    isa: Isa,
    lines: &[Vec<u32>],
    order: &[usize],
    request: Request,
) -> Result<Batch<&'m Model<'static>>, String> {
    let limits = Limits::of(model.config())
        .with_threads(request.threads)
        .with_batch(request.batch)
        .with_encode_rows(tessel_model::ENCODE_ROWS);
    let mut batch = Batch::new(model, isa, limits).map_err(|e| e.to_string())?;
    let chunk = &order[..request.batch.min(WARM_UP_LINES).min(order.len())];
    decode_lines(
        &mut batch,
        lines,
        chunk,
        search(request.steps, request.beam),
    )?;
    Ok(batch)
}

/// The JSON answer (batch mode, see the module doc) to `request` on a warm `batch`.
fn measure_lines(
    batch: &mut Batch<&Model<'static>>,
    lines: &[Vec<u32>],
    order: &[usize],
    request: Request,
) -> Result<serde_json::Value, String> {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (mut totals, mut encodes, mut tokens) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..request.runs {
        let run = decode_lines(batch, lines, order, search(request.steps, request.beam))?;
        totals.push(ms(run.total));
        encodes.push(ms(run.encode));
        tokens = run.tokens;
    }
    totals.sort_by(f64::total_cmp);
    encodes.sort_by(f64::total_cmp);
    Ok(serde_json::json!({
        "tokens": tokens,
        "median_ms": totals[totals.len() / 2],
        "min_ms": totals[0],
        "encode_ms": encodes[encodes.len() / 2],
        "runs": totals.len(),
        "isa": format!("{:?}", batch.isa().level()),
        "batch": request.batch,
        "beam": request.beam,
        "threads": request.threads,
    }))
}

/// Measures a file of lines (`--lines`): once, or per request with a batch per
/// (batch size, beam, threads).
fn run_lines(
    model: &Model<'static>,
    isa: Isa,
    lines: &[Vec<u32>],
    request: Request,
    serving: bool,
) -> Result<(), String> {
    let order = longest_first(lines);
    if !serving {
        let mut batch = warm_batch(model, isa, lines, &order, request)?;
        println!("{}", measure_lines(&mut batch, lines, &order, request)?);
        return Ok(());
    }
    type Key = (usize, usize, usize);
    let mut batches: Vec<(Key, Batch<&Model<'static>>)> = Vec::new();
    serve(request, |request| {
        let key = (request.batch, request.beam, request.threads);
        let index = match batches.iter().position(|(k, _)| *k == key) {
            Some(index) => index,
            None => {
                batches.push((key, warm_batch(model, isa, lines, &order, request)?));
                batches.len() - 1
            }
        };
        measure_lines(&mut batches[index].1, lines, &order, request)
    })
}

fn run(args: Args) -> Result<(), String> {
    let isa = isa_from_env().map_err(|e| e.to_string())?;
    let Args {
        dir,
        startup,
        request,
    } = args;
    let lines = startup.lines.as_deref().map(read_lines).transpose()?;
    let longest = match &lines {
        Some(lines) => lines.iter().map(Vec::len).max().unwrap_or(0),
        None => startup.src.len(),
    };
    let options = Ct2Options {
        max_src_len: longest.max(1),
        max_tgt_len: request.steps + 1,
        max_beam: request.beam.max(1),
        weights: Some(startup.weights),
    };
    let loaded = ct2::load_dir(&dir, options).map_err(|e| e.to_string())?;
    match lines {
        Some(lines) => run_lines(&loaded.model, isa, &lines, request, startup.serve),
        None => run_one(&loaded.model, isa, &startup.src, request, startup.serve),
    }
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
