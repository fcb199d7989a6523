//! GEMM with `f16` and `bf16` weights (f32 activations, f32 accumulation) against the f64
//! reference fed the same rounded weights, at every ISA level: random awkward shapes, strides,
//! epilogues, both weight layouts and both packing sources (f32 values rounded by the packer,
//! or 16-bit values packed as they are), NaN canaries around C. Plus the packing itself
//! (round to nearest even, zero padding, the documented layout), every 16-bit value widened
//! exactly (zero, subnormal, infinity, NaN), and typed errors.

use crate::gemm_support;

use gemm_support::{spec, Problem, Source, Spec, Values};
use proptest::prelude::*;
use tessel_kernels::gemm::{
    bf16, f16, gemm, gemm_scratch, packed_len, packed_len_of, Element, Epilogue, PackedB,
    Sequential,
};
use tessel_kernels::KernelError;
use tessel_kernels::{View, ViewMut};
use tessel_tests::runners::Threads;
use tessel_tests::{awkward_dim, cases, for_each_isa};

/// `problem` with B replaced by the `f32` values of its `T` rounding: what the kernel computes
/// with, and so what the reference must see.
fn rounded<T: Element>(problem: &Problem) -> Problem {
    let mut rounded = problem.clone();
    for x in &mut rounded.b {
        *x = T::from_f32(*x).to_f32();
    }
    rounded
}

/// B packed from 16-bit elements (already rounded) in `source`'s layout, with a row stride
/// `pad` elements wider than the matrix.
fn pack_elems<T: Element>(problem: &Problem, source: Source, pad: usize) -> PackedB<Vec<T>, T> {
    let (k, n) = (problem.k, problem.n);
    let storage = vec![T::from_f32(f32::NAN); packed_len_of::<T>(k, n).unwrap()];
    let strided = |rows: usize, cols: usize, dense: &[f32]| -> Vec<T> {
        let stride = cols + pad;
        let mut out = vec![T::from_f32(f32::NAN); (rows * stride).saturating_sub(pad)];
        for r in 0..rows {
            for c in 0..cols {
                out[r * stride + c] = T::from_f32(dense[r * cols + c]);
            }
        }
        out
    };
    match source {
        Source::Kn => {
            let data = strided(k, n, &problem.b);
            PackedB::from_kn(storage, View::new(&data, k, n, n + pad).unwrap()).unwrap()
        }
        Source::Nk => {
            let data = strided(n, k, &problem.b_nk());
            PackedB::from_nk(storage, View::new(&data, n, k, k + pad).unwrap()).unwrap()
        }
    }
}

/// Checks one spec for element type `T` at every level, from both packing sources.
fn check_type<T: Element>(spec: &Spec) {
    let problem = spec.problem(Values::uniform);
    let rounded = rounded::<T>(&problem);
    let expected = rounded.expected();
    let from_f32 = problem.pack::<T>(spec.source());
    let from_elems = pack_elems::<T>(&rounded, spec.source(), (spec.seed % 5) as usize);
    let same = from_f32
        .as_slice()
        .iter()
        .zip(from_elems.as_slice())
        .all(|(x, y)| x.to_f32().to_bits() == y.to_f32().to_bits());
    assert!(same, "{} {spec:?}: the two packing sources differ", T::NAME);
    for_each_isa(|isa| {
        for (b, what) in [(&from_f32, "f32 source"), (&from_elems, "16-bit source")] {
            let actual = rounded.run(isa, b, &Sequential);
            rounded.check(
                &format!("{isa} {} {what} {spec:?}", T::NAME),
                &actual,
                &expected,
            );
        }
    });
}

