//! The `norm` suite: the row-wise kernels at memory speed.
//!
//! For LayerNorm with residual (writing the sum too), RMSNorm, softmax (in place) and GELU (erf
//! and tanh forms, `out = GELU(x)`) over widths 384/512/1024/4096 × rows 1/256, each case measures in
//! the same run: `copy` (`copy_from_slice` of every input into an output of the same size: the
//! speed limit), `naive` (plain scalar `f32` loops, what one writes without thinking about it;
//! `libm::erff` / `f32::tanh` / `f32::exp` for the transcendentals), `tessel` at the level
//! `TESSEL_ISA` selects and, for the two norms at the AVX-512 level, `hand-avx512` (the
//! straightforward intrinsics kernels of [`hand_norm`]: how close to the copy plain
//! two-pass code gets). Copy, tessel and hand-avx512 are sampled in turn, so all see the same
//! load. Rates are GB/s of inputs read plus outputs written (the copy moves the same bytes);
//! `tessel` is reported against `copy` (ratio above 0.67 = within 1.5× of the copy time),
//! against `naive` and against `hand-avx512`. `NORM_OPS=softmax,rmsnorm` narrows the ops
//! measured, `NORM_WIDTHS=16,512` / `NORM_ROWS=1` the shapes (width 16 shows the per-call
//! overhead). Cases smaller than 256 KiB repeat within each timed sample and report the time
//! per call.

use super::Suite;
use crate::{hand_norm, median_ns, round_robin_median_ns, Budget, Record, Work};
use std::hint::black_box;
use tessel_kernels::activation::{bias_activation_into, Activation};
use tessel_kernels::norm::{add_normalize, normalize, Norm};
use tessel_kernels::softmax::softmax_in_place;
use tessel_kernels::{Isa, Level};
use tessel_kernels::{View, ViewMut};
use tessel_model::aligned::{AlignedBuf, HUGE_PAGE_BYTES};

/// The `norm` suite.
pub const SUITE: Suite = Suite {
    name: "norm",
    about: "LayerNorm+residual, RMSNorm, softmax, GELU vs memcpy of the same bytes and naive loops (GB/s)",
    run,
};

/// Row widths measured.
pub const WIDTHS: [usize; 4] = [384, 512, 1024, 4096];
/// Row counts measured.
pub const ROWS: [usize; 2] = [1, 256];

/// The numbers in environment variable `name` (comma-separated), or `default` when it is unset
/// or empty: `NORM_WIDTHS=16,512` measures other widths (16 shows the per-call overhead),
/// `NORM_ROWS=1` one row count.
pub fn sizes(name: &str, default: &[usize]) -> Vec<usize> {
    let parsed: Vec<usize> = std::env::var(name)
        .unwrap_or_default()
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    if parsed.is_empty() {
        default.to_vec()
    } else {
        parsed
    }
}

/// The kernels measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `out = LayerNorm(x + residual)`, `sum = x + residual`.
    LayerNormResidual,
    /// `out = RMSNorm(x)`.
    RmsNorm,
    /// `x = softmax(x)` in place.
    Softmax,
    /// `x = GELU(x)` in place, erf form.
    GeluErf,
    /// `x = GELU(x)` in place, tanh form.
    GeluTanh,
}

impl Op {
    /// Every op, in report order.
    pub const ALL: [Op; 5] = [
        Op::LayerNormResidual,
        Op::RmsNorm,
        Op::Softmax,
        Op::GeluErf,
        Op::GeluTanh,
    ];

    /// The ops named in `NORM_OPS` (comma-separated names), or all of them when it is unset.
    pub fn selected() -> impl Iterator<Item = Op> {
        let names = std::env::var("NORM_OPS").unwrap_or_default();
        Op::ALL
            .into_iter()
            .filter(move |op| names.is_empty() || names.split(',').any(|n| n == op.name()))
    }

    /// Short name used in case names.
    pub fn name(self) -> &'static str {
        match self {
            Op::LayerNormResidual => "layernorm_residual",
            Op::RmsNorm => "rmsnorm",
            Op::Softmax => "softmax",
            Op::GeluErf => "gelu_erf",
            Op::GeluTanh => "gelu_tanh",
        }
    }

    /// `(inputs, outputs)` of `rows × width` each.
    fn tensors(self) -> (usize, usize) {
        match self {
            Op::LayerNormResidual => (2, 2),
            Op::RmsNorm | Op::Softmax | Op::GeluErf | Op::GeluTanh => (1, 1),
        }
    }
}

