//! LayerNorm / RMSNorm (every fused form), softmax and bias + activation against the `f64`
//! references at every ISA level: awkward widths up to ~5000, strides, NaN canaries around
//! every output and in every stride gap of every input, plus regression rows (huge means,
//! masked softmax rows, extreme GELU inputs) and argument validation.

use proptest::prelude::*;
use tessel_kernels::activation::{bias_activation, bias_activation_into, Activation};
use tessel_kernels::math::EXP_MAX_RELATIVE_ERROR;
use tessel_kernels::norm::{
    accumulate_normalize, add_normalize, add_normalize_in_place, normalize, normalize_in_place,
    Norm,
};
use tessel_kernels::reference::{activation as ref_activation, norm as reference};
use tessel_kernels::softmax::softmax_in_place;
use tessel_kernels::{Isa, KernelError};
use tessel_kernels::{View, ViewMut};
use tessel_tests::{assert_close, awkward_dim, cases, dot_tolerance, for_each_isa, CanaryMatrix};

/// Deterministic values in `[-1, 1)` (splitmix64), so cases stay small to shrink.
struct Values(u64);

impl Values {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// One generated problem: inputs `x` and `residual` of `rows × width` (strides `width + gap`),
/// and the per-column parameters.
#[derive(Debug, Clone)]
struct Case {
    rows: usize,
    width: usize,
    gap: usize,
    seed: u64,
    offset: f32,
    spread: f32,
    /// Added (times `spread`) to the first 16 columns: rows whose start is not representative
    /// of their mean take LayerNorm's second statistics pass.
    head_skew: f32,
    epsilon: f32,
}

impl Case {
    fn shape(&self) -> (usize, usize) {
        (self.rows, self.width)
    }
    fn stride(&self) -> usize {
        self.width + self.gap
    }
    /// An input matrix with canaries in the gaps; `salt` tells inputs apart.
    fn input(&self, salt: u64) -> CanaryMatrix {
        let mut values = Values(self.seed ^ salt.wrapping_mul(0xA076_1D64_78BD_642F));
        let (offset, spread, skew) = (self.offset, self.spread, self.head_skew);
        CanaryMatrix::filled(self.rows, self.width, self.stride(), |_, c| {
            let skew = if c < 16 { skew } else { 0.0 };
            offset + spread * (values.next() + skew)
        })
    }
    fn params(&self) -> (Vec<f32>, Vec<f32>) {
        let mut values = Values(self.seed.rotate_left(17));
        let gamma = (0..self.width).map(|_| 1.0 + 0.5 * values.next()).collect();
        let beta = (0..self.width).map(|_| values.next()).collect();
        (gamma, beta)
    }
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        0usize..=3,
        awkward_dim(5000),
        0usize..=3,
        any::<u64>(),
        prop::sample::select(vec![0.0f32, 1.0, -3.0, 1e3, 1e6]),
        prop::sample::select(vec![1e-3f32, 1.0, 100.0]),
        prop::sample::select(vec![0.0f32, 0.0, 30.0]),
        prop::sample::select(vec![1e-5f32, 1e-2, 1.0]),
    )
        .prop_map(
            |(rows, width, gap, seed, offset, spread, head_skew, epsilon)| Case {
                rows,
                width,
                gap,
                seed,
                offset,
                spread,
                head_skew,
                epsilon,
            },
        )
}

fn row(m: &CanaryMatrix, width: usize, r: usize) -> Vec<f32> {
    (0..width).map(|c| m.get(r, c)).collect()
}

