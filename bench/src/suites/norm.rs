//! The `norm` suite: the row-wise kernels at memory speed.
//!
//! For LayerNorm with residual (writing the sum too), RMSNorm, softmax (in place) and GELU (erf
//! and tanh forms, `out = GELU(x)`) over widths 384/512/1024/4096 × rows 1/256, each case measures in
//! the same run: `copy` (`copy_from_slice` of every input into an output of the same size: the
//! speed limit), `naive` (plain scalar `f32` loops, what one writes without thinking about it;
//! `libm::erff` / `f32::tanh` / `f32::exp` for the transcendentals)
//! and `tessel` at the level `TESSEL_ISA` selects. Rates are GB/s of inputs read plus outputs
//! written (the copy moves the same bytes); `tessel` is reported twice, against `copy` (ratio
//! above 0.67 = within 1.5× of the copy time) and against `naive`. `NORM_OPS=softmax,rmsnorm`
//! narrows the ops measured, `NORM_WIDTHS=16,512` / `NORM_ROWS=1` the shapes (width 16 shows
//! the per-call overhead). Cases smaller than 256 KiB repeat within each timed sample and
//! report the time per call.

use super::Suite;
use crate::{median_ns, Budget, Record, Work};
use std::hint::black_box;
use tessel_kernels::activation::{bias_activation_into, Activation};
use tessel_kernels::norm::{add_normalize, normalize, Norm, RowShape, Rows, RowsMut};
use tessel_kernels::softmax::softmax_in_place;
use tessel_kernels::Isa;

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

/// A buffer whose first element is 64-byte aligned, as the model's arena lays tensors out (a
/// plain `Vec<f32>` of a few MiB starts 16 bytes past a page, which splits every AVX-512
/// access across two cache lines).
pub struct Aligned {
    storage: Vec<f32>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new(values: impl ExactSizeIterator<Item = f32>) -> Aligned {
        let len = values.len();
        let mut storage = vec![0.0f32; len + 16];
        let start = storage.as_ptr().align_offset(64).min(16);
        storage[start..start + len]
            .iter_mut()
            .zip(values)
            .for_each(|(s, v)| *s = v);
        Aligned {
            storage,
            start,
            len,
        }
    }
}

impl std::ops::Deref for Aligned {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.storage[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for Aligned {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// One benchmark case with its buffers.
pub struct Case {
    op: Op,
    shape: RowShape,
    /// Inputs (`x`, then `residual`).
    inputs: Vec<Aligned>,
    /// Outputs (`sum`, then `out`); for in-place ops the one buffer the kernel updates.
    outputs: Vec<Aligned>,
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

impl Case {
    /// A case of `op` over `rows × width` with deterministic inputs.
    pub fn new(op: Op, rows: usize, width: usize) -> Case {
        let n = rows * width;
        let (ins, outs) = op.tensors();
        let input = |salt: usize| {
            Aligned::new((0..n).map(|i| ((i * 7919 + salt * 104_729) % 2003) as f32 / 500.0 - 2.0))
        };
        Case {
            op,
            shape: RowShape::new(rows, width),
            inputs: (0..ins).map(input).collect(),
            outputs: (0..outs).map(|salt| input(salt + 7)).collect(),
            gamma: (0..width).map(|i| 1.0 + (i % 5) as f32 * 0.1).collect(),
            beta: (0..width).map(|i| (i % 3) as f32 * 0.05).collect(),
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
        for (output, input) in self.outputs.iter_mut().zip(&self.inputs) {
            output.copy_from_slice(input);
        }
        black_box(&mut self.outputs);
    }

    /// Runs tessel's kernel at `isa`. Softmax runs in place on its own previous output (a
    /// softmax of a softmax stays a well-scaled distribution, so no reset is needed); GELU
    /// runs out of place, `out = GELU(x)`.
    pub fn tessel(&mut self, isa: Isa) {
        let (shape, width) = (self.shape, self.shape.width);
        let result = match self.op {
            Op::LayerNormResidual => {
                let (sum, out) = self.outputs.split_at_mut(1);
                add_normalize(
                    isa,
                    shape,
                    Norm::layer(&self.gamma, &self.beta, EPSILON),
                    Rows::new(&self.inputs[0], width),
                    Rows::new(&self.inputs[1], width),
                    Some(RowsMut::new(&mut sum[0], width)),
                    RowsMut::new(&mut out[0], width),
                )
            }
            Op::RmsNorm => normalize(
                isa,
                shape,
                Norm::rms(&self.gamma, EPSILON),
                Rows::new(&self.inputs[0], width),
                RowsMut::new(&mut self.outputs[0], width),
            ),
            Op::Softmax => {
                softmax_in_place(isa, shape, RowsMut::new(&mut self.outputs[0], width), 1.0)
            }
            Op::GeluErf | Op::GeluTanh => bias_activation_into(
                isa,
                shape,
                Rows::new(&self.inputs[0], width),
                None,
                if self.op == Op::GeluErf {
                    Activation::GeluErf
                } else {
                    Activation::GeluTanh
                },
                RowsMut::new(&mut self.outputs[0], width),
            ),
        };
        result.expect("benchmark shapes are valid");
        black_box(&mut self.outputs);
    }

    /// The same computation as plain scalar `f32` loops.
    pub fn naive(&mut self) {
        let width = self.shape.width;
        match self.op {
            Op::LayerNormResidual => {
                let (sum, out) = self.outputs.split_at_mut(1);
                let rows = self.inputs[0]
                    .chunks(width)
                    .zip(self.inputs[1].chunks(width));
                let outs = sum[0].chunks_mut(width).zip(out[0].chunks_mut(width));
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
                        o[i] = (s[i] - mean) * rstd * self.gamma[i] + self.beta[i];
                    }
                }
            }
            Op::RmsNorm => {
                let rows = self.inputs[0].chunks(width);
                for (x, o) in rows.zip(self.outputs[0].chunks_mut(width)) {
                    let mut ms = 0.0f32;
                    for v in x {
                        ms += v * v;
                    }
                    let rstd = 1.0 / (ms / width as f32 + EPSILON).sqrt();
                    for i in 0..width {
                        o[i] = x[i] * rstd * self.gamma[i];
                    }
                }
            }
            Op::Softmax => {
                for row in self.outputs[0].chunks_mut(width) {
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
                for (o, &x) in self.outputs[0].iter_mut().zip(self.inputs[0].iter()) {
                    *o = 0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2));
                }
            }
            Op::GeluTanh => {
                for (o, &x) in self.outputs[0].iter_mut().zip(self.inputs[0].iter()) {
                    let u = 0.797_884_6 * (x + 0.044_715 * x * x * x);
                    *o = 0.5 * x * (1.0 + u.tanh());
                }
            }
        }
        black_box(&mut self.outputs);
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
                let mut time = |run: &mut dyn FnMut(&mut Case)| {
                    median_ns(budget, || (0..reps).for_each(|_| run(&mut case))) / reps as f64
                };
                let copy = record("copy", "memcpy", time(&mut |c| c.copy()));
                let naive = record("naive", "scalar", time(&mut |c| c.naive()));
                let tessel = record("tessel", isa.level().name(), time(&mut |c| c.tessel(isa)));
                emit(naive.clone().against(&copy));
                emit(tessel.clone().against(&naive));
                emit(tessel.against(&copy));
                emit(copy);
            }
        }
    }
}
