//! The row-wise kernels (LayerNorm/RMSNorm in all five forms, softmax, activations with and
//! without bias, `exp_slice`) against `tessel_kernels::reference` with fuzzer-chosen shapes,
//! strides, parameters, values (NaN, ±Inf, subnormals) and injected argument faults, at every
//! ISA level. Valid calls match the reference where the rows are tame and write nothing outside
//! their views; refused calls return a typed error and write nothing.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel_fuzz::{assert_close, dot_tolerance, isa, maybe_short, span, tame, Guarded, Values};
use tessel_kernels::activation::{bias_activation, bias_activation_into, Activation};
use tessel_kernels::math::{exp_slice, EXP_MAX_RELATIVE_ERROR};
use tessel_kernels::norm::{
    accumulate_normalize, add_normalize, add_normalize_in_place, normalize, normalize_in_place,
    Norm,
};
use tessel_kernels::reference::{activation as ref_act, norm as ref_norm};
use tessel_kernels::softmax::softmax_in_place;
use tessel_kernels::{Isa, KernelError};
use tessel_kernels::{View, ViewMut};

#[derive(Arbitrary, Debug)]
struct Input {
    isa: u8,
    op: u8,
    rows: u8,
    width: u8,
    wide: bool,
    /// Extra stride of x, residual/other, out and sum.
    pads: [u8; 4],
    rms: bool,
    epsilon: u16,
    activation: u8,
    scale: i16,
    fault: u8,
    specials: bool,
    values: Vec<u16>,
}

/// Faults, by `fault % 16`; the others leave the call valid.
const SHORT_X: u8 = 0;
const SHORT_OUT: u8 = 1;
const SHORT_OTHER: u8 = 2;
const BAD_GAMMA: u8 = 3;
const BAD_BETA: u8 = 4;
const BAD_EPSILON: u8 = 5;
const BAD_STRIDE: u8 = 6;
const BAD_BIAS: u8 = 7;
const BAD_SCALE: u8 = 8;

/// The buffers of one call and what was corrupted.
struct Case {
    isa: Isa,
    shape: (usize, usize),
    x: Guarded,
    other: Guarded,
    out: Guarded,
    sum: Guarded,
    gamma: Vec<f32>,
    beta: Vec<f32>,
    bias: Vec<f32>,
    epsilon: f32,
    scale: f32,
    activation: Activation,
    fault: u8,
    x_short: bool,
    other_short: bool,
    out_short: bool,
    stride_bad: bool,
}

fuzz_target!(|input: Input| run(input));

fn run(input: Input) {
    let rows = input.rows as usize % 9;
    let width = if input.wide {
        64 + input.width as usize
    } else {
        input.width as usize % 40
    };
    let fault = input.fault % 16;
    let mut gen = Values::new(&input.values, input.specials);
    let pad = |i: usize| input.pads[i] as usize % 4;
    let stride_bad = fault == BAD_STRIDE && rows > 1 && width > 0;
    let x_stride = if stride_bad {
        width - 1
    } else {
        width + pad(0)
    };
    let matrix = |gen: &mut Values, stride: usize, short: bool| {
        let (len, shortened) = maybe_short(span(rows, width, stride), short);
        let vals = gen.take(rows * width);
        (
            Guarded::new(rows, width, stride, len, |r, c| vals[r * width + c]),
            shortened,
        )
    };
    let (x, x_short) = matrix(&mut gen, x_stride, fault == SHORT_X);
    let (other, other_short) = matrix(&mut gen, width + pad(1), fault == SHORT_OTHER);
    let (out, out_short) = matrix(&mut gen, width + pad(2), fault == SHORT_OUT);
    let (sum, _) = matrix(&mut gen, width + pad(3), false);
    let param_len = |bad: bool| if bad { width + 1 } else { width };
    // γ and β are tame: the norms' parameters are weights, already checked finite at load.
    let gamma = (0..param_len(fault == BAD_GAMMA))
        .map(|i| 0.25 + (i % 7) as f32 * 0.5 - gen.next_value().abs().min(4.0))
        .collect();
    let beta = (0..param_len(fault == BAD_BETA))
        .map(|_| gen.next_value().clamp(-8.0, 8.0))
        .collect();
    let bias = gen.take(param_len(fault == BAD_BIAS));
    let epsilon = match fault {
        BAD_EPSILON if input.specials => f32::NAN,
        BAD_EPSILON => -1.0e-5,
        _ => 1.0e-6 + input.epsilon as f32 * 1.0e-6,
    };
    let scale = match fault {
        BAD_SCALE => f32::INFINITY,
        _ => input.scale as f32 / 2048.0,
    };
    let case = Case {
        isa: isa(input.isa),
        shape: (rows, width),
        x,
        other,
        out,
        sum,
        gamma,
        beta,
        bias,
        epsilon,
        scale,
        activation: Activation::ALL[input.activation as usize % Activation::ALL.len()],
        fault,
        x_short,
        other_short,
        out_short,
        stride_bad,
    };
    match input.op % 11 {
        0..=4 => norm_op(&case, input.op % 11, input.rms),
        5 => softmax_op(&case),
        6..=8 => activation_op(&case, input.op % 11),
        9 => {
            let mut values = case.x.data.clone();
            case.activation.apply_slice(case.isa, &mut values);
            check_activation(&case, &case.x.data, None, &values);
        }
        _ => {
            let mut values = case.x.data.clone();
            exp_slice(case.isa, &mut values);
            for (i, (&v, &y)) in case.x.data.iter().zip(&values).enumerate() {
                let want = (v as f64).exp();
                let bound = EXP_MAX_RELATIVE_ERROR as f64 * want + 1e-37;
                assert_close(&format!("{} exp[{i}]({v})", case.isa), y, want, bound);
            }
        }
    }
}