/// Checks `out` row by row against `N(staged)`, with the bound derived in the norm module's
/// docs: `2 (width + 2) ε` times the output's scale (`|γ| · max|s - mean| / σ + |β|`).
fn check_norm(what: &str, norm: Norm<'_>, staged: &[Vec<f32>], out: &CanaryMatrix) {
    out.assert_padding_intact(what);
    for (r, s) in staged.iter().enumerate() {
        let width = s.len();
        let mut expected = vec![0.0f64; width];
        reference::normalize_row(norm, s, &mut expected);
        let actual = (0..width).map(|c| out.get(r, c));
        match norm {
            Norm::Layer {
                gamma,
                beta,
                epsilon,
            } => {
                let (mean, variance) = reference::mean_variance(s);
                let sigma = (variance + epsilon as f64).sqrt();
                let spread = s
                    .iter()
                    .map(|&v| (v as f64 - mean).abs())
                    .fold(0.0, f64::max);
                assert_close(&format!("{what} row {r}"), actual, expected, |c| {
                    let scale = gamma[c].abs() as f64 * spread / sigma + beta[c].abs() as f64;
                    dot_tolerance(width, scale)
                });
            }
            Norm::Rms { gamma, epsilon } => {
                let rstd = 1.0 / (reference::mean_square(s) + epsilon as f64).sqrt();
                assert_close(&format!("{what} row {r}"), actual, expected, |c| {
                    dot_tolerance(width, (gamma[c] * s[c]).abs() as f64 * rstd)
                });
            }
        }
    }
}

/// The rows of `x + residual` as the kernels define it (rounded to `f32`).
fn sums(case: &Case, x: &CanaryMatrix, residual: &CanaryMatrix) -> Vec<Vec<f32>> {
    (0..case.rows)
        .map(|r| {
            let mut s = vec![0.0; case.width];
            reference::add(
                &row(x, case.width, r),
                &row(residual, case.width, r),
                &mut s,
            );
            s
        })
        .collect()
}

fn assert_sum_exact(what: &str, sum: &CanaryMatrix, expected: &[Vec<f32>]) {
    sum.assert_padding_intact(what);
    for (r, s) in expected.iter().enumerate() {
        for (c, &v) in s.iter().enumerate() {
            assert_eq!(sum.get(r, c).to_bits(), v.to_bits(), "{what} ({r}, {c})");
        }
    }
}

