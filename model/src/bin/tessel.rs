//! `tessel`: runs an encoder-decoder and reports latency, memory and heap allocations.
//!
//! With no arguments: a Transformer-base shaped model (6+6 layers, d_model 512, 8 heads,
//! d_ff 2048, vocabulary 32000) with seeded random weights encodes a 32-token source and
//! greedy-decodes 32 tokens. EOS is ignored by default for random weights so every run decodes
//! the full number of steps (`--stop-at-eos` to honour it); with `--model` EOS is honoured
//! unless `--ignore-eos` is given. A `--model` directory holding a CTranslate2 `model.bin` is
//! loaded through `tessel_model::ct2`.
//!
//! Options: `--model DIR` (config.json + model.safetensors), `--beam N`, `--src-len N`,
//! `--steps N`, `--runs N`, `--seed N`, `--threads N` (the GEMMs split their columns over N
//! threads, the calling one included; results are bit-identical), `--weights f32|f16|bf16|bf16-dot`
//! (how the linear layers' weights are stored; activations stay `f32` except inside `bf16-dot`
//! products), `--plan` (print the arena regions).
//! `TESSEL_ISA` forces an ISA level.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tessel_model::isa_env::isa_from_env;
use tessel_model::{Config, LoadOptions, Model, SearchOptions, Session, WeightType};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

