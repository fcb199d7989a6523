//! Attention against `reference::attention` with fuzzer-chosen shapes (both the decode and the
//! prefill paths), strides, masks (causal offset, key padding, window), per-head or shared
//! biases (with `-inf` entries), scales, values and injected argument faults, at every ISA
//! level, on one thread or split over 2 to 4 tasks ([`attention_split`], every call split as far
//! as it goes). Valid calls must match the reference where the inputs are tame and write
//! nothing outside the output view; refused calls return a typed error and write nothing.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel_fuzz::{assert_close, dot_tolerance, isa, maybe_short, span, tame, Guarded, Values};
use tessel_kernels::attention::{
    attention, attention_parallel_scratch, attention_scratch, attention_split, default_scale,
    AttentionShape, Bias, Mask, Split,
};
use tessel_kernels::gemm::Parallel;
use tessel_kernels::math::EXP_MAX_RELATIVE_ERROR;
use tessel_kernels::{reference, KernelError, View, ViewMut};

fn view(m: &Guarded) -> Result<View<'_>, KernelError> {
    View::new(&m.data, m.rows, m.cols, m.stride)
}

#[derive(Arbitrary, Debug)]
struct Input {
    isa: u8,
    heads: u8,
    d_head: u8,
    q_len: u8,
    kv_len: u8,
    /// Extra stride of q, k, v, out and the bias rows.
    pads: [u8; 5],
    causal_offset: Option<u8>,
    key_len: Option<u8>,
    window: Option<u8>,
    /// `Some(shared)`: a bias, one matrix for all heads when `shared`.
    bias: Option<bool>,
    /// Every `masked`-th bias entry is `-inf` (0: none).
    masked: u8,
    scale: Option<i16>,
    fault: u8,
    /// Threads of the call (0 or 1: the single-threaded kernel).
    threads: u8,
    specials: bool,
    values: Vec<u16>,
}

/// Claims `.0` threads and runs the tasks on the calling thread, last first.
struct Reversed(usize);

impl Parallel for Reversed {
    fn threads(&self) -> usize {
        self.0
    }

    fn run(&self, tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        (0..tasks).rev().for_each(task);
    }
}

const D_HEADS: [usize; 10] = [0, 1, 2, 3, 7, 8, 16, 17, 32, 65];

fuzz_target!(|input: Input| run(input));

