//! GEMM against `reference::gemm` with fuzzer-chosen shapes, strides, epilogues, thread
//! counts, values (NaN, ±Inf, subnormals) and injected argument faults, at every ISA level.
//! Valid calls must match the reference (where the inputs are tame) and write nothing outside
//! `C`'s view; refused calls must return a typed error and write nothing at all.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel_fuzz::{assert_close, dot_tolerance, isa, maybe_short, span, tame, Guarded, Values};
use tessel_kernels::activation::{Activation, GELU_ERF_MAX_ERROR, GELU_TANH_MAX_ERROR};
use tessel_kernels::gemm::{gemm, gemm_scratch, packed_len, Epilogue, MatMut, MatRef, PackedB};
use tessel_kernels::gemm::{Parallel, MAX_TASKS};
use tessel_kernels::reference;

#[derive(Arbitrary, Debug)]
struct Input {
    isa: u8,
    m: u8,
    k: u8,
    n: u8,
    /// Extra stride of A, of the packing source, of C and of the residual.
    pads: [u8; 4],
    bias: bool,
    residual: bool,
    activation: u8,
    threads: u8,
    /// Which argument to corrupt (most values: none).
    fault: u8,
    specials: bool,
    values: Vec<u16>,
}

/// A runner claiming `threads` threads that runs the tasks on the calling thread in reverse
/// order (results must not depend on the order or the split).
struct Reversed(usize);

impl Parallel for Reversed {
    fn threads(&self) -> usize {
        self.0
    }

    fn run(&self, tasks: usize, task: &(dyn Fn(usize) + Sync)) {
        for i in (0..tasks).rev() {
            task(i);
        }
    }
}

const ACTIVATIONS: [Activation; 4] = [
    Activation::Identity,
    Activation::Relu,
    Activation::GeluErf,
    Activation::GeluTanh,
];

fuzz_target!(|input: Input| run(input));