struct Args {
    model: Option<PathBuf>,
    beam: usize,
    src_len: usize,
    steps: usize,
    runs: usize,
    seed: u64,
    threads: usize,
    weights: WeightType,
    plan: bool,
    stop_at_eos: Option<bool>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        model: None,
        beam: 1,
        src_len: 32,
        steps: 32,
        runs: 5,
        seed: 42,
        threads: 1,
        weights: WeightType::F32,
        plan: false,
        stop_at_eos: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let number = |text: String, name: &str| -> Result<usize, String> {
            text.parse()
                .map_err(|_| format!("{name}: `{text}` is not a number"))
        };
        match flag.as_str() {
            "--model" => args.model = Some(PathBuf::from(value("--model")?)),
            "--beam" => args.beam = number(value("--beam")?, "--beam")?,
            "--src-len" => args.src_len = number(value("--src-len")?, "--src-len")?,
            "--steps" => args.steps = number(value("--steps")?, "--steps")?,
            "--runs" => args.runs = number(value("--runs")?, "--runs")?.max(1),
            "--seed" => args.seed = number(value("--seed")?, "--seed")? as u64,
            "--threads" => args.threads = number(value("--threads")?, "--threads")?,
            "--weights" => {
                args.weights = value("--weights")?.parse().map_err(|e| format!("{e}"))?
            }
            "--plan" => args.plan = true,
            "--ignore-eos" => args.stop_at_eos = Some(false),
            "--stop-at-eos" => args.stop_at_eos = Some(true),
            "-h" | "--help" => {
                return Err("usage: tessel [--model DIR] [--beam N] [--src-len N] [--steps N] \
                            [--runs N] [--seed N] [--threads N] [--weights f32|f16|bf16|bf16-dot] [--plan] [--ignore-eos|--stop-at-eos]"
                    .to_owned())
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    Ok(args)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1e3
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

fn run(args: Args) -> Result<(), String> {
    let isa = isa_from_env().map_err(|e| e.to_string())?;
    let load_start = Instant::now();
    let load_options = LoadOptions::weights(args.weights);
    let (model, what) = match &args.model {
        Some(dir) if tessel_model::ct2::is_ct2_dir(dir) => {
            let options = tessel_model::ct2::Ct2Options {
                max_src_len: args.src_len.max(1),
                max_tgt_len: args.steps + 1,
                max_beam: args.beam.max(1),
                weights: Some(args.weights),
            };
            let loaded = tessel_model::ct2::load_dir(dir, options).map_err(|e| e.to_string())?;
            (loaded.model, format!("{} (CTranslate2)", dir.display()))
        }
        Some(dir) => (
            Model::load_dir_with(dir, &load_options).map_err(|e| e.to_string())?,
            dir.display().to_string(),
        ),
        None => (
            Model::random_with(Config::transformer_base(), args.seed, &load_options)
                .map_err(|e| e.to_string())?,
            format!(
                "transformer-base, seeded random weights (seed {})",
                args.seed
            ),
        ),
    };
    let load = load_start.elapsed();
    let config = model.config().clone();
    let stop_at_eos = args.stop_at_eos.unwrap_or(args.model.is_some());
    let limits = tessel_model::Limits::of(&config).with_threads(args.threads);
    let mut session = Session::with_limits(&model, isa, limits).map_err(|e| e.to_string())?;
    // A deterministic source avoiding the special ids.
    let span = config.src_vocab.saturating_sub(3).max(1) as u64;
    let src: Vec<u32> = (0..args.src_len as u64)
        .map(|i| (3 + (i * 7919 + args.seed * 104_729) % span) as u32)
        .collect();
    let options = SearchOptions {
        beam: args.beam,
        max_steps: args.steps,
        length_penalty: 1.0,
        stop_at_eos,
    };
    let mut encode_times = Vec::with_capacity(args.runs);
    let mut step_times = Vec::with_capacity(args.runs * args.steps);
    let mut total_times = Vec::with_capacity(args.runs);
    let mut tokens: Vec<u32> = Vec::with_capacity(args.steps);
    let mut score = 0.0f32;
    // Warm-up run (page faults in the arena and weights), not measured.
    session.encode(&src).map_err(|e| e.to_string())?;
    session
        .generate(&options, |_| {})
        .map_err(|e| e.to_string())?;

    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..args.runs {
        let start = Instant::now();
        session.encode(&src).map_err(|e| e.to_string())?;
        let encoded = Instant::now();
        encode_times.push(encoded - start);
        let mut last = encoded;
        let hyps = session
            .generate(&options, |_| {
                let now = Instant::now();
                step_times.push(now - last);
                last = now;
            })
            .map_err(|e| e.to_string())?;
        total_times.push(start.elapsed());
        if let Some(best) = hyps.best() {
            tokens.clear();
            tokens.extend_from_slice(best.tokens);
            score = best.score;
        }
    }
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;

    encode_times.sort();
    step_times.sort();
    total_times.sort();
    println!("tessel: {what}");
    println!(
        "  config        {}+{} layers, d_model {}, heads {}, d_ff {}, vocab {}/{}, {:?}-LN",
        config.encoder_layers,
        config.decoder_layers,
        config.d_model,
        config.heads,
        config.d_ff,
        config.src_vocab,
        config.tgt_vocab,
        config.norm
    );
    println!("  isa           {}", isa.level());
    println!("  threads       {} (GEMM column blocks)", args.threads);
    println!(
        "  weights       {:.1} MB, linear layers {} (decode step reads {:.1} MB), built in {:.0} ms",
        mb(model.weight_bytes()),
        args.weights,
        mb(model.decode_step_weight_bytes()),
        load.as_secs_f64() * 1e3
    );
    println!(
        "  arena         {:.2} MB (max src {}, max tgt {}, max beam {})",
        mb(session.plan().total_bytes()),
        config.max_src_len,
        config.max_tgt_len,
        config.max_beam
    );
    if args.plan {
        for r in session.plan().regions() {
            println!(
                "    {:<28} offset {:>12} B  size {:>12} B",
                r.name, r.offset_bytes, r.bytes
            );
        }
    }
    println!(
        "  search        beam {}, {} source tokens -> {} tokens ({}), {} runs",
        args.beam,
        src.len(),
        tokens.len(),
        if stop_at_eos {
            "stops at EOS"
        } else {
            "EOS ignored: full length"
        },
        args.runs
    );
    println!(
        "  encode        {:.2} ms (median)",
        percentile(&encode_times, 0.5)
    );
    println!(
        "  per token     {:.2} ms median, {:.2} ms p99 ({} steps)",
        percentile(&step_times, 0.5),
        percentile(&step_times, 0.99),
        step_times.len()
    );
    println!(
        "  total         {:.1} ms median (encode + search)",
        percentile(&total_times, 0.5)
    );
    println!("  heap allocs   {allocations} during inference");
    let shown: Vec<String> = tokens.iter().take(16).map(u32::to_string).collect();
    println!(
        "  output        [{}{}] score {:.3}",
        shown.join(" "),
        if tokens.len() > 16 { " ..." } else { "" },
        score
    );
    Ok(())
}

fn main() -> ExitCode {
    match parse_args().and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("tessel: {message}");
            ExitCode::FAILURE
        }
    }
}
