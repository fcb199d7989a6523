//! GEMM against `reference::gemm` with fuzzer-chosen weight types (f32, f16, bf16, bf16 with
//! the AVX-512 BF16 dot opt-in), shapes, strides, epilogues, thread counts, values (NaN, ±Inf,
//! subnormals) and injected argument faults, at every ISA level. Valid calls must match the
//! reference fed the same rounded operands (where they are tame) and write nothing outside
//! `C`'s view; refused calls must return a typed error and write nothing at all.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use tessel_fuzz::{assert_close, dot_tolerance, isa, maybe_short, span, tame, Guarded, Values};
use tessel_kernels::activation::Activation;
use tessel_kernels::gemm::{bf16, f16, gemm, gemm_scratch, packed_len_of, Element, Epilogue};
use tessel_kernels::gemm::{PackedB, Parallel, MAX_TASKS};
use tessel_kernels::{reference, Isa, KernelError, View, ViewMut};

#[derive(Arbitrary, Debug)]
struct Input {
    isa: u8,
    /// Weight type: f32, f16, bf16, bf16 with the BF16-dot opt-in.
    element: u8,
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

/// A weight type, and how it takes the BF16-dot opt-in (only `bf16` has it).
trait Weight: Element {
    fn with_dot(b: PackedB<Vec<Self>, Self>, _dot: bool) -> PackedB<Vec<Self>, Self> {
        b
    }

    /// Whether a call with `b` at `isa` rounds `A` to bf16.
    fn rounds_a(b: &PackedB<Vec<Self>, Self>, isa: Isa) -> bool {
        let _ = (b, isa);
        false
    }
}

impl Weight for f32 {}
impl Weight for f16 {}
impl Weight for bf16 {
    fn with_dot(b: PackedB<Vec<bf16>, bf16>, dot: bool) -> PackedB<Vec<bf16>, bf16> {
        b.with_bf16_dot(dot)
    }