/// The BF16-dot opt-in: where the level has AVX-512 BF16 the kernel rounds A to bf16, so it
/// must match the reference fed the rounded A and B (f32 sums of exact bf16 products), and stay
/// within the documented `2^-8` relative bound per product of the exact-A reference; elsewhere
/// the flag is ignored and the exact-A result is required.
fn check_bf16_dot(spec: &Spec) {
    let problem = spec.problem(Values::uniform);
    let rounded_b = rounded::<bf16>(&problem);
    let mut rounded_ab = rounded_b.clone();
    for x in &mut rounded_ab.a {
        *x = bf16::from_f32(*x).to_f32();
    }
    let exact_a = rounded_b.expected();
    let bf16_a = rounded_ab.expected();
    let b = problem.pack::<bf16>(spec.source()).with_bf16_dot(true);
    assert!(b.bf16_dot());
    for_each_isa(|isa| {
        let actual = rounded_b.run(isa, &b, &Sequential);
        let what = format!("{isa} bf16-dot {spec:?}");
        if isa.has_avx512_bf16() {
            rounded_ab.check(&what, &actual, &bf16_a);
            let n = spec.n.max(1);
            let expected: Vec<f32> = exact_a.elements().collect();
            tessel_tests::assert_close(
                &what,
                actual.elements(),
                expected.iter().map(|&v| v as f64),
                |idx| {
                    let (i, j) = (idx / n, idx % n);
                    let abs_sum: f64 = (0..spec.k)
                        .map(|p| {
                            let a = rounded_b.a[i * rounded_b.lda + p] as f64;
                            (a * rounded_b.b[p * spec.n + j] as f64).abs()
                        })
                        .sum();
                    // Activations rounded to bf16 (`2^-8` relative per product), then the
                    // GELU slope and the usual f32 bound.
                    1.2 * abs_sum * 2f64.powi(-8) + rounded_b.bound(i, j, expected[idx])
                },
            );
        } else {
            rounded_b.check(&what, &actual, &exact_a);
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(12)))]

    /// The BF16-dot opt-in, every path (m up to 300).
    #[test]
    fn bf16_dot_matches_reference(spec in spec(awkward_dim(300), 600)) {
        check_bf16_dot(&spec);
    }

    /// The BF16-dot opt-in, decoding shapes.
    #[test]
    fn bf16_dot_small_m_matches_reference(spec in spec((0usize..=16).boxed(), 600)) {
        check_bf16_dot(&spec);
    }

    /// Every shape class (blocked path for m > 16), f16 weights.
    #[test]
    fn f16_matches_reference(spec in spec(awkward_dim(300), 600)) {
        check_type::<f16>(&spec);
    }

    /// Every shape class, bf16 weights.
    #[test]
    fn bf16_matches_reference(spec in spec(awkward_dim(300), 600)) {
        check_type::<bf16>(&spec);
    }

    /// The small-m (decoding) path, m = 0..=16, f16 weights.
    #[test]
    fn f16_small_m_matches_reference(spec in spec((0usize..=16).boxed(), 600)) {
        check_type::<f16>(&spec);
    }

    /// The small-m (decoding) path, bf16 weights.
    #[test]
    fn bf16_small_m_matches_reference(spec in spec((0usize..=16).boxed(), 600)) {
        check_type::<bf16>(&spec);
    }
}

/// Shapes that cross the block boundaries of every level (and the BF16-dot path's `k` blocks of
/// 1024), with odd and even `k`.
#[test]
fn edge_shapes_match_reference() {
    for (m, k, n) in [
        (0, 5, 7),
        (7, 0, 9),
        (1, 1, 1),
        (3, 2, 33),
        (16, 301, 97),
        (17, 257, 33),
        (29, 1025, 65),
        (41, 1100, 300),
    ] {
        let spec = Spec {
            m,
            k,
            n,
            pads: (3, 1, 2),
            bias: true,
            activation: 2,
            residual: true,
            source: k % 2 == 0,
            seed: (m * 1_000_003 + k * 1009 + n) as u64,
        };
        check_type::<f16>(&spec);
        check_type::<bf16>(&spec);
        check_bf16_dot(&spec);
    }
}

