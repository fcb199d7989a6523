//! int8 GEMM at every ISA level and every int8 primitive the machine runs (AVX2 and AVX-VNNI,
//! AVX-512 BW and VNNI, NEON with and without `sdot`, scalar):
//! - the `i32` sums are bit-identical to the reference's `i64` sums, over awkward shapes and
//!   strides, random and extreme (±127) values, with canaries around the output;
//! - the `f32` product with every epilogue matches the `f64` reference fed the same quantised
//!   operands, within the bound of its three `f32` roundings and the epilogue, with NaN canaries
//!   around `C`, for any thread split;
//! - both quantisers equal the reference quantiser byte for byte and keep their stated round
//!   trip bound; the CTranslate2 loader keeps the bytes and scales as they are;
//! - bad input is a typed error.

use crate::gemm_support;

use gemm_support::{spec, Spec, Values};
use proptest::prelude::*;
use tessel_kernels::activation::Activation;
use tessel_kernels::gemm::int8::{
    gemm_i32, gemm_i8_scratch, gemm_i8_with, packed_i8_len, quantize_activations, I8Kernel,
    PackedI8, MAX_K,
};
use tessel_kernels::gemm::{bf16, f16, Element, Epilogue, Parallel, Sequential};
use tessel_kernels::reference::gemm_int8 as reference;
use tessel_kernels::{Isa, KernelError};
use tessel_kernels::{View, ViewMut};
use tessel_tests::runners::Reversed;
use tessel_tests::{assert_close, awkward_dim, cases, for_each_isa, CanaryMatrix};

/// Every (level, primitive) pair this run covers.
fn for_each_kernel(mut check: impl FnMut(Isa, I8Kernel)) {
    for_each_isa(|isa| {
        for kernel in I8Kernel::available(isa) {
            check(isa, kernel);
        }
    });
}

/// The canary of `i32` outputs.
const I32_CANARY: i32 = 0x5A5A_5A5A;
const I32_PAD: usize = 7;

/// Packs `q` (`n × k`, channels' quantised weights) as CTranslate2 stores them, with `scales`.
fn pack_ct2(q: &[i8], scales: &[f32], n: usize, k: usize) -> PackedI8<Vec<i8>> {
    let storage = vec![0x55; packed_i8_len(k, n).unwrap()];
    PackedI8::from_ct2(storage, q, scales, n, k).unwrap()
}

/// Checks `gemm_i32` at every primitive against the reference sums, for `a` (`m × k` with
/// row stride `lda`) and `w` (`n × k`).
fn check_sums(a: &[i8], lda: usize, w: &[i8], m: usize, k: usize, n: usize, ldc: usize) {
    let dense: Vec<i8> = (0..m)
        .flat_map(|i| a[i * lda..i * lda + k].iter().copied())
        .collect();
    let expected: Vec<i32> = (0..m * n)
        .map(|idx| reference::sum(&dense, w, k, idx / n.max(1), idx % n.max(1)).unwrap())
        .collect();
    let b = pack_ct2(w, &vec![1.0; n], n, k);
    for_each_kernel(|isa, kernel| {
        let view = if m == 0 || n == 0 {
            0
        } else {
            (m - 1) * ldc + n
        };
        let mut c = vec![I32_CANARY; view + 2 * I32_PAD];
        let mut scratch = vec![f32::NAN; gemm_i8_scratch(m, k).len()];
        let a_view =
            View::new(&a[..if m == 0 { 0 } else { (m - 1) * lda + k }], m, k, lda).unwrap();
        let c_view = ViewMut::new(&mut c[I32_PAD..I32_PAD + view], m, n, ldc).unwrap();
        gemm_i32(kernel, a_view, &b, c_view, &mut scratch).unwrap();
        for (idx, &value) in c.iter().enumerate() {
            let inside = idx >= I32_PAD && idx - I32_PAD < view && (idx - I32_PAD) % ldc < n;
            if inside {
                let (i, j) = ((idx - I32_PAD) / ldc, (idx - I32_PAD) % ldc);
                assert_eq!(
                    value,
                    expected[i * n + j],
                    "{isa}/{kernel} {m}x{k}x{n}: S[{i}][{j}]"
                );
            } else {
                assert_eq!(
                    value, I32_CANARY,
                    "{isa}/{kernel}: canary {idx} overwritten"
                );
            }
        }
    });
}