const EPSILON: f32 = 1e-5;

/// Bytes one timed sample moves at least (small cases repeat within a sample).
const SAMPLE_BYTES: usize = 256 * 1024;

/// One benchmark case with its buffers.
///
/// Every tensor of a case (two inputs, two outputs, `gamma`, `beta`) lives in one
/// [`AlignedBuf`] of at least 2 MiB, each 64-byte aligned, as the model's arena lays its
/// activations out: the buffer starts on a huge page, so which L2 sets the tensors occupy
/// does not change from run to run with the physical pages the kernel hands out (on 4 KiB
/// pages, one process measured 256 × 512 RMSNorm at 9 µs and the next at 15 µs).
pub struct Case {
    op: Op,
    shape: Dims,
    arena: AlignedBuf<f32>,
    /// Elements from one tensor's start to the next (`rows × width` rounded up to a cache
    /// line).
    stride: usize,
}

/// The tensors of a [`Case`], borrowed from its arena.
struct Parts<'a> {
    /// `x`, then `residual` (unused by the one-input ops).
    inputs: [&'a [f32]; 2],
    /// `sum`, then `out`; for the one-output ops the first is the output (in place for
    /// softmax).
    outputs: [&'a mut [f32]; 2],
    gamma: &'a [f32],
    beta: &'a [f32],
}

/// Elements per 64-byte cache line.
const LINE: usize = 16;

impl Case {
    /// A case of `op` over `rows × width` with deterministic inputs.
    pub fn new(op: Op, rows: usize, width: usize) -> Case {
        let n = rows * width;
        let stride = n.next_multiple_of(LINE);
        let param_stride = width.next_multiple_of(LINE);
        let len = (4 * stride + 2 * param_stride).max(HUGE_PAGE_BYTES / 4);
        let mut case = Case {
            op,
            shape: Dims { rows, width },
            arena: AlignedBuf::zeros(len).expect("the benchmark's buffers fit in memory"),
            stride,
        };
        let value =
            |salt: usize, i: usize| ((i * 7919 + salt * 104_729) % 2003) as f32 / 500.0 - 2.0;
        let arena = case.arena.as_mut_slice();
        // Inputs get salts 0 and 1, outputs 7 and 8 (they start from other values).
        for (tensor, salt) in [0, 1, 7, 8].into_iter().enumerate() {
            let start = tensor * stride;
            for (i, v) in arena[start..start + n].iter_mut().enumerate() {
                *v = value(salt, i);
            }
        }
        let params = &mut arena[4 * stride..];
        let (gamma, beta) = params.split_at_mut(param_stride);
        for i in 0..width {
            gamma[i] = 1.0 + (i % 5) as f32 * 0.1;
            beta[i] = (i % 3) as f32 * 0.05;
        }
        case
    }

    /// The case's tensors.
    fn parts(&mut self) -> Parts<'_> {
        let (n, stride, width) = (
            self.shape.rows * self.shape.width,
            self.stride,
            self.shape.width,
        );
        let (tensors, params) = self.arena.as_mut_slice().split_at_mut(4 * stride);
        let (inputs, outputs) = tensors.split_at_mut(2 * stride);
        let (input0, input1) = inputs.split_at(stride);
        let (output0, output1) = outputs.split_at_mut(stride);
        let (gamma, beta) = params.split_at(width.next_multiple_of(LINE));
        Parts {
            inputs: [&input0[..n], &input1[..n]],
            outputs: [&mut output0[..n], &mut output1[..n]],
            gamma: &gamma[..width],
            beta: &beta[..width],
        }
    }

    /// `op/rowsxwidth`.
    pub fn name(&self) -> String {
        format!(
            "{}/{}x{}",
            self.op.name(),
            self.shape.rows,
            self.shape.width
        )
    }

    /// Bytes read plus bytes written by one run.
    pub fn bytes(&self) -> f64 {
        let (ins, outs) = self.op.tensors();
        ((ins + outs) * self.shape.rows * self.shape.width * 4) as f64
    }

    /// Copies every input into an output of the same size: the speed limit.
    pub fn copy(&mut self) {
        let tensors = self.op.tensors().0;
        let Parts {
            inputs, outputs, ..
        } = self.parts();
        for (output, input) in outputs.into_iter().zip(inputs).take(tensors) {
            output.copy_from_slice(input);
            black_box(output);
        }
    }

    /// Runs tessel's kernel at `isa`. Softmax runs in place on its own previous output (a
    /// softmax of a softmax stays a well-scaled distribution, so no reset is needed); GELU
    /// runs out of place, `out = GELU(x)`.
    pub fn tessel(&mut self, isa: Isa) {
        let (op, shape, width) = (self.op, self.shape, self.shape.width);
        let Parts {
            inputs: [x, residual],
            outputs: [first, second],
            gamma,
            beta,
        } = self.parts();
        let result = match op {
            Op::LayerNormResidual => add_normalize(
                isa,
                Norm::layer(gamma, beta, EPSILON),
                rows_of(x, shape, width),
                rows_of(residual, shape, width),
                Some(rows_mut(first, shape, width)),
                rows_mut(second, shape, width),
            ),
            Op::RmsNorm => normalize(
                isa,
                Norm::rms(gamma, EPSILON),
                rows_of(x, shape, width),
                rows_mut(first, shape, width),
            ),
            Op::Softmax => softmax_in_place(isa, rows_mut(first, shape, width), 1.0),
            Op::GeluErf | Op::GeluTanh => bias_activation_into(
                isa,
                rows_of(x, shape, width),
                None,
                if op == Op::GeluErf {
                    Activation::GeluErf
                } else {
                    Activation::GeluTanh
                },
                rows_mut(first, shape, width),
            ),
        };
        result.expect("benchmark shapes are valid");
        black_box(&mut self.arena);
    }

    /// Whether [`Case::hand_written`] runs for this case at `isa`: LayerNorm with residual and
    /// RMSNorm, compared at the AVX-512 level on widths that are multiples of 16.
    pub fn has_hand_written(&self, isa: Isa) -> bool {
        matches!(self.op, Op::LayerNormResidual | Op::RmsNorm)
            && isa.level() == Level::Avx512
            && hand_norm::available(self.shape.width)
    }

    /// The computation by the straightforward AVX-512 kernels of [`hand_norm`] (nothing when
    /// [`Case::has_hand_written`] is false).
    pub fn hand_written(&mut self) {
        let op = self.op;
        let Parts {
            inputs: [x, residual],
            outputs: [first, second],
            gamma,
            beta,
        } = self.parts();
        let ran = match op {
            Op::LayerNormResidual => {
                hand_norm::layer_norm_residual(x, residual, gamma, beta, EPSILON, first, second)
            }
            Op::RmsNorm => hand_norm::rms_norm(x, gamma, EPSILON, first),
            _ => false,
        };
        black_box(ran);
        black_box(&mut self.arena);
    }

    /// The same computation as plain scalar `f32` loops.
    pub fn naive(&mut self) {
        let (op, width) = (self.op, self.shape.width);
        let Parts {
            inputs: [x, residual],
            outputs: [first, second],
            gamma,
            beta,
        } = self.parts();
        match op {
            Op::LayerNormResidual => {
                let rows = x.chunks(width).zip(residual.chunks(width));
                let outs = first.chunks_mut(width).zip(second.chunks_mut(width));
                for ((x, r), (s, o)) in rows.zip(outs) {
                    let mut mean = 0.0f32;
                    for i in 0..width {
                        s[i] = x[i] + r[i];
                        mean += s[i];
                    }
                    mean /= width as f32;
                    let mut var = 0.0f32;
                    for v in s.iter() {
                        var += (v - mean) * (v - mean);
                    }
                    let rstd = 1.0 / (var / width as f32 + EPSILON).sqrt();
                    for i in 0..width {
                        o[i] = (s[i] - mean) * rstd * gamma[i] + beta[i];
                    }
                }
            }
            Op::RmsNorm => {
                for (x, o) in x.chunks(width).zip(first.chunks_mut(width)) {
                    let mut ms = 0.0f32;
                    for v in x {
                        ms += v * v;
                    }
                    let rstd = 1.0 / (ms / width as f32 + EPSILON).sqrt();
                    for i in 0..width {
                        o[i] = x[i] * rstd * gamma[i];
                    }
                }
            }
            Op::Softmax => {
                for row in first.chunks_mut(width) {
                    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                    let mut sum = 0.0f32;
                    for v in row.iter_mut() {
                        *v = (*v - max).exp();
                        sum += *v;
                    }
                    for v in row.iter_mut() {
                        *v /= sum;
                    }
                }
            }
            Op::GeluErf => {
                for (o, &x) in first.iter_mut().zip(x.iter()) {
                    *o = 0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2));
                }
            }
            Op::GeluTanh => {
                for (o, &x) in first.iter_mut().zip(x.iter()) {
                    let u = 0.797_884_6 * (x + 0.044_715 * x * x * x);
                    *o = 0.5 * x * (1.0 + u.tanh());
                }
            }
        }
        black_box(&mut self.arena);
    }
}

