//! GEMM against the f64 reference at every ISA level: random awkward shapes, strides,
//! epilogues and both weight layouts, NaN canaries around C; exact small-integer and identity
//! products; typed errors for bad arguments; bit-identical results for any thread count.

use crate::gemm_support;

use gemm_support::{spec, Source, Spec, Values};
use proptest::prelude::*;
use tessel_kernels::activation::Activation;
use tessel_kernels::gemm::{gemm, gemm_scratch, packed_len, Epilogue, PackedB, Sequential};
use tessel_kernels::{reference, Isa, KernelError};
use tessel_kernels::{View, ViewMut};
use tessel_tests::runners::{Faulty, Threads};
use tessel_tests::{awkward_dim, cases, for_each_isa};

fn check_every_level(spec: &Spec) {
    let problem = spec.problem(Values::uniform);
    let expected = problem.expected();
    let b = problem.pack::<f32>(spec.source());
    for_each_isa(|isa| {
        let actual = problem.run(isa, &b, &Sequential);
        problem.check(&format!("{isa} {spec:?}"), &actual, &expected);
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(24)))]

    /// Every shape class (packed path for m > 16) against the reference.
    #[test]
    fn matches_reference(spec in spec(awkward_dim(600), 600)) {
        check_every_level(&spec);
    }

    /// The small-m (decoding) path: m = 0..=16 with large k and n.
    #[test]
    fn small_m_matches_reference(spec in spec((0usize..=16).boxed(), 600)) {
        check_every_level(&spec);
    }
}

fn fixed(m: usize, k: usize, n: usize) -> Spec {
    Spec {
        m,
        k,
        n,
        pads: (3, 1, 2),
        bias: true,
        activation: 1,
        residual: true,
        source: false,
        seed: 0x5eed ^ (m * 1_000_003 + k * 1009 + n) as u64,
    }
}

/// Shapes that cross every block boundary of every level (row, depth and column blocks, panel
/// and tile edges).
const EDGE_SHAPES: [(usize, usize, usize); 9] = [
    (0, 5, 7),
    (7, 0, 9),
    (1, 1, 1),
    (16, 300, 97),
    (17, 257, 33),
    (170, 513, 65),
    (29, 31, 161),
    (3, 1000, 200),
    (41, 1100, 700),
];

/// The rows below the last whole tile of the blocked path (every residue of `m` modulo the
/// tile heights 8, 6 and 4), with `k` crossing the depth blocks of every level and a fused
/// epilogue.
#[test]
fn rows_below_the_last_whole_tile_match_reference() {
    for m in 17..=33 {
        check_every_level(&fixed(m, 1030, 97));
    }
}

#[test]
fn small_integers_are_exact() {
    for (m, k, n) in EDGE_SHAPES {
        let spec = fixed(m, k, n);
        let problem = spec.problem(Values::small_int);
        let expected = problem.expected();
        for source in [Source::Kn, Source::Nk] {
            let b = problem.pack::<f32>(source);
            for_each_isa(|isa| {
                let actual = problem.run(isa, &b, &Sequential);
                let same = actual
                    .elements()
                    .zip(expected.elements())
                    .all(|(x, y)| x == y);
                assert!(same, "{isa} {m}x{k}x{n} {source:?}: not exact");
            });
        }
    }
}