/// An `i8` in `[-127, 127]`: uniform, or (one time in four) an extreme `±127`.
fn int8(v: &mut Values) -> i8 {
    let r = v.next_u64();
    if r.is_multiple_of(4) {
        if r & 8 == 0 {
            127
        } else {
            -127
        }
    } else {
        ((r >> 8) % 255) as i8 as i16 as i8
    }
    .clamp(-127, 127)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]

    #[test]
    fn i32_sums_are_bit_identical_to_the_reference(
        m in awkward_dim(21),
        k in awkward_dim(300),
        n in awkward_dim(100),
        pads in (0usize..6, 0usize..6),
        seed in any::<u64>(),
    ) {
        let mut v = Values(seed | 1);
        let lda = k + pads.0;
        let a: Vec<i8> = (0..m * lda).map(|_| int8(&mut v)).collect();
        let w: Vec<i8> = (0..n * k).map(|_| int8(&mut v)).collect();
        check_sums(&a, lda, &w, m, k, n, n + pads.1);
    }

    #[test]
    fn f32_products_match_the_reference(spec in spec(awkward_dim(20), 150)) {
        check_f32(&spec);
    }

    #[test]
    fn quantisers_match_the_reference_and_their_bound(
        rows in awkward_dim(9),
        k in awkward_dim(400),
        magnitude in -30i32..30,
        seed in any::<u64>(),
    ) {
        check_quantisers(rows, k, 2f32.powi(magnitude), seed);
    }
}

/// The round trip bound where it is tight: rows whose products `x · scale` land next to
/// half-integers, the case in which `f32` rounding pushes the error past `amax / 254`.
#[test]
fn quantiser_bound_holds_next_to_half_integers() {
    for amax in [8151.698f32, 1.0, 3.0e-5, 0.8137, 6.0e4] {
        let scale = 127.0 / amax;
        let row: Vec<f32> = (0..=254)
            .flat_map(|h| {
                let centre = (h as f32 - 127.0 + 0.5) / scale;
                (-8i32..=8).map(move |ulps| {
                    f32::from_bits(centre.to_bits().wrapping_add_signed(ulps)).clamp(-amax, amax)
                })
            })
            .chain([amax])
            .collect();
        let mut q = vec![0i8; row.len()];
        let d = reference::quantize(&row, &mut q);
        let limit = f64::from(amax) / 254.0 * (1.0 + 2f64.powi(-14));
        let mut worst = 0.0f64;
        for (&x, &q) in row.iter().zip(&q) {
            let error = (f64::from(x) - f64::from(q) * f64::from(d)).abs();
            assert!(error <= limit, "{x} -> {q} · {d}: {error} > {limit}");
            worst = worst.max(error);
        }
        // The rows reach past the exact-arithmetic bound, so the test exercises the margin.
        assert!(
            worst > f64::from(amax) / 254.0,
            "amax {amax}: worst {worst}"
        );
    }
}

/// The extremes: every product `±127²`, every `vpmaddubsw` pair at its largest `2 · 127²`, and
/// a depth whose sums are far beyond `i16` (and, with the VNNI offset, beyond `2^24`).
#[test]
fn extreme_values_are_exact() {
    let (m, k, n) = (9, 4099, 33);
    for (a_value, w_value) in [(127i8, 127i8), (-127, 127), (-127, -127), (127, -127)] {
        let a = vec![a_value; m * k];
        let w = vec![w_value; n * k];
        check_sums(&a, k, &w, m, k, n, n);
    }
    let mut v = Values(99);
    let a: Vec<i8> = (0..m * k)
        .map(|_| {
            if v.next_u64().is_multiple_of(2) {
                127
            } else {
                -127
            }
        })
        .collect();
    let w: Vec<i8> = (0..n * k)
        .map(|_| {
            if v.next_u64().is_multiple_of(2) {
                127
            } else {
                -127
            }
        })
        .collect();
    check_sums(&a, k, &w, m, k, n, n);
}