/// Every form of one norm on one case at one level.
fn check_all_forms(isa: Isa, case: &Case, norm: Norm<'_>, name: &str) {
    let (shape, stride) = (case.shape(), case.stride());
    let (x, residual) = (case.input(1), case.input(2));
    let plain: Vec<Vec<f32>> = (0..case.rows).map(|r| row(&x, case.width, r)).collect();
    let summed = sums(case, &x, &residual);
    let what = |form: &str| format!("{isa} {name} {form} {case:?}");

    let mut out = CanaryMatrix::new(case.rows, case.width, stride + 1);
    let out_view = rows_mut(out.view_mut(), shape, stride + 1);
    normalize(isa, norm, rows_of(x.view(), shape, stride), out_view).unwrap();
    check_norm(&what("normalize"), norm, &plain, &out);

    let mut inplace = x.clone();
    normalize_in_place(isa, norm, rows_mut(inplace.view_mut(), shape, stride)).unwrap();
    check_norm(&what("normalize_in_place"), norm, &plain, &inplace);

    for with_sum in [false, true] {
        let mut out = CanaryMatrix::new(case.rows, case.width, stride);
        let mut sum = CanaryMatrix::new(case.rows, case.width, stride + 2);
        let sum_view = with_sum.then(|| rows_mut(sum.view_mut(), shape, stride + 2));
        add_normalize(
            isa,
            norm,
            rows_of(x.view(), shape, stride),
            rows_of(residual.view(), shape, stride),
            sum_view,
            rows_mut(out.view_mut(), shape, stride),
        )
        .unwrap();
        check_norm(&what("add_normalize"), norm, &summed, &out);
        if with_sum {
            assert_sum_exact(&what("add_normalize sum"), &sum, &summed);
        } else {
            sum.assert_padding_intact(&what("unused sum"));
        }
    }

    let mut post = x.clone();
    let post_view = rows_mut(post.view_mut(), shape, stride);
    add_normalize_in_place(
        isa,
        norm,
        post_view,
        rows_of(residual.view(), shape, stride),
    )
    .unwrap();
    check_norm(&what("add_normalize_in_place"), norm, &summed, &post);

    let mut stream = residual.clone();
    let mut out = CanaryMatrix::new(case.rows, case.width, stride);
    accumulate_normalize(
        isa,
        norm,
        rows_mut(stream.view_mut(), shape, stride),
        rows_of(x.view(), shape, stride),
        rows_mut(out.view_mut(), shape, stride),
    )
    .unwrap();
    check_norm(&what("accumulate_normalize"), norm, &summed, &out);
    assert_sum_exact(&what("accumulate_normalize residual"), &stream, &summed);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(40)))]

    #[test]
    fn norms_match_reference_in_every_form(case in case_strategy()) {
        let (gamma, beta) = case.params();
        for_each_isa(|isa| {
            check_all_forms(isa, &case, Norm::layer(&gamma, &beta, case.epsilon), "layer");
            check_all_forms(isa, &case, Norm::rms(&gamma, case.epsilon), "rms");
        });
    }

    #[test]
    fn softmax_matches_reference(
        case in case_strategy(),
        scale in prop::sample::select(vec![1.0f32, 0.125, -0.5, 0.0, 30.0]),
        masked_every in prop::sample::select(vec![0usize, 2, 7]),
    ) {
        let stride = case.stride();
        let mut input = case.input(3);
        for r in 0..case.rows {
            for c in (0..case.width).filter(|c| masked_every > 0 && c % masked_every == 1) {
                input.view_mut()[r * stride + c] = f32::NEG_INFINITY;
            }
        }
        for_each_isa(|isa| {
            let mut values = input.clone();
            softmax_in_place(isa, rows_mut(values.view_mut(), case.shape(), stride), scale)
                .unwrap();
            let what = format!("{isa} softmax scale {scale} {case:?}");
            values.assert_padding_intact(&what);
            for r in 0..case.rows {
                let x = row(&input, case.width, r);
                let mut expected = vec![0.0f64; case.width];
                reference::softmax_row(scale, &x, &mut expected);
                let logit = |v| reference::softmax_logit(scale, v);
                let max = x.iter().map(|&v| logit(v)).fold(f64::NEG_INFINITY, f64::max);
                let bound = |c: usize| {
                    let y = expected[c];
                    let z = (logit(x[c]) - max).abs();
                    let relative = 2.0 * EXP_MAX_RELATIVE_ERROR as f64 + 4.0 * f32::EPSILON as f64 * z;
                    let relative = if y == 0.0 { 0.0 } else { y * relative };
                    dot_tolerance(case.width, y) + relative + 1e-30
                };
                assert_close(&what, row(&values, case.width, r), expected.clone(), bound);
            }
        });
    }

    #[test]
    fn bias_activation_matches_reference(
        case in case_strategy(),
        activation in prop::sample::select(Activation::ALL.to_vec()),
        with_bias in any::<bool>(),
    ) {
        let stride = case.stride();
        let input = case.input(4);
        let (bias, _) = case.params();
        let zero = vec![0.0f32; case.width];
        let used_bias = if with_bias { &bias } else { &zero };
        for_each_isa(|isa| {
            let mut values = input.clone();
            let view = rows_mut(values.view_mut(), case.shape(), stride);
            if with_bias {
                bias_activation(isa, view, &bias, activation).unwrap();
            } else {
                activation.apply_rows(isa, view);
            }
            let mut out = CanaryMatrix::new(case.rows, case.width, stride + 3);
            bias_activation_into(
                isa,
                rows_of(input.view(), case.shape(), stride),
                with_bias.then_some(&bias[..]),
                activation,
                rows_mut(out.view_mut(), case.shape(), stride + 3),
            )
            .unwrap();
            for (form, values) in [("in place", &values), ("into", &out)] {
                let what = format!("{isa} {activation:?} {form} bias {with_bias} {case:?}");
                values.assert_padding_intact(&what);
                for r in 0..case.rows {
                    let pre: Vec<f32> =
                        (0..case.width).map(|c| input.get(r, c) + used_bias[c]).collect();
                    let expected = pre.iter().map(|&v| ref_activation::apply(activation, v as f64));
                    assert_close(&what, row(values, case.width, r), expected, |c| {
                        activation.max_error(pre[c] as f64)
                    });
                }
            }
        });
    }
}

