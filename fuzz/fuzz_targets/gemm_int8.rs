//! int8 GEMM with fuzzer-chosen weights: CTranslate2 variables (bytes including -128, scales
//! including NaN, zero and negative values) or raw packed bytes, shapes, activations (NaN, ±Inf,
//! subnormals), strides and thread counts, at every ISA level and every int8 primitive it runs.
//! Loaders must refuse bad input with a typed error; accepted CTranslate2 weights must give `i32`
//! sums bit-identical to the reference; no call may write outside `C`'s view.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel_fuzz::{isa, span, Guarded, Values};
use tessel_kernels::gemm::int8::{
    gemm_i32, gemm_i8_scratch, gemm_i8_with, packed_i8_len, I8Kernel, PackedI8,
};
use tessel_kernels::gemm::{Epilogue, Parallel, MAX_TASKS};
use tessel_kernels::reference::gemm_int8 as reference;
use tessel_kernels::{View, ViewMut};

#[derive(Arbitrary, Debug)]
struct Input {
    isa: u8,
    m: u8,
    k: u8,
    n: u8,
    pads: [u8; 2],
    /// Raw packed bytes instead of CTranslate2 variables.
    raw: bool,
    threads: u8,
    specials: bool,
    weights: Vec<i8>,
    scales: Vec<u16>,
    activations: Vec<u16>,
}

/// A runner claiming `threads` threads that runs the tasks on the calling thread in reverse.
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

fuzz_target!(|input: Input| {
    let isa = isa(input.isa);
    let (m, k, n) = (
        input.m as usize % 19,
        input.k as usize % 71,
        input.n as usize % 71,
    );
    let len = packed_i8_len(k, n).expect("small shapes");
    let byte = |i: usize| -> i8 {
        match input.weights.len() {
            0 => (i % 255) as i8,
            l => input.weights[i % l],
        }
    };
    let b = if input.raw {
        let data: Vec<i8> = (0..len).map(byte).collect();
        match PackedI8::from_packed(data, k, n) {
            Ok(b) => b,
            Err(_) => return,
        }
    } else {
        let q: Vec<i8> = (0..n * k).map(byte).collect();
        let mut gen = Values::new(&input.scales, input.specials);
        let scales = gen.take(n);
        let valid = !q.contains(&i8::MIN) && scales.iter().all(|s| s.is_finite() && *s > 0.0);
        match PackedI8::from_ct2(vec![0; len], &q, &scales, n, k) {
            Ok(b) => {
                assert!(valid, "invalid CTranslate2 variables accepted");
                check_sums(&b, &q, m, k, n, isa);
                b
            }
            Err(_) => {
                assert!(!valid, "valid CTranslate2 variables refused");
                return;
            }
        }
    };

    // The f32 path on fuzzed activations: nothing outside C is written; rows with a NaN or an
    // infinity give NaN, every other output is finite wherever the weights' factors are.
    let mut gen = Values::new(&input.activations, input.specials);
    let (lda, ldc) = (
        k + input.pads[0] as usize % 4,
        n + input.pads[1] as usize % 4,
    );
    let a_vals = gen.take(m * k);
    let a = Guarded::new(m, k, lda, span(m, k, lda), |r, c| a_vals[r * k + c]);
    let c = Guarded::new(m, n, ldc, span(m, n, ldc), |_, _| f32::NAN);
    let threads = 1 + input.threads as usize % (MAX_TASKS + 2);
    for kernel in I8Kernel::available(isa) {
        let mut out = c.clone();
        let mut scratch = vec![f32::NAN; gemm_i8_scratch(m, k).len()];
        gemm_i8_with(
            kernel,
            View::new(&a.data, m, k, lda).expect("valid view"),
            &b,
            ViewMut::new(&mut out.data, m, n, ldc).expect("valid view"),
            &Epilogue::NONE,
            &mut scratch,
            &Reversed(threads),
        )
        .expect("valid call");
        out.assert_gaps_intact(&format!("{kernel} m={m} k={k} n={n}"));
    }
});

/// `gemm_i32` at every primitive against the reference sums of `q` (`n × k`).
fn check_sums(
    b: &PackedI8<Vec<i8>>,
    q: &[i8],
    m: usize,
    k: usize,
    n: usize,
    isa: tessel_kernels::Isa,
) {
    let a: Vec<i8> = (0..m * k)
        .map(|i| (i * 37 % 255) as i8)
        .map(|v| v.max(-127))
        .collect();
    for kernel in I8Kernel::available(isa) {
        let mut c = vec![0x5A5A_5A5A; m * n];
        let mut scratch = vec![f32::NAN; gemm_i8_scratch(m, k).len()];
        gemm_i32(
            kernel,
            View::new(&a, m, k, k).expect("valid view"),
            b,
            ViewMut::new(&mut c, m, n, n).expect("valid view"),
            &mut scratch,
        )
        .expect("valid call");
        for i in 0..m {
            for j in 0..n {
                let want = reference::sum(&a, q, k, i, j).expect("fits i32");
                assert_eq!(c[i * n + j], want, "{kernel} m={m} k={k} n={n} S[{i}][{j}]");
            }
        }
    }
}