fn run(input: Input) {
    let isa = isa(input.isa);
    let (m, k, n) = (
        input.m as usize % 41,
        input.k as usize % 71,
        input.n as usize % 71,
    );
    let pad = |i: usize| input.pads[i] as usize % 5;
    let fault = input.fault % 24;
    let mut gen = Values::new(&input.values, input.specials);

    // B as a row-major k × n source and its transpose (n × k), both with a stride gap; packing
    // either must give the same bits.
    let b_dense = gen.take(k * n);
    let (kn_stride, nk_stride) = (n + pad(1), k + pad(1));
    let kn = Guarded::new(k, n, kn_stride, span(k, n, kn_stride), |r, c| {
        b_dense[r * n + c]
    });
    let nk = Guarded::new(n, k, nk_stride, span(n, k, nk_stride), |r, c| {
        b_dense[c * n + r]
    });
    let len = packed_len(k, n).expect("fuzzed shapes are small");
    let from_kn = PackedB::from_kn(vec![f32::NAN; len], MatRef::new(&kn.data, k, n, kn_stride))
        .expect("valid k × n source");
    let from_nk = PackedB::from_nk(vec![f32::NAN; len], MatRef::new(&nk.data, n, k, nk_stride))
        .expect("valid n × k source");
    let same = from_kn
        .as_slice()
        .iter()
        .zip(from_nk.as_slice())
        .all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(same, "from_kn and from_nk disagree for k={k} n={n}");
    // Packing into storage of the wrong size, or from a short source, is refused.
    assert!(PackedB::from_kn(vec![0.0; len + 1], MatRef::new(&kn.data, k, n, kn_stride)).is_err());
    if !kn.data.is_empty() {
        let short = &kn.data[..kn.data.len() - 1];
        assert!(PackedB::from_kn(vec![0.0; len], MatRef::new(short, k, n, kn_stride)).is_err());
    }
    assert!(PackedB::from_packed(vec![0.0; len + 1], k, n).is_err());

    // Operands, each possibly corrupted.
    let a_cols = if fault == 6 { k + 1 } else { k };
    let a_stride = if fault == 5 && m > 1 && a_cols > 0 {
        a_cols - 1
    } else {
        a_cols + pad(0)
    };
    let (a_len, a_short) = maybe_short(span(m, a_cols, a_stride), fault == 0);
    let a_vals = gen.take(m * a_cols);
    let a = Guarded::new(m, a_cols, a_stride, a_len, |r, c| a_vals[r * a_cols + c]);
    let c_rows = if fault == 7 { m + 1 } else { m };
    let c_stride = n + pad(2);
    let (c_len, c_short) = maybe_short(span(c_rows, n, c_stride), fault == 1);
    let c = Guarded::new(c_rows, n, c_stride, c_len, |_, _| f32::NAN);
    let bias_len = if fault == 3 { n + 1 } else { n };
    let bias = input.bias || fault == 3;
    let bias_vals = gen.take(bias_len);
    let residual = input.residual || fault == 2;
    let r_stride = n + pad(3);
    let (r_len, r_short) = maybe_short(span(m, n, r_stride), fault == 2);
    let r_vals = gen.take(m * n);
    let res = Guarded::new(m, n, r_stride, r_len, |r, c| r_vals[r * n + c]);
    let activation = ACTIVATIONS[input.activation as usize % 4];
    let epilogue = Epilogue {
        bias: bias.then_some(&bias_vals[..]),
        activation,
        residual: residual.then(|| MatRef::new(&res.data, m, n, r_stride)),
    };
    let threads = 1 + input.threads as usize % (MAX_TASKS + 2);
    let runner = Reversed(threads);
    let spec = gemm_scratch(m, k, n, threads).len();
    let (scratch_len, scratch_short) = maybe_short(spec, fault == 4);
    let mut scratch = vec![f32::NAN; scratch_len];

    let faulted = a_short
        || c_short
        || r_short
        || scratch_short
        || fault == 3
        || (fault == 5 && m > 1 && a_cols > 0)
        || fault == 6
        || fault == 7;

    let mut out = c.clone();
    let result = gemm(
        isa,
        MatRef::new(&a.data, m, a_cols, a_stride),
        &from_kn,
        MatMut::new(&mut out.data, c_rows, n, c_stride),
        &epilogue,
        &mut scratch,
        &runner,
    );
    let what = format!("{isa} m={m} k={k} n={n} fault={fault} threads={threads} {activation:?}");
    match result {
        Err(e) => {
            assert!(faulted, "{what}: valid call refused: {e}");
            out.assert_unchanged(&c, &what);
            return;
        }
        Ok(()) => assert!(!faulted, "{what}: faulty call accepted"),
    }
    out.assert_gaps_intact(&what);

    // The reference on the same operands (B as the dense k × n matrix).
    let mut expected = vec![0.0f32; m * n];
    reference::gemm::gemm(
        MatRef::new(&a.data, m, k, a_stride),
        MatRef::new(&b_dense, k, n, n),
        MatMut::new(&mut expected, m, n, n),
        &epilogue,
    )
    .expect("the reference accepts what the kernel accepted");
    let eps = f32::EPSILON as f64;
    for i in 0..m {
        for j in 0..n {
            let row: Vec<f32> = (0..k).map(|p| a.get(i, p)).collect();
            let col: Vec<f32> = (0..k).map(|p| b_dense[p * n + j]).collect();
            let b = if bias { bias_vals[j] } else { 0.0 };
            let r = if residual { res.get(i, j) } else { 0.0 };
            if !(tame(&row) && tame(&col) && tame(&[b, r])) {
                continue;
            }
            let abs_sum: f64 = row
                .iter()
                .zip(&col)
                .map(|(&x, &y)| (x as f64 * y as f64).abs())
                .sum();
            let pre: f64 = row
                .iter()
                .zip(&col)
                .map(|(&x, &y)| x as f64 * y as f64)
                .sum::<f64>()
                + b as f64;
            let pre_error = dot_tolerance(k, abs_sum) + 2.0 * eps * (pre.abs() + (b as f64).abs());
            let (slope, own) = match activation {
                Activation::Identity | Activation::Relu => (1.0, 0.0),
                Activation::GeluErf => (1.2, GELU_ERF_MAX_ERROR as f64 * pre.abs().max(1.0)),
                Activation::GeluTanh => (1.2, GELU_TANH_MAX_ERROR as f64 * pre.abs().max(1.0)),
            };
            let want = expected[i * n + j];
            let bound = slope * pre_error + own + 4.0 * eps * (want.abs() as f64 + pre.abs());
            assert_close(
                &format!("{what} C[{i},{j}]"),
                out.get(i, j),
                want as f64,
                bound,
            );
        }
    }
}
