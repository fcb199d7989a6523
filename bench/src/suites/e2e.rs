//! The `e2e` suite: Transformer-base (6+6, d_model 512, 8 heads, d_ff 2048, vocabulary 32000,
//! seeded random weights) on a 32-token source, batch 1, on one thread and then on two (the
//! GEMMs' columns split over the session's thread pool; the `threads` field says which).
//!
//! Cases: `encode-src32`; `stream-read-step-weights` (summing a buffer of exactly the bytes one
//! decode step reads: the memory-bound floor of a step); `decode-step` (median step of a 32-step
//! greedy decode, compared with that streaming floor: ratio = stream time / step time, 1 is the
//! floor; the two are timed in alternate rounds, each reported as the median of its rounds'
//! medians, so load from other processes falls on both alike); `greedy-32x32` and
//! `beam4-32x32` (encode + 32 decoded tokens, EOS ignored so every run does the full work).
//! Then, on one thread, `decode-step` with the linear layers' weights stored as f32, f16, bf16,
//! bf16-dot and int8 (impl `tessel-<type>`), measured round-robin in the same run, each against
//! the f32 step (ratio = f32 step time / this step time); the int8 step once more against
//! streaming its own bytes (`stream-read-step-weights-int8`, impl `tessel-int8`, ratio = stream
//! time / step time; the stream timed in the same rounds, right after the int8 step); and
//! `encode-src128` (a 128-token source) with f32 and int8 weights, also round-robin, int8
//! against f32.

use std::time::{Duration, Instant};

use pulp::Simd;
use tessel_kernels::Isa;

use super::Suite;
use crate::{median_ns, Budget, Record, Work};
use tessel_model::aligned::AlignedBuf;
use tessel_model::isa_env::isa_from_env;
use tessel_model::{
    Config, Limits, LoadOptions, Model, Request, SearchOptions, Session, WeightType,
};

/// The `e2e` suite.
pub const SUITE: Suite = Suite {
    name: "e2e",
    about:
        "Transformer-base encode, decode step vs streaming its weights, greedy and beam-4 32->32",
    run,
};

const SRC_LEN: usize = 32;
const STEPS: usize = 32;

/// Sum of `values` at `isa`'s full vector width with four independent accumulators, so it
/// runs at memory speed: the floor of anything that reads these bytes once.
fn stream_sum(isa: Isa, values: &[f32]) -> f32 {
    struct Sum<'a>(&'a [f32]);
    impl pulp::WithSimd for Sum<'_> {
        type Output = f32;
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) -> f32 {
            let (head, tail) = S::as_simd_f32s(self.0);
            let mut acc = [simd.splat_f32s(0.0); 4];
            let mut quads = head.chunks_exact(4);
            for quad in &mut quads {
                for (a, v) in acc.iter_mut().zip(quad) {
                    *a = simd.add_f32s(*a, *v);
                }
            }
            for v in quads.remainder() {
                acc[0] = simd.add_f32s(acc[0], *v);
            }
            let total = simd.add_f32s(simd.add_f32s(acc[0], acc[1]), simd.add_f32s(acc[2], acc[3]));
            simd.reduce_sum_f32s(total) + tail.iter().sum::<f32>()
        }
    }
    isa.dispatch(Sum(values))
}

fn run(budget: Budget, emit: &mut dyn FnMut(Record)) {
    let Ok(isa) = isa_from_env() else {
        return;
    };
    let Ok(model) = Model::random(Config::transformer_base(), 42) else {
        return;
    };
    let level = isa.level().to_string();
    let config = model.config().clone();
    let src: Vec<u32> = (0..SRC_LEN as u32)
        .map(|i| 3 + (i * 7919) % (config.src_vocab as u32 - 3))
        .collect();

    // The streaming floor of one decode step.
    let Some(floor) = StreamFloor::new(isa, model.decode_step_weight_bytes()) else {
        return;
    };

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for threads in [1, 2].into_iter().filter(|&t| t <= cores) {
        let limits = Limits::of(&config).with_threads(threads);
        let Ok(mut session) = Session::with_limits(&model, isa, limits) else {
            return;
        };
        let record = |case: &str, ns: f64, work: Work| {
            Record::new("e2e", case, "tessel", &level, threads, ns, work)
        };
        measure_session(budget, &mut session, &src, &floor, &record, emit);
    }
    drop(model);
    weight_types(budget, isa, &src, emit);
}

/// The floor of reading `bytes` once at `isa`: a stream-read record of case `case` (also used
/// by `ct2_peer --stream-read` for the step of a loaded model).
pub fn stream_record(budget: Budget, isa: Isa, bytes: usize, case: &str) -> Option<Record> {
    let floor = StreamFloor::new(isa, bytes)?;
    Some(floor.record(case, floor.median_ns(budget)))
}