/// Depth 0 with an empty `A` whose stride is not 0 (the view of `m` empty rows): every sum is 0
/// and every output its bias, whatever the scratch held before.
#[test]
fn depth_zero_sums_are_zero() {
    let (m, k, n) = (9, 0, 5);
    let b = pack_ct2(&[], &vec![1.0; n], n, k);
    let bias: Vec<f32> = (0..n).map(|j| j as f32 - 2.0).collect();
    let epilogue = Epilogue {
        bias: Some(&bias),
        activation: Activation::Identity,
        residual: None,
    };
    for_each_kernel(|_, kernel| {
        let mut scratch = vec![f32::from_bits(0x7F7F_7F7F); gemm_i8_scratch(m, k).len()];
        let mut sums = vec![I32_CANARY; m * n];
        let a = View::new(&[], m, k, 1).unwrap();
        let c = ViewMut::new(&mut sums, m, n, n).unwrap();
        gemm_i32(kernel, a, &b, c, &mut scratch).unwrap();
        assert!(sums.iter().all(|&s| s == 0), "{kernel}: {sums:?}");
        scratch.fill(f32::from_bits(0x7F7F_7F7F));
        let mut c = vec![f32::NAN; m * n];
        let a = View::new(&[], m, k, 1).unwrap();
        let view = ViewMut::new(&mut c, m, n, n).unwrap();
        gemm_i8_with(kernel, a, &b, view, &epilogue, &mut scratch, &Sequential).unwrap();
        for (idx, &got) in c.iter().enumerate() {
            assert_eq!(got, bias[idx % n], "{kernel}: output {idx}");
        }
    });
    let mut dequant = vec![f32::NAN; m];
    quantize_activations(View::new(&[], m, k, 1).unwrap(), &mut [], &mut dequant).unwrap();
    assert!(dequant.iter().all(|&d| d == 0.0), "{dequant:?}");
}

/// Row `i` of `a` (stride `lda`).
fn row(a: &[f32], lda: usize, k: usize, i: usize) -> &[f32] {
    &a[i * lda..i * lda + k]
}

/// The f32 path for one spec at every primitive, against the reference on the same quantised
/// operands, with the packing and quantisation checked byte for byte on the way.
fn check_f32(spec: &Spec) {
    let problem = spec.problem(Values::uniform);
    let (m, k, n) = (problem.m, problem.k, problem.n);
    let w = problem.b_nk();
    let mut w_q = vec![0i8; n * k];
    let w_d: Vec<f32> = (0..n)
        .map(|j| reference::quantize(&w[j * k..j * k + k], &mut w_q[j * k..j * k + k]))
        .collect();
    let mut a_q = vec![0i8; m * k];
    let a_d: Vec<f32> = (0..m)
        .map(|i| reference::quantize(row(&problem.a, problem.lda, k, i), &mut a_q[i * k..][..k]))
        .collect();
    let b = PackedI8::quantize_nk(vec![0; packed_i8_len(k, n).unwrap()], &w, n, k, k).unwrap();
    assert_packed(&b, &w_q, &w_d);
    let epilogue = problem.epilogue();
    let mut expected = CanaryMatrix::new(m, n, problem.ldc);
    let view = ViewMut::new(expected.view_mut(), m, n, problem.ldc).unwrap();
    reference::gemm((&a_q, &a_d), (&w_q, &w_d), k, view, &epilogue).unwrap();
    let values: Vec<f32> = expected.elements().collect();
    let bound = |idx: usize| {
        let (i, j) = (idx / n.max(1), idx % n.max(1));
        let s = f64::from(reference::sum(&a_q, &w_q, k, i, j).unwrap());
        let dequantised = s * f64::from(a_d[i]) * f64::from(w_d[j]);
        let bias = problem.bias.as_ref().map_or(0.0, |b| f64::from(b[j]));
        let pre = dequantised + bias;
        let eps = f64::from(f32::EPSILON);
        // Three f32 roundings of the dequantisation (sum to f32, two products), the bias
        // addition, then the activation's slope and own error and the residual addition.
        let pre_error = 3.0 * eps * dequantised.abs() + eps * pre.abs();
        let act = problem.activation;
        act.max_slope() * pre_error
            + act.max_error(pre)
            + 4.0 * eps * (f64::from(values[idx].abs()) + pre.abs())
    };
    let run = |kernel: I8Kernel, parallel: &dyn Parallel| {
        let mut c = CanaryMatrix::new(m, n, problem.ldc);
        let mut scratch = vec![f32::NAN; gemm_i8_scratch(m, k).len()];
        let view = ViewMut::new(c.view_mut(), m, n, problem.ldc).unwrap();
        gemm_i8_with(
            kernel,
            problem.a(),
            &b,
            view,
            &epilogue,
            &mut scratch,
            parallel,
        )
        .unwrap();
        c.assert_padding_intact(&format!("{kernel} C"));
        c
    };
    for_each_kernel(|isa, kernel| {
        let c = run(kernel, &Sequential);
        let what = format!("{isa}/{kernel} {spec:?}");
        assert_close(
            &what,
            c.elements(),
            values.iter().map(|&v| f64::from(v)),
            bound,
        );
        let split = run(kernel, &Reversed(3));
        let same = c
            .elements()
            .zip(split.elements())
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "{what}: a 3-task split changed the result");
    });
}