    fn rounds_a(b: &PackedB<Vec<bf16>, bf16>, isa: Isa) -> bool {
        b.bf16_dot() && isa.has_avx512_bf16()
    }
}

fuzz_target!(|input: Input| match input.element % 4 {
    0 => run::<f32>(input, false),
    1 => run::<f16>(input, false),
    2 => run::<bf16>(input, false),
    _ => run::<bf16>(input, true),
});

/// `x` as the kernel sees it once rounded to `T`.
fn rounded<T: Element>(x: f32) -> f32 {
    T::from_f32(x).to_f32()
}

fn run<T: Weight>(input: Input, dot: bool) {
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
    // either must give the same bits, and so must packing the rounded values as `T`.
    let b_dense = gen.take(k * n);
    let b_rounded: Vec<f32> = b_dense.iter().map(|&x| rounded::<T>(x)).collect();
    let (kn_stride, nk_stride) = (n + pad(1), k + pad(1));
    let kn = Guarded::new(k, n, kn_stride, span(k, n, kn_stride), |r, c| {
        b_dense[r * n + c]
    });
    let nk = Guarded::new(n, k, nk_stride, span(n, k, nk_stride), |r, c| {
        b_dense[c * n + r]
    });
    let len = packed_len_of::<T>(k, n).expect("fuzzed shapes are small");
    let nan = || vec![T::from_f32(f32::NAN); len];
    let kn_view = View::new(&kn.data, k, n, kn_stride).expect("valid k × n source");
    let from_kn = PackedB::<_, T>::from_kn(nan(), kn_view).expect("valid k × n source");
    let nk_view = View::new(&nk.data, n, k, nk_stride).expect("valid n × k source");
    let from_nk = PackedB::<_, T>::from_nk(nan(), nk_view).expect("valid n × k source");
    let elems: Vec<T> = nk.data.iter().map(|&x| T::from_f32(x)).collect();
    let elems_view = View::new(&elems, n, k, nk_stride).expect("valid n × k elements");
    let from_elems = PackedB::<_, T>::from_nk(nan(), elems_view).expect("valid n × k elements");
    let bits = |b: &PackedB<Vec<T>, T>| -> Vec<u32> {
        b.as_slice().iter().map(|x| x.to_f32().to_bits()).collect()
    };
    assert!(
        bits(&from_kn) == bits(&from_nk) && bits(&from_kn) == bits(&from_elems),
        "{}: packing from k × n, n × k and n × k elements disagrees for k={k} n={n}",
        T::NAME
    );
    // Packing into storage of the wrong size, or from a short source, is refused.
    let zeros = |len: usize| vec![T::ZERO; len];
    assert!(PackedB::<_, T>::from_kn(zeros(len + 1), kn_view).is_err());
    if !kn.data.is_empty() {
        let short = &kn.data[..kn.data.len() - 1];
        assert!(View::new(short, k, n, kn_stride).is_err());
        assert!(View::new(&elems[1..], n, k, nk_stride).is_err());
    }
    assert!(PackedB::<_, T>::from_packed(zeros(len + 1), k, n).is_err());
    let from_kn = T::with_dot(from_kn, dot);
    let rounds_a = T::rounds_a(&from_kn, isa);

    // Operands, each possibly corrupted.
    let a_cols = if fault == 6 { k + 1 } else { k };
    // A's rows may overlap (a convolution's windows); the property test
    // `overlapping_rows_of_a_equal_their_copy` covers that, so A keeps a gap here.
    let a_stride = a_cols + pad(0);
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
    let activation = Activation::ALL[input.activation as usize % Activation::ALL.len()];
    let epilogue = |residual_view| Epilogue {
        bias: bias.then_some(&bias_vals[..]),
        activation,
        residual: residual_view,
    };
    let threads = 1 + input.threads as usize % (MAX_TASKS + 2);
    let runner = Reversed(threads);
    let spec = gemm_scratch(m, k, n, threads).len();
    let (scratch_len, scratch_short) = maybe_short(spec, fault == 4);
    let mut scratch = vec![f32::NAN; scratch_len];

    let faulted =
        a_short || c_short || r_short || scratch_short || fault == 3 || fault == 6 || fault == 7;

    let mut out = c.clone();
    let result = (|| -> Result<(), KernelError> {
        let residual_view = match residual {
            true => Some(View::new(&res.data, m, n, r_stride)?),
            false => None,
        };
        gemm(
            isa,
            View::new(&a.data, m, a_cols, a_stride)?,
            &from_kn,
            ViewMut::new(&mut out.data, c_rows, n, c_stride)?,
            &epilogue(residual_view),
            &mut scratch,
            &runner,
        )
    })();
    let what = format!(
        "{isa} {}{} m={m} k={k} n={n} fault={fault} threads={threads} {activation:?}",
        T::NAME,
        if rounds_a { "-dot" } else { "" }
    );
    match result {
        Err(e) => {
            assert!(faulted, "{what}: valid call refused: {e}");
            out.assert_unchanged(&c, &what);
            return;
        }
        Ok(()) => assert!(!faulted, "{what}: faulty call accepted"),
    }
    out.assert_gaps_intact(&what);

    // The reference on the same operands as the kernel computes with: B as the dense k × n
    // matrix of its rounded values, A rounded to bf16 on the BF16-dot path.
    let a_seen: Vec<f32> = a
        .data
        .iter()
        .map(|&x| if rounds_a { rounded::<bf16>(x) } else { x })
        .collect();
    let mut expected = vec![0.0f32; m * n];
    let residual_view = residual.then(|| View::new(&res.data, m, n, r_stride).expect("accepted"));
    let epilogue = epilogue(residual_view);
    reference::gemm::gemm(
        View::new(&a_seen, m, k, a_stride).expect("accepted"),
        View::new(&b_rounded, k, n, n).expect("dense"),
        ViewMut::new(&mut expected, m, n, n).expect("dense"),
        &epilogue,
    )
    .expect("the reference accepts what the kernel accepted");
    let eps = f32::EPSILON as f64;
    for i in 0..m {
        for j in 0..n {
            let row: Vec<f32> = (0..k).map(|p| a_seen[i * a_stride + p]).collect();
            let col: Vec<f32> = (0..k).map(|p| b_rounded[p * n + j]).collect();
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
            let (slope, own) = (activation.max_slope(), activation.max_error(pre));
            let want = expected[i * n + j];
            // `vdpbf16ps` flushes subnormal inputs and outputs: products below 2^-126 · 1e15.
            let flushed = if rounds_a { k as f64 * 1.2e-23 } else { 0.0 };
            let bound =
                slope * (pre_error + flushed) + own + 4.0 * eps * (want.abs() as f64 + pre.abs());
            assert_close(
                &format!("{what} C[{i},{j}]"),
                out.get(i, j),
                want as f64,
                bound,
            );
        }
    }
}