/// Every row of a `bf16` product holds the bits it would hold computed alone (small-`m` path,
/// blocked path with its widened panels, and the rows below the last whole tile). `f16` is the
/// exception: its one-row tile at AVX2 and AVX-512 sums even and odd rows apart
/// (`gemm::f16_pairs`), so one row alone rounds differently from the same row among others.
#[test]
fn a_row_does_not_depend_on_the_rows_beside_it() {
    fn check<T: Element>(m: usize, k: usize, n: usize) {
        let spec = Spec {
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
        let problem = rounded::<T>(&spec.problem(Values::uniform));
        let b = pack_elems::<T>(&problem, Source::Nk, 0);
        for_each_isa(|isa| {
            let full = problem.run(isa, &b, &Sequential);
            problem.assert_rows_independent(&format!("{m}x{k}x{n}"), isa, &b, &full);
        });
    }
    for (m, k, n) in [(5, 301, 97), (23, 1030, 97), (48, 257, 65)] {
        check::<bf16>(m, k, n);
    }
}

/// Runs `C(1 × n) = a(1 × k) · B` at every level and returns C per level.
fn products<T: Element>(a: &[f32], b: &PackedB<Vec<T>, T>) -> Vec<(String, Vec<f32>)> {
    let mut out = Vec::new();
    let mut scratch = vec![f32::NAN; gemm_scratch(1, a.len(), b.n(), 1).len()];
    for_each_isa(|isa| {
        let n = b.n();
        let mut c = vec![f32::NAN; n];
        gemm(
            isa,
            View::new(a, 1, a.len(), a.len()).unwrap(),
            b,
            ViewMut::new(&mut c, 1, n, n).unwrap(),
            &Epilogue::NONE,
            &mut scratch,
            &Sequential,
        )
        .unwrap();
        out.push((isa.to_string(), c));
    });
    out
}

/// Every one of the 65536 bit patterns, as an even row, an odd row and the last row of an odd
/// `k`, comes out of the kernel as its exact f32 value (NaN as a NaN; `0 + -0` is `+0`).
fn every_value_widens_exactly<T: Element>(from_bits: fn(u16) -> T) {
    let n = 1 << 16;
    let values: Vec<T> = (0..n).map(|bits| from_bits(bits as u16)).collect();
    let zeros = vec![T::ZERO; n];
    let cases: [(&[f32], Vec<&[T]>); 3] = [
        (&[1.0], vec![&values]),
        (&[1.0, 0.0], vec![&values, &zeros]),
        (&[0.0, 1.0], vec![&zeros, &values]),
    ];
    for (a, rows) in cases {
        let data: Vec<T> = rows.concat();
        let k = rows.len();
        let storage = vec![T::ZERO; packed_len_of::<T>(k, n).unwrap()];
        let b = PackedB::from_kn(storage, View::new(&data, k, n, n).unwrap()).unwrap();
        for (isa, c) in products(a, &b) {
            for (j, (&got, want)) in c.iter().zip(&values).enumerate() {
                let want = want.to_f32();
                let ok = if want.is_nan() {
                    got.is_nan()
                } else {
                    got == want
                };
                assert!(ok, "{isa} {} k={k} {j:#06x}: {got:e} != {want:e}", T::NAME);
            }
        }
    }
}

#[test]
fn every_f16_widens_exactly() {
    every_value_widens_exactly(f16::from_bits);
}

#[test]
fn every_bf16_widens_exactly() {
    every_value_widens_exactly(bf16::from_bits);
}

/// Packing from f32 rounds to nearest, ties to even.
#[test]
fn packing_rounds_to_nearest_even() {
    fn packed<T: Element>(values: &[f32]) -> Vec<f32> {
        let n = values.len();
        let storage = vec![T::ZERO; packed_len_of::<T>(1, n).unwrap()];
        let b = PackedB::<_, T>::from_kn(storage, View::new(values, 1, n, n).unwrap()).unwrap();
        (0..n).map(|j| b.get(0, j).unwrap().to_f32()).collect()
    }
    // bf16 keeps 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7.
    let u = 2f32.powi(-8);
    assert_eq!(
        packed::<bf16>(&[1.0 + u, 1.0 + 3.0 * u, 1.0 + 1.5 * u, -(1.0 + u)]),
        [1.0, 1.0 + 4.0 * u, 1.0 + 2.0 * u, -1.0]
    );
    // f16 keeps 11: 1 + 2^-11 is a tie between 1 and 1 + 2^-10.
    let u = 2f32.powi(-11);
    assert_eq!(
        packed::<f16>(&[1.0 + u, 1.0 + 3.0 * u, 1.0 + 1.5 * u, 65520.0, 1e-8]),
        [1.0, 1.0 + 4.0 * u, 1.0 + 2.0 * u, f32::INFINITY, 0.0]
    );
}

/// The documented layout: row pairs of native-endian words, zero padding (columns past `n`,
/// the extra row of an odd `k`), whatever the storage held before.
#[test]
fn layout_interleaves_row_pairs_and_pads_with_zero() {
    let (k, n) = (3, 37);
    let b: Vec<f32> = (0..k * n).map(|i| i as f32 + 1.0).collect();
    let len = packed_len_of::<bf16>(k, n).unwrap();
    assert_eq!(len, 4 * 64);
    assert_eq!(packed_len_of::<f16>(k, n), Ok(len));
    assert_eq!(packed_len_of::<f32>(k, n), packed_len(k, n));
    let packed =
        PackedB::<_, bf16>::from_kn(vec![bf16::NAN; len], View::new(&b, k, n, n).unwrap()).unwrap();
    let slice = packed.as_slice();
    let panel = 4 * 32;
    for kk in 0..4 {
        for col in 0..64 {
            let (p, j) = (col / 32, col % 32);
            let word = slice[p * panel + (kk / 2) * 64 + 2 * j..][..2].to_vec();
            let bits = u32::from_ne_bytes(
                [word[0].to_bits(), word[1].to_bits()]
                    .map(u16::to_ne_bytes)
                    .concat()
                    .try_into()
                    .unwrap(),
            );
            let half = if kk % 2 == 0 {
                bits as u16
            } else {
                (bits >> 16) as u16
            };
            let want = if kk < k && col < n {
                bf16::from_f32(b[kk * n + col])
            } else {
                bf16::ZERO
            };
            assert_eq!(half, want.to_bits(), "row {kk} col {col}");
            assert_eq!(packed.get(kk, col), (kk < k && col < n).then_some(want));
        }
    }
}

#[test]
fn bad_arguments_are_typed_errors() {
    let (k, n) = (5, 40);
    let len = packed_len_of::<f16>(k, n).unwrap();
    let b = vec![f16::ONE; k * n];
    let b32 = vec![1.0f32; k * n];
    let view = View::new(&b32, k, n, n).unwrap();
    assert!(matches!(
        PackedB::<_, f16>::from_kn(vec![f16::ZERO; len - 1], view),
        Err(KernelError::BufferTooSmall { .. })
    ));
    assert!(matches!(
        PackedB::<_, bf16>::from_kn(vec![bf16::ZERO; len + 1], view),
        Err(KernelError::ShapeMismatch { .. })
    ));
    assert!(matches!(
        View::new(&b[1..], k, n, n),
        Err(KernelError::BufferTooSmall { what: "view", .. })
    ));
    assert!(matches!(
        View::new(&b, n, k, k - 1),
        Err(KernelError::BadStride { what: "view", .. })
    ));
    assert!(PackedB::<_, f16>::from_packed(vec![f16::ZERO; len - 1], k, n).is_err());
    assert_eq!(
        packed_len_of::<bf16>(usize::MAX, 5),
        Err(KernelError::Overflow("packed b"))
    );
    let ok = PackedB::from_kn(vec![bf16::ZERO; len], View::new(&b, k, n, n).unwrap()).unwrap();
    // A must have `k` columns.
    let a = vec![1.0f32; 2 * (k + 1)];
    let mut c = vec![f32::NAN; 2 * n];
    let result = gemm(
        tessel_kernels::Isa::best(),
        View::new(&a, 2, k + 1, k + 1).unwrap(),
        &ok,
        ViewMut::new(&mut c, 2, n, n).unwrap(),
        &Epilogue::NONE,
        &mut [],
        &Sequential,
    );
    assert!(matches!(result, Err(KernelError::ShapeMismatch { .. })));
    assert!(c.iter().all(|x| x.is_nan()));
}

/// The blocked path (`m > 16`) widens each micro-panel of a 16-bit B once into a per-task
/// buffer of the scratch: several blocks of `k` (an odd `k` above every level's deepest block),
/// row blocks with a remainder below the last whole tile, tasks running at once, in a scratch
/// planned for the largest `m` and filled with NaN. Eighths times quarters summed over `k` are
/// exact in f32, so every level must give the reference's bits; C's canaries stay intact.
fn widened_blocks_match_reference<T: Element>() {
    let (k, n) = (1101, 70);
    let b: Vec<f32> = (0..k * n).map(|i| ((i % 13) as f32 - 6.0) / 8.0).collect();
    let storage = vec![T::from_f32(f32::NAN); packed_len_of::<T>(k, n).unwrap()];
    let packed = PackedB::from_kn(storage, View::new(&b, k, n, n).unwrap()).unwrap();
    for threads in [1, 3] {
        let runner = Threads::new(threads);
        let mut scratch = vec![f32::NAN; gemm_scratch(64, k, n, threads).len()];
        for_each_isa(|isa| {
            for m in [17, 23, 64] {
                let a: Vec<f32> = (0..m * k).map(|i| ((i % 7) as f32 - 3.0) / 4.0).collect();
                let mut c = tessel_tests::CanaryMatrix::new(m, n, n + 3);
                let stride = c.stride();
                gemm(
                    isa,
                    View::new(&a, m, k, k).unwrap(),
                    &packed,
                    ViewMut::new(c.view_mut(), m, n, stride).unwrap(),
                    &Epilogue::NONE,
                    &mut scratch,
                    &runner,
                )
                .unwrap_or_else(|e| panic!("{isa} {} m = {m}: {e}", T::NAME));
                let what = format!("{isa} {} m = {m} threads = {threads}", T::NAME);
                c.assert_padding_intact(&what);
                let mut expected = vec![0.0; m * n];
                tessel_kernels::reference::gemm::gemm(
                    View::new(&a, m, k, k).unwrap(),
                    View::new(&b, k, n, n).unwrap(),
                    ViewMut::new(&mut expected, m, n, n).unwrap(),
                    &Epilogue::NONE,
                )
                .unwrap();
                let got: Vec<f32> = c.elements().collect();
                assert_eq!(got, expected, "{what}");
            }
        });
    }
}

#[test]
fn widened_f16_blocks_match_reference() {
    widened_blocks_match_reference::<f16>();
}

#[test]
fn widened_bf16_blocks_match_reference() {
    widened_blocks_match_reference::<bf16>();
}