/// Checks that a call was refused exactly when faulted, and left its outputs alone if so;
/// returns whether it ran.
fn rows(m: &Guarded) -> Result<View<'_>, KernelError> {
    View::new(&m.data, m.rows, m.cols, m.stride)
}

fn outcome(what: &str, result: Result<(), KernelError>, faulted: bool) -> bool {
    match result {
        Ok(()) => {
            assert!(!faulted, "{what}: faulty call accepted");
            true
        }
        Err(e) => {
            assert!(faulted, "{what}: valid call refused: {e}");
            false
        }
    }
}

fn norm_op(case: &Case, op: u8, rms: bool) {
    let norm = if rms {
        Norm::rms(&case.gamma, case.epsilon)
    } else {
        Norm::layer(&case.gamma, &case.beta, case.epsilon)
    };
    let (isa, shape) = (case.isa, case.shape);
    let f = case.fault;
    let params_bad = f == BAD_GAMMA || (f == BAD_BETA && !rms) || f == BAD_EPSILON;
    let uses_other = op >= 2;
    let uses_out = op != 1 && op != 3;
    let faulted = params_bad
        || case.x_short
        || case.stride_bad
        || (uses_other && case.other_short)
        || (uses_out && case.out_short);
    let with_sum = case.scale > 0.0;
    let what = format!("{isa} norm op {op} rms={rms} {shape:?} fault={f} sum={with_sum}");
    let (mut x, mut other, mut out, mut sum) = (
        case.x.clone(),
        case.other.clone(),
        case.out.clone(),
        case.sum.clone(),
    );
    let result = (|| match op {
        0 => normalize(
            isa,
            norm,
            rows(&x)?,
            ViewMut::new(&mut out.data, out.rows, out.cols, out.stride)?,
        ),
        1 => normalize_in_place(
            isa,
            norm,
            ViewMut::new(&mut x.data, x.rows, x.cols, x.stride)?,
        ),
        2 => add_normalize(
            isa,
            norm,
            rows(&x)?,
            rows(&other)?,
            with_sum
                .then(|| ViewMut::new(&mut sum.data, sum.rows, sum.cols, sum.stride))
                .transpose()?,
            ViewMut::new(&mut out.data, out.rows, out.cols, out.stride)?,
        ),
        3 => add_normalize_in_place(
            isa,
            norm,
            ViewMut::new(&mut x.data, x.rows, x.cols, x.stride)?,
            rows(&other)?,
        ),
        _ => accumulate_normalize(
            isa,
            norm,
            ViewMut::new(&mut other.data, other.rows, other.cols, other.stride)?,
            rows(&x)?,
            ViewMut::new(&mut out.data, out.rows, out.cols, out.stride)?,
        ),
    })();
    let ran = outcome(&what, result, faulted);
    let pairs = [
        (&x, &case.x),
        (&other, &case.other),
        (&out, &case.out),
        (&sum, &case.sum),
    ];
    if !ran {
        for (now, before) in pairs {
            now.assert_unchanged(before, &what);
        }
        return;
    }
    for (now, _) in pairs {
        now.assert_gaps_intact(&what);
    }
    let width = shape.1;
    for r in 0..shape.0 {
        let xr: Vec<f32> = (0..width).map(|c| case.x.get(r, c)).collect();
        let staged = if op >= 2 {
            let o: Vec<f32> = (0..width).map(|c| case.other.get(r, c)).collect();
            let mut s = vec![0.0; width];
            ref_norm::add(&xr, &o, &mut s);
            s
        } else {
            xr
        };
        // The sum outputs are exact.
        let sum_out = match op {
            2 if with_sum => Some(&sum),
            4 => Some(&other),
            _ => None,
        };
        if let Some(m) = sum_out {
            for (c, &s) in staged.iter().enumerate() {
                let got = m.get(r, c);
                assert!(
                    got.to_bits() == s.to_bits() || (got.is_nan() && s.is_nan()),
                    "{what}: sum ({r}, {c}) {got} != {s}"
                );
            }
        }
        if !tame(&staged) {
            continue;
        }
        let result = if op == 1 || op == 3 { &x } else { &out };
        let mut want = vec![0.0f64; width];
        ref_norm::normalize_row(norm, &staged, &mut want);
        let bound = |c: usize| match norm {
            Norm::Layer {
                gamma,
                beta,
                epsilon,
            } => {
                let (mean, variance) = ref_norm::mean_variance(&staged);
                let sigma = (variance + epsilon as f64).sqrt();
                let spread = staged
                    .iter()
                    .map(|&v| (v as f64 - mean).abs())
                    .fold(0.0, f64::max);
                dot_tolerance(
                    width,
                    gamma[c].abs() as f64 * spread / sigma + beta[c].abs() as f64,
                )
            }
            Norm::Rms { gamma, epsilon } => {
                let rstd = 1.0 / (ref_norm::mean_square(&staged) + epsilon as f64).sqrt();
                dot_tolerance(width, (gamma[c] * staged[c]).abs() as f64 * rstd)
            }
        };
        for (c, &w) in want.iter().enumerate() {
            assert_close(&format!("{what} ({r}, {c})"), result.get(r, c), w, bound(c));
        }
    }
}