/// Rows of 4096 elements and more: softmax's exponential pass prefetches the next row there,
/// and the norms' rows no longer fit L1 between passes. Every form on several strided rows of
/// such widths, with the same checks as the property tests (which rarely draw widths that
/// large).
#[test]
fn rows_of_4096_and_more() {
    for (width, gap, head_skew) in [(4096, 0, 0.0), (4099, 3, 30.0), (4111, 1, 0.0)] {
        let case = Case {
            rows: 3,
            width,
            gap,
            seed: width as u64,
            offset: 1e3,
            spread: 1.0,
            head_skew,
            epsilon: 1e-5,
        };
        let (gamma, beta) = case.params();
        let input = case.input(5);
        for_each_isa(|isa| {
            check_all_forms(
                isa,
                &case,
                Norm::layer(&gamma, &beta, case.epsilon),
                "layer",
            );
            check_all_forms(isa, &case, Norm::rms(&gamma, case.epsilon), "rms");
            let mut values = input.clone();
            let stride = case.stride();
            softmax_in_place(isa, rows_mut(values.view_mut(), case.shape(), stride), 0.01).unwrap();
            let what = format!("{isa} wide softmax {case:?}");
            values.assert_padding_intact(&what);
            for r in 0..case.rows {
                let x = row(&input, width, r);
                let mut expected = vec![0.0f64; width];
                reference::softmax_row(0.01, &x, &mut expected);
                let bound = |c: usize| {
                    let y = expected[c];
                    dot_tolerance(width, y) + y * 4.0 * EXP_MAX_RELATIVE_ERROR as f64 + 1e-30
                };
                assert_close(&what, row(&values, width, r), expected.clone(), bound);
            }
        });
    }
}

#[test]
fn layer_norm_of_huge_mean_with_tiny_variance() {
    for mean in [1e6f32, 3.3e7, 1e9] {
        let ulp = f32::EPSILON * mean;
        let width = 1031;
        // Values a few ulps around the mean: the spread is ~1e-7 of the magnitude, where
        // Σx²/n - mean² loses every digit.
        let x: Vec<f32> = (0..width)
            .map(|i| mean + ulp * ((i * 7 % 13) as f32 - 6.0))
            .collect();
        let gamma = vec![1.0f32; width];
        let beta = vec![0.0f32; width];
        let norm = Norm::layer(&gamma, &beta, 0.0);
        let mut expected = vec![0.0f64; width];
        reference::normalize_row(norm, &x, &mut expected);
        for_each_isa(|isa| {
            let mut out = vec![f32::NAN; width];
            let shape = (1, width);
            normalize(
                isa,
                norm,
                rows_of(&x, shape, width),
                rows_mut(&mut out, shape, width),
            )
            .unwrap();
            assert_close(
                &format!("{isa} mean {mean}"),
                out.iter().copied(),
                expected.clone(),
                |_| 1e-4,
            );
            let (m, v) = reference::mean_variance(&out);
            assert!(
                m.abs() < 1e-5 && (v - 1.0).abs() < 1e-4,
                "{isa}: mean {m}, var {v}"
            );
        });
    }
}