#[test]
fn identity_matrices_are_exact() {
    for size in [1, 5, 16, 17, 40, 131] {
        let mut v = Values(size as u64 + 7);
        let x = v.vec(size * size, Values::uniform);
        let eye: Vec<f32> = (0..size * size)
            .map(|i| f32::from(u8::from(i / size == i % size)))
            .collect();
        let mut storage_eye = vec![0.0; packed_len(size, size).unwrap()];
        let packed_eye = PackedB::from_kn(
            &mut storage_eye[..],
            View::new(&eye, size, size, size).unwrap(),
        )
        .unwrap();
        let mut storage_x = vec![0.0; packed_len(size, size).unwrap()];
        let packed_x =
            PackedB::from_kn(&mut storage_x[..], View::new(&x, size, size, size).unwrap()).unwrap();
        for_each_isa(|isa| {
            for (a, b) in [(&x, &packed_eye), (&eye, &packed_x)] {
                let mut c = vec![f32::NAN; size * size];
                let mut scratch = vec![0.0; gemm_scratch(size, size, size, 1).len()];
                gemm(
                    isa,
                    View::new(a, size, size, size).unwrap(),
                    b,
                    ViewMut::new(&mut c, size, size, size).unwrap(),
                    &Epilogue::NONE,
                    &mut scratch,
                    &Sequential,
                )
                .unwrap();
                assert_eq!(c, x, "{isa} {size}: A·I and I·B must give back the matrix");
            }
        });
    }
}

#[test]
fn epilogue_order_is_bias_activation_residual() {
    // A·B = [-2, 3]; plus bias [1, -5] = [-1, -2]; relu = [0, 0]; plus residual [10, 20].
    let a = [1.0f32, 1.0];
    let b = [-1.0f32, 1.0, -1.0, 2.0];
    let mut storage = vec![0.0; packed_len(2, 2).unwrap()];
    let packed = PackedB::from_kn(&mut storage[..], View::new(&b, 2, 2, 2).unwrap()).unwrap();
    let bias = [1.0f32, -5.0];
    let residual = [10.0f32, 20.0];
    let epilogue = Epilogue {
        bias: Some(&bias),
        activation: Activation::Relu,
        residual: Some(View::new(&residual, 1, 2, 2).unwrap()),
    };
    let mut scratch = vec![f32::NAN; gemm_scratch(1, 2, 2, 1).len()];
    for_each_isa(|isa| {
        let mut c = [f32::NAN; 2];
        gemm(
            isa,
            View::new(&a, 1, 2, 2).unwrap(),
            &packed,
            ViewMut::new(&mut c, 1, 2, 2).unwrap(),
            &epilogue,
            &mut scratch,
            &Sequential,
        )
        .unwrap();
        assert_eq!(c, [10.0, 20.0], "{isa}");
    });
}

#[test]
fn any_thread_count_is_bit_identical() {
    for (m, k, n) in [
        (1, 300, 1000),
        (5, 77, 333),
        (16, 64, 129),
        (37, 300, 290),
        (200, 40, 64),
    ] {
        let spec = Spec {
            activation: 2,
            ..fixed(m, k, n)
        };
        let problem = spec.problem(Values::uniform);
        let b = problem.pack::<f32>(Source::Nk);
        for_each_isa(|isa| {
            let one = problem.run(isa, &b, &Sequential);
            for threads in [2, 3, 4, 7, 64, 100] {
                let many = problem.run(isa, &b, &Threads::new(threads));
                let same = one
                    .elements()
                    .zip(many.elements())
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{isa} {m}x{k}x{n}: {threads} threads differ from one");
            }
        });
    }
}

/// Every row of a product holds the bits it would hold computed alone, on the small-`m` path,
/// the blocked path and the rows below its last whole tile.
#[test]
fn a_row_does_not_depend_on_the_rows_beside_it() {
    for (m, k, n) in [(4, 300, 290), (16, 257, 97), (23, 1030, 97), (64, 513, 65)] {
        let problem = fixed(m, k, n).problem(Values::uniform);
        let b = problem.pack::<f32>(Source::Nk);
        for_each_isa(|isa| {
            let full = problem.run(isa, &b, &Sequential);
            problem.assert_rows_independent(&format!("{m}x{k}x{n}"), isa, &b, &full);
        });
    }
}