/// Every row of an int8 product holds the bits it would hold computed alone, at every
/// primitive: activations are quantised per row and the sums are exact, so a row does not
/// depend on how many rows share the call (what lets a batch decode exactly as each alone).
#[test]
fn a_row_does_not_depend_on_the_rows_beside_it() {
    for (m, k, n) in [(5, 301, 97), (23, 1030, 97), (64, 257, 65)] {
        let spec = gemm_support::Spec {
            m,
            k,
            n,
            pads: (3, 1, 2),
            bias: true,
            activation: 2,
            residual: true,
            source: true,
            seed: (m * 1_000_003 + k * 1009 + n) as u64,
        };
        let problem = spec.problem(Values::uniform);
        let w = problem.b_nk();
        let b = PackedI8::quantize_nk(vec![0; packed_i8_len(k, n).unwrap()], &w, n, k, k).unwrap();
        let run = |kernel: I8Kernel, problem: &gemm_support::Problem| -> Vec<f32> {
            let mut c = CanaryMatrix::new(problem.m, n, problem.ldc);
            let mut scratch = vec![f32::NAN; gemm_i8_scratch(problem.m, k).len()];
            let view = ViewMut::new(c.view_mut(), problem.m, n, problem.ldc).unwrap();
            let epilogue = problem.epilogue();
            gemm_i8_with(
                kernel,
                problem.a(),
                &b,
                view,
                &epilogue,
                &mut scratch,
                &Sequential,
            )
            .unwrap();
            c.elements().collect()
        };
        for_each_kernel(|isa, kernel| {
            let full = run(kernel, &problem);
            for i in 0..m {
                let alone = run(kernel, &problem.row(i));
                let same = alone
                    .iter()
                    .zip(&full[i * n..(i + 1) * n])
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(
                    same,
                    "{isa}/{kernel} {m}x{k}x{n}: row {i} differs from the row alone"
                );
            }
        });
    }
}

/// Checks the packed bytes, factors and channel sums against the reference quantiser's.
fn assert_packed(b: &PackedI8<Vec<i8>>, w_q: &[i8], w_d: &[f32]) {
    let (k, n) = (b.k(), b.n());
    for j in 0..n {
        let row = &w_q[j * k..j * k + k];
        for (p, &q) in row.iter().enumerate() {
            assert_eq!(b.get(j, p), Some(q), "q[{j}][{p}]");
        }
        assert_eq!(
            b.dequant(j).map(f32::to_bits),
            Some(w_d[j].to_bits()),
            "d[{j}]"
        );
        let sum: i32 = row.iter().map(|&q| i32::from(q)).sum();
        assert_eq!(b.channel_sum(j), Some(sum), "sum[{j}]");
    }
    assert_eq!(b.get(n, 0), None);
    assert_eq!(b.get(0, k), None);
}

/// Both quantisers (weights from f32, f16 and bf16; activations) against the reference, and
/// the stated round trip bound `|x - q · d| <= amax / 254 · (1 + 2^-14)`.
fn check_quantisers(rows: usize, k: usize, magnitude: f32, seed: u64) {
    let mut v = Values(seed | 1);
    let x: Vec<f32> = (0..rows * k).map(|_| v.uniform() * magnitude).collect();
    let mut q = vec![0i8; rows * k];
    let mut d = vec![0.0f32; rows];
    quantize_activations(View::new(&x, rows, k, k).unwrap(), &mut q, &mut d).unwrap();
    let b =
        PackedI8::quantize_nk(vec![0; packed_i8_len(k, rows).unwrap()], &x, rows, k, k).unwrap();
    for i in 0..rows {
        let xi = &x[i * k..i * k + k];
        let mut q_ref = vec![0i8; k];
        let d_ref = reference::quantize(xi, &mut q_ref);
        assert_eq!(&q[i * k..i * k + k], &q_ref[..], "activation row {i}");
        assert_eq!(d[i].to_bits(), d_ref.to_bits(), "activation factor {i}");
        let amax = xi.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let limit = f64::from(amax) / 254.0 * (1.0 + 2f64.powi(-14));
        for (p, &value) in xi.iter().enumerate() {
            let back = f64::from(q_ref[p]) * f64::from(d_ref);
            assert!(
                (f64::from(value) - back).abs() <= limit,
                "row {i} col {p}: {value} -> {back} (bound {limit})"
            );
            assert_eq!(b.get(i, p), Some(q_ref[p]), "weight {i},{p}");
        }
        assert_eq!(b.dequant(i).map(f32::to_bits), Some(d_ref.to_bits()));
    }
    check_half::<f16>(&x, rows, k);
    check_half::<bf16>(&x, rows, k);
}