#[test]
fn softmax_regressions() {
    for_each_isa(|isa| {
        let mut big = [1234.0f32, 0.0];
        softmax_in_place(isa, rows_mut(&mut big, (1, 2), 2), 1.0).unwrap();
        assert_eq!(big, [1.0, 0.0], "{isa}");

        for width in [1usize, 5, 16, 37] {
            let mut masked = vec![f32::NEG_INFINITY; 2 * width];
            let shape = (2, width);
            softmax_in_place(isa, rows_mut(&mut masked, shape, width), 0.5).unwrap();
            assert!(
                masked.iter().all(|&v| v == 0.0),
                "{isa} width {width}: {masked:?}"
            );

            let mut poisoned = vec![f32::NEG_INFINITY; width];
            poisoned[width / 2] = f32::NAN;
            let shape = (1, width);
            softmax_in_place(isa, rows_mut(&mut poisoned, shape, width), 1.0).unwrap();
            assert!(
                poisoned.iter().all(|v| v.is_nan()),
                "{isa} width {width}: {poisoned:?}"
            );

            let mut with_nan: Vec<f32> = (0..width).map(|i| i as f32).collect();
            with_nan[width - 1] = f32::NAN;
            softmax_in_place(isa, rows_mut(&mut with_nan, shape, width), 1.0).unwrap();
            assert!(
                with_nan.iter().all(|v| v.is_nan()),
                "{isa} width {width}: {with_nan:?}"
            );
        }
    });
}

/// `-inf` is a masked entry whatever the scale (fuzz/findings/rows-softmax-scale-0-with-inf):
/// with `scale = 0` the unmasked entries share the row equally, with a negative scale they
/// are a softmax among themselves; `0 · (+inf)` is NaN and poisons the row.
#[test]
fn softmax_masks_whatever_the_scale() {
    for_each_isa(|isa| {
        for width in [2usize, 3, 17, 40] {
            let row: Vec<f32> = (0..width)
                .map(|c| {
                    if c % 3 == 1 {
                        f32::NEG_INFINITY
                    } else {
                        c as f32 * 0.25
                    }
                })
                .collect();
            for scale in [0.0f32, -0.0, -0.5, 0.5] {
                let mut values = row.clone();
                let shape = (1, width);
                softmax_in_place(isa, rows_mut(&mut values, shape, width), scale).unwrap();
                let mut expected = vec![0.0f64; width];
                reference::softmax_row(scale, &row, &mut expected);
                let unmasked = row.iter().filter(|v| v.is_finite()).count();
                for (c, (&y, &e)) in values.iter().zip(&expected).enumerate() {
                    let what = format!("{isa} width {width} scale {scale} entry {c}");
                    if row[c] == f32::NEG_INFINITY {
                        assert_eq!(y, 0.0, "{what}");
                        assert_eq!(e, 0.0, "{what}");
                    } else if scale == 0.0 {
                        assert!(
                            (y as f64 - 1.0 / unmasked as f64).abs() < 1e-6,
                            "{what}: {y}"
                        );
                    }
                    assert!((y as f64 - e).abs() < 1e-6, "{what}: {y} vs {e}");
                }
            }
            let mut poisoned = row.clone();
            poisoned[0] = f32::INFINITY;
            let mut expected = vec![0.0f64; width];
            reference::softmax_row(0.0, &poisoned, &mut expected);
            let shape = (1, width);
            softmax_in_place(isa, rows_mut(&mut poisoned, shape, width), 0.0).unwrap();
            assert!(
                poisoned.iter().all(|v| v.is_nan()) && expected.iter().all(|v| v.is_nan()),
                "{isa} width {width}: {poisoned:?} {expected:?}"
            );
        }
    });
}

#[test]
fn gelu_at_plus_minus_thirty_through_rows_and_bias() {
    for_each_isa(|isa| {
        for activation in [Activation::GeluErf, Activation::GeluTanh] {
            let mut v = [29.0f32, -31.0, 30.0, -30.0];
            let bias = [1.0f32, 1.0];
            bias_activation(isa, rows_mut(&mut v, (2, 2), 2), &bias, activation).unwrap();
            assert_eq!(v[0], 30.0, "{isa} {activation:?}");
            assert!(v[1].abs() < 1e-30, "{isa} {activation:?}: {}", v[1]);
            assert_eq!(v[2], 31.0, "{isa} {activation:?}");
            assert!(v[3].abs() < 1e-30, "{isa} {activation:?}: {}", v[3]);
        }
    });
}