#[test]
fn faulty_runners_are_detected_or_harmless() {
    let problem = fixed(20, 50, 100).problem(Values::small_int);
    let expected = problem.expected();
    let b = problem.pack::<f32>(Source::Kn);
    let twice = problem.run(
        Isa::best(),
        &b,
        &Faulty {
            skip_last: false,
            threads: 3,
        },
    );
    assert!(twice
        .elements()
        .zip(expected.elements())
        .all(|(x, y)| x == y));
    let mut c = vec![0.0; 20 * 100];
    let mut scratch = vec![0.0; gemm_scratch(20, 50, 100, 3).len()];
    let result = gemm(
        Isa::best(),
        problem.a(),
        &b,
        ViewMut::new(&mut c, 20, 100, 100).unwrap(),
        &problem.epilogue(),
        &mut scratch,
        &Faulty {
            skip_last: true,
            threads: 3,
        },
    );
    assert!(
        matches!(result, Err(KernelError::InvalidArgument(_))),
        "{result:?}"
    );
}

#[test]
fn bad_arguments_are_typed_errors_and_write_nothing() {
    let (m, k, n) = (20, 9, 40);
    let a = vec![1.0f32; m * k];
    let b = vec![1.0f32; k * n];
    let mut storage = vec![0.0; packed_len(k, n).unwrap()];
    let packed = PackedB::from_kn(&mut storage[..], View::new(&b, k, n, n).unwrap()).unwrap();
    let bias = vec![0.0f32; n];
    let residual = vec![0.0f32; m * n];
    let spec_len = gemm_scratch(m, k, n, 1).len();
    assert!(spec_len > 0);

    let run = |a: View<'_>, epilogue: Epilogue<'_>, scratch: usize| {
        let mut c = vec![f32::NAN; m * n];
        let mut scratch = vec![0.0; scratch];
        let result = gemm(
            Isa::best(),
            a,
            &packed,
            ViewMut::new(&mut c, m, n, n).unwrap(),
            &epilogue,
            &mut scratch,
            &Sequential,
        );
        assert!(
            c.iter().all(|x| x.is_nan()),
            "C written on error {result:?}"
        );
        result.unwrap_err()
    };
    // Views their slices do not cover are refused when they are made.
    assert!(matches!(
        View::new(&a[1..], m, k, k),
        Err(KernelError::BufferTooSmall { what: "view", .. })
    ));
    assert!(matches!(
        View::overlapping(&a[..(m - 1) * (k - 1) + k - 1], m, k, k - 1),
        Err(KernelError::BufferTooSmall { what: "view", .. })
    ));
    let mut c = vec![f32::NAN; m * n];
    assert!(matches!(
        ViewMut::new(&mut c[..m * n - 1], m, n, n),
        Err(KernelError::BufferTooSmall { what: "view", .. })
    ));
    assert!(matches!(
        ViewMut::new(&mut c, m, n, n - 1),
        Err(KernelError::BadStride { what: "view", .. })
    ));
    assert!(matches!(
        View::new(&residual[1..], m, n, n),
        Err(KernelError::BufferTooSmall { what: "view", .. })
    ));
    // A shape whose element count overflows is refused, not wrapped.
    assert!(matches!(
        View::new(&a, usize::MAX / 2, k, usize::MAX / 4),
        Err(KernelError::Overflow(_))
    ));

    let good_a = View::new(&a, m, k, k).unwrap();
    let none = Epilogue::NONE;
    assert!(matches!(
        run(View::new(&a, m, k - 1, k - 1).unwrap(), none, spec_len),
        KernelError::ShapeMismatch { .. }
    ));
    assert!(matches!(
        run(good_a, none, spec_len - 1),
        KernelError::ScratchTooSmall { .. }
    ));
    let short_bias = Epilogue {
        bias: Some(&bias[1..]),
        ..none
    };
    assert!(matches!(
        run(good_a, short_bias, spec_len),
        KernelError::ShapeMismatch { .. }
    ));
    let wrong_residual = Epilogue {
        residual: Some(View::new(&residual, m - 1, n, n).unwrap()),
        ..none
    };
    assert!(matches!(
        run(good_a, wrong_residual, spec_len),
        KernelError::ShapeMismatch { .. }
    ));
}