fn run(input: Input) {
    let isa = isa(input.isa);
    let shape = AttentionShape {
        heads: input.heads as usize % 4,
        d_head: D_HEADS[input.d_head as usize % D_HEADS.len()],
        q_len: input.q_len as usize % 20,
        kv_len: input.kv_len as usize % 40,
    };
    let (heads, d, q_len, kv_len) = (shape.heads, shape.d_head, shape.q_len, shape.kv_len);
    let width = heads * d;
    let pad = |i: usize| input.pads[i] as usize % 4;
    let fault = input.fault % 24;
    let mut gen = Values::new(&input.values, input.specials);

    let operand = |gen: &mut Values, rows: usize, pad: usize, short: bool| {
        let stride = width + pad;
        let (len, shortened) = maybe_short(span(rows, width, stride), short);
        let vals = gen.take(rows * width);
        let m = Guarded::new(rows, width, stride, len, |r, c| vals[r * width + c]);
        (m, shortened)
    };
    let (q, q_short) = operand(&mut gen, q_len, pad(0), fault == 0);
    let (k, k_short) = operand(&mut gen, kv_len, pad(1), fault == 1);
    let (v, v_short) = operand(&mut gen, kv_len, pad(2), fault == 2);
    let out_stride = width + pad(3);
    let (out_len, out_short) = maybe_short(span(q_len, width, out_stride), fault == 3);
    let out = Guarded::new(q_len, width, out_stride, out_len, |_, _| f32::NAN);

    let row_stride = kv_len + pad(4);
    let per_head = span(q_len, kv_len, row_stride);
    let (bias_heads, head_stride) = match input.bias {
        Some(false) if heads > 1 => (heads, per_head + pad(0)),
        _ => (1, 0),
    };
    let bias_needed = if per_head == 0 {
        0
    } else {
        (bias_heads - 1) * head_stride + per_head
    };
    let has_bias = input.bias.is_some() || fault == 4;
    let (bias_len, bias_short) = maybe_short(bias_needed, fault == 4 && has_bias);
    let masked = input.masked as usize % 6;
    let bias_data: Vec<f32> = (0..bias_len)
        .map(|i| {
            if masked > 0 && i % masked == masked - 1 {
                f32::NEG_INFINITY
            } else {
                gen.next_value()
            }
        })
        .collect();
    let bias = has_bias.then_some(Bias::dense(&bias_data, row_stride, head_stride));

    let key_len = match fault {
        6 => Some(kv_len + 1),
        _ => input.key_len.map(|l| l as usize % (kv_len + 1)),
    };
    let causal_offset = match fault {
        7 => None,
        9 => Some(usize::MAX),
        _ => input.causal_offset.map(usize::from),
    };
    let window = match fault {
        7 => Some(input.window.unwrap_or(0) as usize),
        _ => input
            .window
            .filter(|_| causal_offset.is_some())
            .map(usize::from),
    };
    let mask = Mask {
        causal_offset,
        key_len,
        window,
        bias,
        ..Mask::NONE
    };
    let scale = match fault {
        8 => Some(if input.specials {
            f32::NAN
        } else {
            f32::INFINITY
        }),
        _ => input.scale.map(|s| s as f32 / 1024.0),
    };
    let threads = input.threads as usize % 5;
    let spec = if threads > 1 {
        attention_parallel_scratch(isa, &shape, threads).len()
    } else {
        attention_scratch(isa, &shape).len()
    };
    let (scratch_len, scratch_short) = maybe_short(spec, fault == 5);
    let mut scratch = vec![f32::NAN; scratch_len];

    let faulted = q_short
        || k_short
        || v_short
        || out_short
        || bias_short
        || fault == 6
        || fault == 7
        || fault == 8
        || (fault == 9 && q_len > 0)
        || scratch_short;
    let what =
        format!("{isa} {shape:?} threads={threads} fault={fault} mask={mask:?} scale={scale:?}");

    let mut got = out.clone();
    let result = (|| -> Result<(), KernelError> {
        let out_view = ViewMut::new(&mut got.data, q_len, width, out_stride)?;
        let (q_view, k_view, v_view) = (view(&q)?, view(&k)?, view(&v)?);
        if threads > 1 {
            let split = Split {
                parallel: &Reversed(threads),
                min_task_work: 1,
            };
            attention_split(
                isa,
                split,
                &shape,
                q_view,
                k_view,
                v_view,
                out_view,
                &mask,
                scale,
                &mut scratch,
            )
        } else {
            attention(
                isa,
                &shape,
                q_view,
                k_view,
                v_view,
                out_view,
                &mask,
                scale,
                &mut scratch,
            )
        }
    })();
    match result {
        Err(e) => {
            assert!(faulted, "{what}: valid call refused: {e}");
            got.assert_unchanged(&out, &what);
            return;
        }
        Ok(()) => assert!(!faulted, "{what}: faulty call accepted"),
    }
    got.assert_gaps_intact(&what);

    if width == 0 {
        // Nothing to compute: the kernel must not have written anything.
        got.assert_unchanged(&out, &what);
    }
    let mut want = out.clone();
    let mut acc = vec![0.0f64; d];
    reference::attention::attention(
        &shape,
        view(&q).expect("accepted"),
        view(&k).expect("accepted"),
        view(&v).expect("accepted"),
        ViewMut::new(&mut want.data, q_len, width, out_stride).expect("accepted"),
        &mask,
        scale,
        &mut acc,
    )
    .expect("the reference accepts what the kernel accepted");

    let finite_bias: Vec<f32> = bias_data
        .iter()
        .copied()
        .filter(|&b| b != f32::NEG_INFINITY)
        .collect();
    let inputs_tame = [&q, &k, &v]
        .iter()
        .all(|m| (0..m.rows).all(|r| (0..m.cols).all(|c| tame(&[m.get(r, c)]))))
        && (!has_bias || tame(&finite_bias));
    if !inputs_tame {
        return;
    }
    let max_abs = |m: &Guarded| {
        let mut x = 0.0f64;
        for r in 0..m.rows {
            for c in 0..m.cols {
                x = x.max(m.get(r, c).abs() as f64);
            }
        }
        x
    };
    let bias_max = if has_bias {
        finite_bias
            .iter()
            .fold(0.0f64, |m, &b| m.max(b.abs() as f64))
    } else {
        0.0
    };
    let scale_abs = scale.unwrap_or_else(|| default_scale(d)).abs() as f64;
    let score_abs_sum = scale_abs * d as f64 * max_abs(&q) * max_abs(&k) + bias_max;
    let delta = dot_tolerance(d + 2, score_abs_sum);
    let eps = f32::EPSILON as f64;
    let relative =
        4.0 * delta + 2.0 * EXP_MAX_RELATIVE_ERROR as f64 + (kv_len + d + 8) as f64 * eps;
    let bound = 2.0 * max_abs(&v) * relative + 1e-30 + eps;
    for i in 0..q_len {
        for c in 0..width {
            let at = format!("{what} out[{i},{c}]");
            assert_close(&at, got.get(i, c), want.get(i, c) as f64, bound);
        }
    }
}