/// A buffer of exactly the bytes something reads once; summing it is that read's floor.
struct StreamFloor {
    isa: Isa,
    buffer: AlignedBuf<f32>,
}

impl StreamFloor {
    fn new(isa: Isa, bytes: usize) -> Option<StreamFloor> {
        // Allocated like the weights (huge pages where they are), so the floor is a fair one.
        let mut buffer = AlignedBuf::<f32>::zeros(bytes / 4).ok()?;
        for (i, value) in buffer.as_mut_slice().iter_mut().enumerate() {
            *value = (i % 7) as f32;
        }
        Some(StreamFloor { isa, buffer })
    }

    /// Median time of one streaming sum over the buffer.
    fn median_ns(&self, budget: Budget) -> f64 {
        median_ns(budget, || {
            std::hint::black_box(stream_sum(
                self.isa,
                std::hint::black_box(self.buffer.as_slice()),
            ));
        })
    }

    /// The `stream-read` record of case `case` taking `ns`.
    fn record(&self, case: &str, ns: f64) -> Record {
        let level = self.isa.level().to_string();
        let work = Work::bytes(self.buffer.as_slice().len() as f64 * 4.0);
        Record::new("e2e", case, "stream-read", &level, 1, ns, work)
    }
}

/// `budget` split into `ROUNDS` rounds.
fn per_round(budget: Budget) -> Budget {
    Budget {
        time: budget.time / ROUNDS as u32,
        min_samples: budget.min_samples.div_ceil(ROUNDS),
    }
}