#[test]
fn scratch_planned_for_m_rows_serves_every_smaller_product() {
    // A host plans once for its largest batch (the model: the longest source) and then runs
    // every shorter one in the same buffer, at any level and thread count.
    let (k, n) = (1100, 70);
    let b: Vec<f32> = (0..k * n).map(|i| ((i % 13) as f32 - 6.0) / 8.0).collect();
    let mut storage = vec![0.0; packed_len(k, n).unwrap()];
    let packed = PackedB::from_kn(&mut storage[..], View::new(&b, k, n, n).unwrap()).unwrap();
    for threads in [1, 3] {
        let plan = gemm_scratch(64, k, n, threads);
        for m in 0..=64 {
            assert!(
                gemm_scratch(m, k, n, threads).len() <= plan.len(),
                "m = {m}"
            );
        }
        let mut scratch = vec![f32::NAN; plan.len()];
        for_each_isa(|isa| {
            for m in [17, 23, 37, 40, 63, 64] {
                let a: Vec<f32> = (0..m * k).map(|i| ((i % 7) as f32 - 3.0) / 4.0).collect();
                let mut c = vec![0.0; m * n];
                gemm(
                    isa,
                    View::new(&a, m, k, k).unwrap(),
                    &packed,
                    ViewMut::new(&mut c, m, n, n).unwrap(),
                    &Epilogue::NONE,
                    &mut scratch,
                    &Sequential,
                )
                .unwrap_or_else(|e| panic!("{isa} m = {m} threads = {threads}: {e}"));
                // Eighths times quarters summed over k: exact in f32, so equal to the reference.
                let mut expected = vec![0.0; m * n];
                reference::gemm::gemm(
                    View::new(&a, m, k, k).unwrap(),
                    View::new(&b, k, n, n).unwrap(),
                    ViewMut::new(&mut expected, m, n, n).unwrap(),
                    &Epilogue::NONE,
                )
                .unwrap();
                assert_eq!(c, expected, "{isa} m = {m}");
            }
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(16)))]

    /// A's rows may overlap (`stride < k`): a 1-D convolution of kernel width `w` over a
    /// time-major input is a GEMM whose A rows are sliding windows of the input. The result
    /// must be bit for bit the GEMM over the same windows copied out (same values, same order).
    #[test]
    fn overlapping_rows_of_a_equal_their_copy(
        frames in awkward_dim(40).prop_filter("positive", |&f| f > 0),
        channels in awkward_dim(20).prop_filter("positive", |&c| c > 0),
        width in 1usize..4,
        hop in 1usize..3,
        n in awkward_dim(50),
        seed in any::<u64>(),
    ) {
        let k = width * channels;
        let rows = (frames.saturating_sub(width)) / hop + 1;
        let stride = hop * channels;
        let input: Vec<f32> = (0..(rows - 1) * stride + k)
            .map(|i| ((i as u64).wrapping_mul(seed | 1) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let weights: Vec<f32> = (0..k * n).map(|i| ((i * 7 + 3) % 11) as f32 / 11.0 - 0.5).collect();
        let mut storage = vec![0.0; packed_len(k, n).unwrap()];
        let packed = PackedB::from_kn(&mut storage[..], View::new(&weights, k, n, n).unwrap()).unwrap();
        let copied: Vec<f32> = (0..rows).flat_map(|r| input[r * stride..r * stride + k].to_vec()).collect();
        for_each_isa(|isa| {
            let mut scratch = vec![0.0; gemm_scratch(rows, k, n, 1).len()];
            let mut windows = vec![f32::NAN; rows * n];
            let mut expected = vec![f32::NAN; rows * n];
            gemm(isa, View::overlapping(&input, rows, k, stride).unwrap(), &packed,
                ViewMut::new(&mut windows, rows, n, n).unwrap(), &Epilogue::NONE, &mut scratch, &Sequential).unwrap();
            gemm(isa, View::new(&copied, rows, k, k).unwrap(), &packed,
                ViewMut::new(&mut expected, rows, n, n).unwrap(), &Epilogue::NONE, &mut scratch, &Sequential).unwrap();
            let same = windows.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{isa}: overlapping A differs from its copy");
        });
    }
}