#[test]
fn norm_of_constant_row_is_beta_and_epsilon_matters() {
    for_each_isa(|isa| {
        let width = 19;
        let x = vec![4.5f32; width];
        let gamma = vec![2.0f32; width];
        let beta: Vec<f32> = (0..width).map(|i| i as f32).collect();
        let mut out = vec![0.0f32; width];
        let shape = (1, width);
        let norm = Norm::layer(&gamma, &beta, 1e-5);
        normalize(
            isa,
            norm,
            rows_of(&x, shape, width),
            rows_mut(&mut out, shape, width),
        )
        .unwrap();
        assert_eq!(out, beta, "{isa}");

        // RMSNorm of a row of 3s is gamma · 3 / sqrt(9 + eps).
        let x = vec![3.0f32; width];
        for epsilon in [0.0f32, 7.0] {
            let norm = Norm::rms(&gamma, epsilon);
            normalize(
                isa,
                norm,
                rows_of(&x, shape, width),
                rows_mut(&mut out, shape, width),
            )
            .unwrap();
            let expected = 2.0 * 3.0 / (9.0 + epsilon as f64).sqrt();
            assert!(
                out.iter().all(|&v| (v as f64 - expected).abs() < 1e-6),
                "{isa} {out:?}"
            );
        }
    });
}

#[test]
fn bad_arguments_are_typed_errors_and_write_nothing() {
    let isa = Isa::best();
    let gamma = [1.0f32; 8];
    let beta = [0.0f32; 8];
    let x = [1.0f32; 24];
    let mut out = [7.0f32; 24];
    let norm = Norm::layer(&gamma, &beta, 1e-5);
    // Views their slices do not cover are refused when they are made.
    assert!(matches!(
        View::new(&x[..23], 3, 8, 8),
        Err(KernelError::BufferTooSmall { what: "view", .. })
    ));
    assert!(matches!(
        View::new(&x, 3, 8, 7),
        Err(KernelError::BadStride { what: "view", .. })
    ));
    assert!(matches!(
        ViewMut::new(&mut out[..20], 3, 8, 8),
        Err(KernelError::BufferTooSmall { what: "view", .. })
    ));
    assert!(matches!(
        ViewMut::new(&mut out, usize::MAX, 8, usize::MAX),
        Err(KernelError::Overflow(_))
    ));
    let run = |norm: Norm<'_>, x: View<'_>, out: &mut [f32]| {
        normalize(isa, norm, x, ViewMut::new(out, 3, 8, 8).unwrap())
    };
    let x_view = View::new(&x, 3, 8, 8).unwrap();
    assert!(matches!(
        run(norm, View::new(&x, 2, 8, 8).unwrap(), &mut out),
        Err(KernelError::ShapeMismatch {
            what: "out.rows",
            ..
        })
    ));
    let short_gamma = Norm::layer(&gamma[..7], &beta, 1e-5);
    assert!(matches!(
        run(short_gamma, x_view, &mut out),
        Err(KernelError::ShapeMismatch { what: "gamma", .. })
    ));
    let short_beta = Norm::layer(&gamma, &beta[..5], 1e-5);
    assert!(matches!(
        run(short_beta, x_view, &mut out),
        Err(KernelError::ShapeMismatch { what: "beta", .. })
    ));
    for epsilon in [-1.0f32, f32::NAN, f32::INFINITY] {
        let bad = Norm::rms(&gamma, epsilon);
        assert!(matches!(
            run(bad, x_view, &mut out),
            Err(KernelError::InvalidArgument(_))
        ));
    }
    assert!(
        out.iter().all(|&v| v == 7.0),
        "a refused call wrote its output"
    );

    let mut sum = [7.0f32; 24];
    let result = add_normalize(
        isa,
        norm,
        x_view,
        View::new(&x[..16], 2, 8, 8).unwrap(),
        Some(ViewMut::new(&mut sum, 3, 8, 8).unwrap()),
        ViewMut::new(&mut out, 3, 8, 8).unwrap(),
    );
    assert!(matches!(
        result,
        Err(KernelError::ShapeMismatch {
            what: "residual.rows",
            ..
        })
    ));
    let result = accumulate_normalize(
        isa,
        norm,
        ViewMut::new(&mut sum[..16], 2, 8, 8).unwrap(),
        x_view,
        ViewMut::new(&mut out, 3, 8, 8).unwrap(),
    );
    assert!(matches!(
        result,
        Err(KernelError::ShapeMismatch { what: "x.rows", .. })
    ));
    let result = add_normalize_in_place(
        isa,
        norm,
        ViewMut::new(&mut sum, 3, 8, 8).unwrap(),
        View::new(&x, 3, 4, 4).unwrap(),
    );
    assert!(matches!(
        result,
        Err(KernelError::ShapeMismatch {
            what: "residual.cols",
            ..
        })
    ));
    assert!(
        sum.iter().chain(&out).all(|&v| v == 7.0),
        "a refused call wrote"
    );

    assert!(matches!(
        softmax_in_place(isa, ViewMut::new(&mut sum, 3, 8, 8).unwrap(), f32::NAN),
        Err(KernelError::InvalidArgument(_))
    ));
    assert!(matches!(
        bias_activation(
            isa,
            ViewMut::new(&mut sum, 3, 8, 8).unwrap(),
            &gamma[..3],
            Activation::Relu
        ),
        Err(KernelError::ShapeMismatch { what: "bias", .. })
    ));
    assert!(matches!(
        bias_activation_into(
            isa,
            x_view,
            None,
            Activation::Relu,
            ViewMut::new(&mut sum, 2, 8, 8).unwrap()
        ),
        Err(KernelError::ShapeMismatch {
            what: "out.rows",
            ..
        })
    ));
    assert!(sum.iter().all(|&v| v == 7.0), "a refused call wrote");

    // Empty shapes are fine with empty buffers and any stride.
    normalize(
        isa,
        norm,
        View::new(&[], 0, 8, 0).unwrap(),
        ViewMut::new(&mut [], 0, 8, 0).unwrap(),
    )
    .unwrap();
    softmax_in_place(isa, ViewMut::new(&mut [], 4, 0, 0).unwrap(), 1.0).unwrap();
}