/// Weights given as `T` quantise like their `f32` values (or, where `T` overflows to
/// infinity, are refused).
fn check_half<T: Element>(x: &[f32], n: usize, k: usize) {
    let halves: Vec<T> = x.iter().map(|&v| T::from_f32(v)).collect();
    let widened: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
    let len = packed_i8_len(k, n).unwrap();
    if widened.iter().any(|v| !v.is_finite()) {
        let refused = PackedI8::quantize_nk(vec![0; len], &halves, n, k, k);
        assert!(matches!(refused, Err(KernelError::InvalidArgument(_))));
        return;
    }
    let from_t = PackedI8::quantize_nk(vec![0; len], &halves, n, k, k).unwrap();
    let from_f32 = PackedI8::quantize_nk(vec![0; len], &widened, n, k, k).unwrap();
    assert_eq!(from_t.as_slice(), from_f32.as_slice(), "{}", T::NAME);
}

/// Zero, tiny and non-finite rows: zeros with factor 0, or NaN outputs for the whole row.
#[test]
fn special_rows() {
    let (m, k, n) = (4, 37, 19);
    let mut a = vec![0.5f32; m * k];
    a[k..2 * k].fill(0.0);
    a[2 * k..3 * k].fill(1e-38);
    a[3 * k + 5] = f32::INFINITY;
    let w: Vec<f32> = (0..n * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let b = PackedI8::quantize_nk(vec![0; packed_i8_len(k, n).unwrap()], &w, n, k, k).unwrap();
    let bias: Vec<f32> = (0..n).map(|j| j as f32).collect();
    let epilogue = Epilogue {
        bias: Some(&bias),
        activation: Activation::Identity,
        residual: None,
    };
    for_each_kernel(|isa, kernel| {
        let mut c = CanaryMatrix::new(m, n, n);
        let mut scratch = vec![f32::NAN; gemm_i8_scratch(m, k).len()];
        let view = ViewMut::new(c.view_mut(), m, n, n).unwrap();
        let a_view = View::new(&a, m, k, k).unwrap();
        gemm_i8_with(
            kernel,
            a_view,
            &b,
            view,
            &epilogue,
            &mut scratch,
            &Sequential,
        )
        .unwrap();
        c.assert_padding_intact("special rows");
        for (j, &bias_j) in bias.iter().enumerate() {
            assert_eq!(c.get(1, j), bias_j, "{isa}/{kernel}: zero row, column {j}");
            assert_eq!(c.get(2, j), bias_j, "{isa}/{kernel}: tiny row, column {j}");
            assert!(
                c.get(3, j).is_nan(),
                "{isa}/{kernel}: infinite row, column {j}"
            );
            assert!(
                c.get(0, j).is_finite(),
                "{isa}/{kernel}: plain row, column {j}"
            );
        }
    });
}

/// CTranslate2's variables are kept as they are: bytes, `1 / scale` factors, channel sums.
#[test]
fn ct2_variables_pack_unchanged() {
    let (n, k) = (35, 9);
    let mut v = Values(7);
    let q: Vec<i8> = (0..n * k).map(|_| int8(&mut v)).collect();
    let scales: Vec<f32> = (0..n).map(|j| 10.0 + j as f32 * 0.37).collect();
    let b = pack_ct2(&q, &scales, n, k);
    let d: Vec<f32> = scales.iter().map(|s| 1.0 / s).collect();
    assert_packed(&b, &q, &d);
    let again = PackedI8::from_packed(b.as_slice(), k, n).unwrap();
    assert_eq!(again.get(3, 4), b.get(3, 4));
}

#[test]
fn bad_input_is_a_typed_error() {
    let (n, k) = (3, 5);
    let len = packed_i8_len(k, n).unwrap();
    let q = vec![1i8; n * k];
    let mut bad_q = q.clone();
    bad_q[4] = -128;
    let invalid = |r: Result<PackedI8<Vec<i8>>, KernelError>| {
        assert!(matches!(r, Err(KernelError::InvalidArgument(_))), "{r:?}");
    };
    invalid(PackedI8::from_ct2(vec![0; len], &bad_q, &[1.0; 3], n, k));
    invalid(PackedI8::from_ct2(vec![0; len], &q, &[1.0, 0.0, 1.0], n, k));
    invalid(PackedI8::from_ct2(
        vec![0; len],
        &q,
        &[1.0, f32::NAN, 1.0],
        n,
        k,
    ));
    invalid(PackedI8::quantize_nk(
        vec![0; len],
        &[f32::INFINITY; 15],
        n,
        k,
        k,
    ));
    assert!(matches!(
        PackedI8::from_ct2(vec![0; len + 1], &q, &[1.0; 3], n, k),
        Err(KernelError::ShapeMismatch { .. })
    ));
    assert!(matches!(
        PackedI8::from_ct2(vec![0; len], &q, &[1.0; 2], n, k),
        Err(KernelError::ShapeMismatch { .. })
    ));
    assert!(packed_i8_len(MAX_K + 1, 1).is_err());
    assert!(packed_i8_len(MAX_K, usize::MAX).is_err());
    let mut corrupt = pack_ct2(&q, &[1.0; 3], n, k).into_inner();
    *corrupt.last_mut().unwrap() = -128;
    assert!(PackedI8::from_packed(corrupt, k, n).is_err());

    let b = pack_ct2(&q, &[1.0; 3], n, k);
    let a = [1.0f32; 10];
    let kernel = I8Kernel::best(Isa::best());
    let mut c = [0.0f32; 6];
    let mut scratch = vec![0.0; gemm_i8_scratch(2, k).len()];
    let run = |a: View<'_>, c: ViewMut<'_>, scratch: &mut [f32]| {
        gemm_i8_with(kernel, a, &b, c, &Epilogue::NONE, scratch, &Sequential)
    };
    assert!(matches!(
        run(
            View::new(&a, 2, 4, 4).unwrap(),
            ViewMut::new(&mut c, 2, 3, 3).unwrap(),
            &mut scratch
        ),
        Err(KernelError::ShapeMismatch { .. })
    ));
    assert!(matches!(
        ViewMut::new(&mut c, 2, 3, 2),
        Err(KernelError::BadStride { .. })
    ));
    // The int8 GEMM quantises whole rows: overlapping rows of A are refused.
    assert!(matches!(
        run(
            View::overlapping(&a, 2, 5, 4).unwrap(),
            ViewMut::new(&mut c, 2, 3, 3).unwrap(),
            &mut scratch
        ),
        Err(KernelError::BadStride { what: "a", .. })
    ));
    assert!(matches!(
        run(
            View::new(&a, 2, 5, 5).unwrap(),
            ViewMut::new(&mut c, 2, 3, 3).unwrap(),
            &mut scratch[..3]
        ),
        Err(KernelError::ScratchTooSmall { .. })
    ));
    assert!(run(
        View::new(&a, 2, 5, 5).unwrap(),
        ViewMut::new(&mut c, 2, 3, 3).unwrap(),
        &mut scratch
    )
    .is_ok());
    let bad_a = [-128i8; 10];
    let mut sums = [0i32; 6];
    let r = gemm_i32(
        kernel,
        View::new(&bad_a, 2, 5, 5).unwrap(),
        &b,
        ViewMut::new(&mut sums, 2, 3, 3).unwrap(),
        &mut scratch,
    );
    assert!(matches!(r, Err(KernelError::InvalidArgument(_))));
}

/// The primitives listed for a level are the ones its CPU features allow, best last.
#[test]
fn kernels_follow_the_cpu_features() {
    for_each_isa(|isa| {
        let kernels: Vec<I8Kernel> = I8Kernel::available(isa).collect();
        // Shown with `--nocapture`: which primitives this run covers.
        eprintln!("{isa}: int8 primitives {kernels:?}");
        assert_eq!(kernels.last().copied(), Some(I8Kernel::best(isa)));
        let vnni = isa.has_avx512_vnni() || isa.has_avx_vnni() || isa.has_neon_dotprod();
        let expected = if isa.level() == tessel_kernels::Level::Scalar {
            1
        } else {
            1 + usize::from(vnni)
        };
        assert_eq!(kernels.len(), expected, "{isa}: {kernels:?}");
    });
}