fn run(budget: Budget, emit: &mut dyn FnMut(Record)) {
    let isa = match tessel_model::isa_env::isa_from_env() {
        Ok(isa) => isa,
        Err(_) => return,
    };
    let (widths, row_counts) = (sizes("NORM_WIDTHS", &WIDTHS), sizes("NORM_ROWS", &ROWS));
    for op in Op::selected() {
        for &width in &widths {
            for &rows in &row_counts {
                let mut case = Case::new(op, rows, width);
                let name = case.name();
                let work = Work::bytes(case.bytes());
                let record = |implementation: &str, level: &str, ns: f64| {
                    Record::new("norm", &name, implementation, level, 1, ns, work)
                };
                // Small cases repeat inside one timed sample, so the timer's own cost (tens
                // of ns) does not swamp a call of ~100 ns.
                let reps = (SAMPLE_BYTES / case.bytes() as usize).max(1);
                let repeated = |run: fn(&mut Case, Isa)| {
                    move |case: &mut Case| (0..reps).for_each(|_| run(case, isa))
                };
                let per_call = |ns: f64| ns / reps as f64;
                let naive_ns = median_ns(budget, || repeated(|c, _| c.naive())(&mut case));
                let naive = record("naive", "scalar", per_call(naive_ns));
                // Copy, tessel and the hand-written kernel sampled in turn: same load on each.
                let hand = case.has_hand_written(isa);
                let (mut copy_run, mut tessel_run, mut hand_run) = (
                    repeated(|c, _| c.copy()),
                    repeated(|c, isa| c.tessel(isa)),
                    repeated(|c, _| c.hand_written()),
                );
                let mut runs: Vec<&mut dyn FnMut(&mut Case)> = vec![&mut copy_run, &mut tessel_run];
                if hand {
                    runs.push(&mut hand_run);
                }
                let times = round_robin_median_ns(budget, &mut case, &mut runs);
                let copy = record("copy", "memcpy", per_call(times[0]));
                let tessel = record("tessel", isa.level().name(), per_call(times[1]));
                emit(naive.clone().against(&copy));
                emit(tessel.clone().against(&naive));
                emit(tessel.clone().against(&copy));
                if let Some(&hand_ns) = times.get(2) {
                    let hand = record("hand-avx512", "avx512", per_call(hand_ns));
                    emit(tessel.against(&hand));
                    emit(hand.against(&copy));
                }
                emit(copy);
            }
        }
    }
}

/// Rows and width of a case.
#[derive(Clone, Copy, Debug)]
struct Dims {
    rows: usize,
    width: usize,
}

/// The case's rows of `data`, `stride` apart.
fn rows_of(data: &[f32], shape: Dims, stride: usize) -> View<'_> {
    View::new(data, shape.rows, shape.width, stride).expect("benchmark shapes are valid")
}

/// The case's rows of `data`, `stride` apart, written.
fn rows_mut(data: &mut [f32], shape: Dims, stride: usize) -> ViewMut<'_> {
    ViewMut::new(data, shape.rows, shape.width, stride).expect("benchmark shapes are valid")
}