/// A `(rows, width)` view of `data`, rows `stride` apart.
fn rows_of(data: &[f32], (rows, width): (usize, usize), stride: usize) -> View<'_> {
    View::new(data, rows, width, stride).unwrap()
}

/// A writable `(rows, width)` view of `data`, rows `stride` apart.
fn rows_mut(data: &mut [f32], (rows, width): (usize, usize), stride: usize) -> ViewMut<'_> {
    ViewMut::new(data, rows, width, stride).unwrap()
}

#[test]
fn a_nan_poisons_only_its_own_row() {
    for_each_isa(|isa| {
        let width = 37;
        let gamma = vec![1.0f32; width];
        let beta = vec![0.5f32; width];
        let mut x: Vec<f32> = (0..2 * width).map(|i| (i % 11) as f32).collect();
        x[3] = f32::NAN;
        let residual = vec![1.0f32; 2 * width];
        for norm in [Norm::layer(&gamma, &beta, 1e-5), Norm::rms(&gamma, 1e-5)] {
            let mut out = vec![0.0f32; 2 * width];
            let shape = (2, width);
            add_normalize(
                isa,
                norm,
                rows_of(&x, shape, width),
                rows_of(&residual, shape, width),
                None,
                rows_mut(&mut out, shape, width),
            )
            .unwrap();
            assert!(out[..width].iter().all(|v| v.is_nan()), "{isa} {norm:?}");
            assert!(out[width..].iter().all(|v| v.is_finite()), "{isa} {norm:?}");
        }
    });
}