fn softmax_op(case: &Case) {
    let (isa, shape, scale) = (case.isa, case.shape, case.scale);
    let faulted = case.x_short || case.stride_bad || case.fault == BAD_SCALE;
    let what = format!("{isa} softmax {shape:?} scale={scale} fault={}", case.fault);
    let mut x = case.x.clone();
    let result = ViewMut::new(&mut x.data, x.rows, x.cols, x.stride)
        .and_then(|view| softmax_in_place(isa, view, scale));
    if !outcome(&what, result, faulted) {
        x.assert_unchanged(&case.x, &what);
        return;
    }
    x.assert_gaps_intact(&what);
    let width = shape.1;
    for r in 0..shape.0 {
        let row: Vec<f32> = (0..width).map(|c| case.x.get(r, c)).collect();
        // -inf entries are masks, whatever the scale, and meaningful; other specials only
        // need to not crash.
        let masked_tame = row.iter().all(|&v| v == f32::NEG_INFINITY || tame(&[v]));
        if !masked_tame {
            continue;
        }
        let mut want = vec![0.0f64; width];
        ref_norm::softmax_row(scale, &row, &mut want);
        let logit = |v| ref_norm::softmax_logit(scale, v);
        let max = row
            .iter()
            .map(|&v| logit(v))
            .fold(f64::NEG_INFINITY, f64::max);
        for (c, &y) in want.iter().enumerate() {
            let z = (logit(row[c]) - max).abs();
            let relative = if y == 0.0 {
                0.0
            } else {
                y * (2.0 * EXP_MAX_RELATIVE_ERROR as f64 + 4.0 * f32::EPSILON as f64 * z)
            };
            let bound = dot_tolerance(width, y) + relative + 1e-30;
            assert_close(&format!("{what} ({r}, {c})"), x.get(r, c), y, bound);
        }
    }
}

fn activation_op(case: &Case, op: u8) {
    let (isa, shape, activation) = (case.isa, case.shape, case.activation);
    let bias_bad = case.fault == BAD_BIAS && op != 6;
    let out_used = op == 8;
    let faulted = case.x_short || case.stride_bad || bias_bad || (out_used && case.out_short);
    let what = format!(
        "{isa} activation op {op} {activation:?} {shape:?} fault={}",
        case.fault
    );
    let (mut x, mut out) = (case.x.clone(), case.out.clone());
    let result = (|| match op {
        6 => {
            activation.apply_rows(isa, ViewMut::new(&mut x.data, x.rows, x.cols, x.stride)?);
            Ok(())
        }
        7 => bias_activation(
            isa,
            ViewMut::new(&mut x.data, x.rows, x.cols, x.stride)?,
            &case.bias,
            activation,
        ),
        _ => bias_activation_into(
            isa,
            rows(&case.x)?,
            Some(&case.bias),
            activation,
            ViewMut::new(&mut out.data, out.rows, out.cols, out.stride)?,
        ),
    })();
    if !outcome(&what, result, faulted) {
        x.assert_unchanged(&case.x, &what);
        out.assert_unchanged(&case.out, &what);
        return;
    }
    x.assert_gaps_intact(&what);
    out.assert_gaps_intact(&what);
    let result = if op == 8 { &out } else { &x };
    let bias = (op != 6).then_some(&case.bias[..]);
    for r in 0..shape.0 {
        let input: Vec<f32> = (0..shape.1).map(|c| case.x.get(r, c)).collect();
        let got: Vec<f32> = (0..shape.1).map(|c| result.get(r, c)).collect();
        check_activation(case, &input, bias, &got);
    }
}

/// `got[c] = activation(input[c] + bias[c])` within the activation's stated error.
fn check_activation(case: &Case, input: &[f32], bias: Option<&[f32]>, got: &[f32]) {
    let activation = case.activation;
    for (c, (&v, &y)) in input.iter().zip(got).enumerate() {
        let pre = v + bias.map_or(0.0, |b| b[c]);
        if !tame(&[pre]) {
            continue;
        }
        let want = ref_act::apply(activation, pre as f64);
        let bound = activation.max_error(pre as f64) + f32::EPSILON as f64 * want.abs();
        let what = format!("{} {activation:?}({pre}) [{c}]", case.isa);
        assert_close(&what, y, want, bound);
    }
}