/// The median of the rounds' medians.
fn median_of_rounds(mut rounds: Vec<f64>) -> f64 {
    rounds.sort_by(f64::total_cmp);
    rounds.get(rounds.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Median decode step of 32-step greedy decodes (EOS ignored) of `src`, repeated for the
/// budget's time and samples.
fn median_step_ns(budget: Budget, session: &mut Session<&Model>, src: &[u32]) -> f64 {
    let greedy = SearchOptions {
        stop_at_eos: false,
        ..SearchOptions::greedy(STEPS)
    };
    let mut steps: Vec<Duration> = Vec::with_capacity(STEPS * 64);
    let started = Instant::now();
    while steps.len() < STEPS * budget.min_samples.max(1) || started.elapsed() < budget.time {
        if session.encode(src).is_err() {
            break;
        }
        let mut last = Instant::now();
        let result = session.generate(Request::new(greedy).on_step(|_| {
            let now = Instant::now();
            steps.push(now - last);
            last = now;
        }));
        if result.is_err() || steps.len() >= STEPS * 64 {
            break;
        }
    }
    steps.sort();
    steps
        .get(steps.len() / 2)
        .map_or(f64::NAN, |s| s.as_nanos() as f64)
}

/// The decode step with each weight type, one thread, round-robin over the types so load from
/// other processes falls on all alike; each record against the f32 step.
fn weight_types(budget: Budget, isa: Isa, src: &[u32], emit: &mut dyn FnMut(Record)) {
    let level = isa.level().to_string();
    let mut models = Vec::new();
    for weights in WeightType::ALL {
        let options = LoadOptions::weights(weights);
        match Model::random_with(Config::transformer_base(), 42, &options) {
            Ok(model) => models.push((weights, model)),
            Err(_) => return,
        }
    }
    let mut sessions = Vec::new();
    for (weights, model) in &models {
        let limits = Limits::of(model.config()).with_threads(1);
        let Ok(session) = Session::with_limits(model, isa, limits) else {
            return;
        };
        sessions.push((*weights, session, Vec::new()));
    }
    // The int8 step's own floor joins the rounds, measured right after that step.
    let int8_floor = models
        .iter()
        .find(|(weights, _)| *weights == WeightType::Int8)
        .and_then(|(_, model)| StreamFloor::new(isa, model.decode_step_weight_bytes()));
    let mut floor_medians = Vec::new();
    let round = per_round(budget);
    for _ in 0..ROUNDS {
        for (_, session, medians) in sessions.iter_mut() {
            medians.push(median_step_ns(round, session, src));
        }
        if let Some(floor) = &int8_floor {
            floor_medians.push(floor.median_ns(round));
        }
    }
    let mut f32_step: Option<Record> = None;
    for (weights, session, medians) in sessions {
        let ns = median_of_rounds(medians);
        let bytes = session.model().decode_step_weight_bytes() as f64;
        let impl_name = format!("tessel-{weights}");
        let record = Record::new(
            "e2e",
            "decode-step",
            &impl_name,
            &level,
            1,
            ns,
            Work::bytes(bytes),
        );
        match &f32_step {
            None => {
                f32_step = Some(record.clone());
                emit(record.clone());
            }
            Some(base) => emit(record.clone().against(base)),
        }
        if weights == WeightType::Int8 {
            let case = "stream-read-step-weights-int8";
            if let Some(floor) = &int8_floor {
                let stream = floor.record(case, median_of_rounds(floor_medians.clone()));
                emit(stream.clone());
                emit(
                    Record {
                        case: case.to_owned(),
                        ..record
                    }
                    .against(&stream),
                );
            }
        }
    }
    encoder_int8(budget, isa, &models, emit);
}

/// Source length of the encoder comparison.
const LONG_SRC: usize = 128;

/// `encode-src128` with f32 and int8 weights, round-robin; int8 against f32.
fn encoder_int8(
    budget: Budget,
    isa: Isa,
    models: &[(WeightType, Model)],
    emit: &mut dyn FnMut(Record),
) {
    let level = isa.level().to_string();
    let mut sessions = Vec::new();
    for (weights, model) in models {
        if !matches!(weights, WeightType::F32 | WeightType::Int8) {
            continue;
        }
        let limits = Limits::of(model.config()).with_threads(1);
        let Ok(session) = Session::with_limits(model, isa, limits) else {
            return;
        };
        sessions.push((*weights, session, Vec::new()));
    }
    let Some(config) = models.first().map(|(_, m)| m.config().clone()) else {
        return;
    };
    let src: Vec<u32> = (0..LONG_SRC as u32)
        .map(|i| 3 + (i * 7919) % (config.src_vocab as u32 - 3))
        .collect();
    let round = per_round(budget);
    for _ in 0..ROUNDS {
        for (_, session, medians) in sessions.iter_mut() {
            medians.push(median_ns(round, || {
                let _ = session.encode(&src);
            }));
        }
    }
    let d = config.d_model as f64;
    let flop = config.encoder_layers as f64
        * LONG_SRC as f64
        * 2.0
        * (4.0 * d * d + 2.0 * d * config.d_ff as f64);
    let mut base: Option<Record> = None;
    for (weights, _, medians) in sessions {
        let ns = median_of_rounds(medians);
        let impl_name = format!("tessel-{weights}");
        let record = Record::new(
            "e2e",
            "encode-src128",
            &impl_name,
            &level,
            1,
            ns,
            Work::flops(flop),
        );
        match &base {
            None => {
                base = Some(record.clone());
                emit(record);
            }
            Some(b) => emit(record.against(b)),
        }
    }
}

/// Rounds of the weight-type comparison (the median of the rounds' medians is reported).
const ROUNDS: usize = 5;

/// Emits the encode, decode-step, greedy and beam-4 cases of one session.
fn measure_session(
    budget: Budget,
    session: &mut Session<&Model>,
    src: &[u32],
    floor: &StreamFloor,
    record: &dyn Fn(&str, f64, Work) -> Record,
    emit: &mut dyn FnMut(Record),
) {
    let config = session.model().config().clone();
    let step_bytes = session.model().decode_step_weight_bytes();
    // Encoder: 2·params·tokens FLOP for the linears (attention adds ~2%).
    let d = config.d_model as f64;
    let encoder_flop = config.encoder_layers as f64
        * SRC_LEN as f64
        * 2.0
        * (4.0 * d * d + 2.0 * d * config.d_ff as f64);
    let encode_ns = median_ns(budget, || {
        let _ = session.encode(src);
    });
    emit(record("encode-src32", encode_ns, Work::flops(encoder_flop)));

    let greedy = SearchOptions {
        stop_at_eos: false,
        ..SearchOptions::greedy(STEPS)
    };
    // The step and its floor in alternate rounds, so load from other processes falls on both.
    let round = per_round(budget);
    let (mut steps, mut streams) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        streams.push(floor.median_ns(round));
        steps.push(median_step_ns(round, session, src));
    }
    let stream = floor.record("stream-read-step-weights", median_of_rounds(streams));
    emit(stream.clone());
    let step = record(
        "decode-step",
        median_of_rounds(steps),
        Work::bytes(step_bytes as f64),
    );
    emit(step.against(&stream));

    for (case, options) in [
        ("greedy-32x32", greedy),
        (
            "beam4-32x32",
            SearchOptions {
                stop_at_eos: false,
                ..SearchOptions::beam(4, STEPS)
            },
        ),
    ] {
        let ns = median_ns(budget, || {
            let _ = session.encode(src);
            let _ = session.generate(Request::new(options));
        });
        emit(record(
            case,
            ns,
            Work::bytes(step_bytes as f64 * STEPS as f64),
        ));
    }
}
